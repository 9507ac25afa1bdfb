module github.com/rategate/rategate

go 1.25

require (
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.19.0
	pgregory.net/rapid v1.3.0
)
