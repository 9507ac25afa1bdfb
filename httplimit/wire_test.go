package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// needCurl skips t when curl is not installed, except with
// RATEGATE_REQUIRE_CURL=1 (as .ci/run, which installs curl, should set),
// where it fails.
func needCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("RATEGATE_REQUIRE_CURL") == "1" {
			t.Fatalf("curl is not installed (RATEGATE_REQUIRE_CURL=1): %v", err)
		}
		t.Skip("curl is not installed")
	}
}

// curl fetches url with curl and returns the response head as sent on the
// wire (status line and header lines, CRLFs removed).
func curl(t *testing.T, url string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "-i", "--http1.1", "-o", "-", url}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	head, _, _ := strings.Cut(string(out), "\r\n\r\n")
	return strings.Split(head, "\r\n")
}

// field returns the value of the one header line named name (any case),
// failing the test if there is not exactly one.
func field(t *testing.T, head []string, name string) string {
	t.Helper()
	var vals []string
	for _, l := range head[1:] {
		if k, v, ok := strings.Cut(l, ": "); ok && strings.EqualFold(k, name) {
			vals = append(vals, v)
		}
	}
	if len(vals) != 1 {
		t.Fatalf("%s: %d header lines in %q, want 1", name, len(vals), head)
	}
	return vals[0]
}

// The fields' wire format, read by curl from a real server on loopback:
// the exact syntax of draft-ietf-httpapi-ratelimit-headers-11 (structured
// field lists of a string item with integer parameters), Retry-After as
// delay-seconds, and the legacy fields.
func TestWireFormatCurl(t *testing.T) {
	needCurl(t)
	lim, err := limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 2, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Options{Limiter: lim, LegacyHeaders: true, Policy: "hourly"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Wrap(ok))
	defer srv.Close()

	// The window is an hour from the limiter's creation: t is 3600 s, or
	// 3599 s if a second has passed.
	tRe := `(3600|3599)`
	for i, left := range []string{"1", "0"} {
		head := curl(t, srv.URL)
		if head[0] != "HTTP/1.1 200 OK" {
			t.Fatalf("request %d: %q", i, head[0])
		}
		if got := field(t, head, "RateLimit-Policy"); got != `"hourly";q=2;w=3600` {
			t.Errorf("RateLimit-Policy: %s", got)
		}
		matchField(t, head, "RateLimit", `^"hourly";r=`+left+`;t=`+tRe+`$`)
		matchField(t, head, "X-RateLimit-Limit", `^2$`)
		matchField(t, head, "X-RateLimit-Remaining", `^`+left+`$`)
		reset := matchField(t, head, "X-RateLimit-Reset", `^[0-9]{10}$`)
		if now := time.Now().Unix(); !within(reset, now+3590, now+3601) {
			t.Errorf("X-RateLimit-Reset %s: not an hour from now (%d)", reset, now)
		}
	}
	head := curl(t, srv.URL)
	if head[0] != "HTTP/1.1 429 Too Many Requests" {
		t.Fatalf("third request: %q", head[0])
	}
	ra := matchField(t, head, "Retry-After", `^`+tRe+`$`)
	matchField(t, head, "RateLimit", `^"hourly";r=0;t=`+ra+`$`)
	matchField(t, head, "RateLimit-Policy", `^"hourly";q=2;w=3600$`)
	matchField(t, head, "Content-Type", `^text/plain; charset=utf-8$`)
}

// The concurrency policy on the wire: no window, quota unit
// "concurrent-requests", and r without t.
func TestWireFormatConcurrencyCurl(t *testing.T) {
	needCurl(t)
	lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 8})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Options{Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Wrap(ok))
	defer srv.Close()
	head := curl(t, srv.URL)
	matchField(t, head, "RateLimit-Policy", `^"default";q=8;qu="concurrent-requests"$`)
	matchField(t, head, "RateLimit", `^"default";r=7$`)
}

// Behind a trusted proxy hop, curl's X-Forwarded-For names the client.
func TestForwardedForCurl(t *testing.T) {
	needCurl(t)
	key, err := httplimit.IPKey(httplimit.IPKeyOptions{Trusted: loopback})
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.LimitByKey(1, time.Hour, key)(ok)
	srv := httptest.NewServer(h)
	defer srv.Close()
	codes := map[string]string{}
	for _, c := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.1", "6.6.6.6, 198.51.100.2"} {
		codes[c] += strings.Fields(curl(t, srv.URL, "-H", "X-Forwarded-For: "+c)[0])[1] + " "
	}
	if codes["198.51.100.1"] != "200 429 " || codes["198.51.100.2"] != "200 " || codes["6.6.6.6, 198.51.100.2"] != "429 " {
		t.Errorf("statuses by X-Forwarded-For: %q", codes)
	}
}

func matchField(t *testing.T, head []string, name, re string) string {
	t.Helper()
	v := field(t, head, name)
	if !regexp.MustCompile(re).MatchString(v) {
		t.Errorf("%s: %q does not match %s", name, v, re)
	}
	return v
}

func within(s string, lo, hi int64) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= lo && n <= hi
}

// net/http's client reads the same fields.
func TestWireFormatNetHTTP(t *testing.T) {
	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 1, Window: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Options{Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Wrap(ok))
	defer srv.Close()
	c := srv.Client()
	var resps []*http.Response
	for range 2 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resps = append(resps, resp)
	}
	if resps[0].StatusCode != 200 || resps[1].StatusCode != 429 {
		t.Fatalf("statuses %d %d", resps[0].StatusCode, resps[1].StatusCode)
	}
	if got := resps[1].Header.Get("RateLimit-Policy"); got != `"default";q=1;w=90` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	ra := resps[1].Header.Get("Retry-After")
	if ra != "90" && ra != "89" {
		t.Errorf("Retry-After %q, want 90 (or 89)", ra)
	}
	if got := resps[1].Header.Get("RateLimit"); got != `"default";r=0;t=`+ra {
		t.Errorf("RateLimit %q", got)
	}
}
