module github.com/rategate/rategate/bench

go 1.25

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/juju/ratelimit v1.0.2
	github.com/rategate/rategate v0.0.0
	github.com/sourcegraph/conc v0.3.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.14.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	go.uber.org/atomic v1.7.0 // indirect
	go.uber.org/multierr v1.9.0 // indirect
)

replace github.com/rategate/rategate => ../
