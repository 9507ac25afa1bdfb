module github.com/rategate/rategate

go 1.25

require (
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.30.0
	pgregory.net/rapid v1.3.0
)

require github.com/stretchr/testify v1.8.4 // indirect
