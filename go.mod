module github.com/rategate/rategate

go 1.25
