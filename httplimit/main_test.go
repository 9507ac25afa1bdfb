package httplimit_test

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

var loadFlag = flag.Bool("httplimit.load", false, "run the 10 s load test (TestLoad) instead of its 2 s version")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve sends r to h in memory and returns the response.
func serve(h http.Handler, r *http.Request) *http.Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Result()
}

// get makes a GET request from addr (a RemoteAddr, "ip:port").
func get(addr string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	return r
}

// ok is a handler that answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte("ok"))
})
