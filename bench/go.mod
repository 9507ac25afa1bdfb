module github.com/rategate/rategate/bench

go 1.25

require (
	github.com/rategate/rategate v0.0.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.14.0
)

require github.com/benbjohnson/clock v1.3.0 // indirect

replace github.com/rategate/rategate => ../
