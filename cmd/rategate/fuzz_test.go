package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

// Fuzz targets for the flag values rategate reads on top of
// limiter.ParseRate and pipe.ParseByteRate (fuzzed in their packages): the
// pipe's -rate and -burst, the -rate, -window and -burst of lines and run,
// and run's -per-key.

// checkUsage checks that err, the refusal of a flag value, is a usage error
// (exit status 2).
func checkUsage(t *testing.T, what string, err error) {
	t.Helper()
	var ue *usageError
	if !errors.As(err, &ue) || err.Error() == "" {
		t.Fatalf("%s: error %T %v, want a usage error", what, err, err)
	}
}

// checkLocal checks that the limit l that a parser accepted makes a working
// limiter, or is refused by the limiter's options with an
// *limiter.OptionError (which the commands report as a usage error): a
// fresh one grants n permits.
func checkLocal(t *testing.T, what string, l limit, n int) {
	t.Helper()
	lim, err := l.local()
	if err != nil {
		var oe *limiter.OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("%s: accepted, but the limiter fails with %T %v, not an *limiter.OptionError", what, err, err)
		}
		return
	}
	lease := lim.TryAcquire(n)
	if !lease.Granted() {
		t.Fatalf("%s: a fresh limiter refuses %d permits: %v", what, n, lease.Err())
	}
	lease.Release()
	if c, ok := lim.(interface{ Close() error }); ok {
		if err := c.Close(); err != nil {
			t.Fatalf("%s: Close: %v", what, err)
		}
	}
}

// FuzzParseByteLimit: pipe's -rate and -burst are accepted exactly when
// -rate is a byte rate of at most math.MaxInt bytes per period and -burst
// is empty or a size of at most the rate's bytes per period; otherwise the
// refusal is a usage error. An accepted limit has the rate read and the
// burst given (by default a tenth of the period's bytes, at least 1), a
// chunk from 1 to the burst, and makes a limiter that grants a chunk at
// once.
func FuzzParseByteLimit(f *testing.F) {
	for _, s := range [][2]string{
		{"2MiB/s", ""}, {"2MiB/s", "64KiB"}, {"1B/s", ""}, {"1B/s", "1B"}, {"10B/s", "10"}, {"10B/s", "11"},
		{"500kB/s", "0"}, {"500kB/s", "-1KiB"}, {"1GB/min", "1GB"}, {"1TiB/ns", ""}, {"1KiB/1m30s", "1.5KiB"},
		{"", ""}, {"", "1KiB"}, {"5/min", ""}, {"2MiB", ""}, {"0B/s", ""}, {"1B/0s", ""}, {"2MiB/s", "2MiB/s"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rate, burst string) {
		what := "-rate " + rate + " -burst " + burst
		l, err := parseByteLimit(rate, burst)
		r, rerr := pipe.ParseByteRate(rate)
		n := r.Events()
		b, berr := pipe.ParseBytes(burst)
		valid := rate != "" && rerr == nil && n <= math.MaxInt && (burst == "" || berr == nil && b <= n)
		if err != nil {
			checkUsage(t, what, err)
			if valid {
				t.Fatalf("%s: valid flags refused: %v", what, err)
			}
			return
		}
		if !valid {
			t.Fatalf("%s: accepted (rate %v, burst %d), want a usage error", what, l.rate, l.burst)
		}
		want := int(b)
		if burst == "" {
			want = int(min(n, max(1, n/10)))
		}
		switch {
		case l.rate != r:
			t.Fatalf("%s: rate %v, want %v", what, l.rate, r)
		case l.burst != want:
			t.Fatalf("%s: burst %d, want %d", what, l.burst, want)
		case l.chunk() < 1 || l.chunk() > l.burst:
			t.Fatalf("%s: chunk %d, want 1 to the burst %d", what, l.chunk(), l.burst)
		}
		checkLocal(t, what, l, l.chunk())
	})
}

// FuzzEventFlags: the -rate, -window and -burst of lines and run. With no
// -rate there is no limit, and -burst is refused; else -rate must parse,
// -window be smooth (with -burst from 1 to the rate's N; 0 means a tenth
// of N, at least 2, at most N) or strict (with no -burst). Refusals are
// usage errors. An accepted limit has the rate read and the burst set
// (0 with strict), and makes a limiter that grants at once.
func FuzzEventFlags(f *testing.F) {
	for _, s := range []struct {
		rate, window string
		burst        int
	}{
		{"100/s", "smooth", 0}, {"100/s", "smooth", 100}, {"100/s", "smooth", 101}, {"1/s", "smooth", 0},
		{"5/min", "strict", 0}, {"5/min", "strict", 2}, {"2/1500ms", "smooth", -1}, {"100/s", "Smooth", 0},
		{"", "smooth", 0}, {"", "smooth", 3}, {"", "bogus", 0}, {"0/s", "smooth", 0}, {"x", "strict", 0},
		{"9223372036854775807/s", "smooth", 0}, {"9223372036854775807/9999999h", "strict", 0},
	} {
		f.Add(s.rate, s.window, s.burst)
	}
	f.Fuzz(func(t *testing.T, rate, window string, burst int) {
		ev := eventFlags{rate: rate, window: window, burst: burst}
		what := "-rate " + rate + " -window " + window + " -burst " + strconv.Itoa(burst)
		l, ok, err := ev.parse()
		r, rerr := limiter.ParseRate(rate)
		n := r.Events()
		want := burst
		if want == 0 && window == "smooth" {
			want = int(min(n, max(2, n/10)))
		}
		var valid bool
		switch {
		case rate == "":
			valid = burst == 0
		case rerr != nil:
		case window == "smooth":
			valid = want >= 1 && int64(want) <= n
		case window == "strict":
			valid = burst == 0
		}
		if err != nil {
			checkUsage(t, what, err)
			if valid || ok {
				t.Fatalf("%s: valid flags refused (ok %v): %v", what, ok, err)
			}
			return
		}
		switch {
		case !valid:
			t.Fatalf("%s: accepted (ok %v, rate %v, burst %d), want a usage error", what, ok, l.rate, l.burst)
		case rate == "":
			if ok {
				t.Fatalf("%s: a limit (rate %v) with no -rate", what, l.rate)
			}
			return
		case !ok || l.rate != r || l.burst != want:
			t.Fatalf("%s: ok %v, rate %v, burst %d, want a limit of %v, burst %d", what, ok, l.rate, l.burst, r, want)
		}
		checkLocal(t, what, l, 1)
	})
}

// fieldNumber returns the decimal number s ("+" allowed in front), or -1
// when s is not one or it does not fit an int.
func fieldNumber(s string) int {
	digits := strings.TrimLeft(strings.TrimPrefix(s, "+"), "0")
	if len(strings.TrimPrefix(s, "+")) == 0 || strings.Trim(digits, "0123456789") != "" {
		return -1
	}
	const maxInt = "9223372036854775807"
	if len(digits) > len(maxInt) || len(digits) == len(maxInt) && digits > maxInt {
		return -1
	}
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	return n
}

// FuzzParseKeyFunc: run's -per-key is host or a field number from 1,
// anything else a usage error. A field number N keys a line by its Nth
// whitespace-separated field ("" when it has fewer); host keys it by a
// lower-case host name, "" when no field is a URL with a host.
func FuzzParseKeyFunc(f *testing.F) {
	for _, s := range [][2]string{
		{"1", "a b c"}, {"3", "a b c"}, {"4", "a b c"}, {"2", "  x\ty  "}, {"host", "GET https://Example.COM:8080/x"},
		{"host", "no url here"}, {"host", "mailto://@/ http://h/"}, {"0", "a"}, {"-1", "a"}, {"Host", "a"},
		{"", "a"}, {"1.5", "a"}, {"+2", "a b"}, {"99999999999999999999", "a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, spec, line string) {
		what := "-per-key " + spec
		key, err := parseKeyFunc(spec)
		field := 0 // the field number, -1 if spec is not one
		if spec != "host" {
			field = fieldNumber(spec)
		}
		valid := spec == "host" || field >= 1
		if err != nil {
			checkUsage(t, what, err)
			if valid {
				t.Fatalf("%s: valid flag refused: %v", what, err)
			}
			return
		}
		if !valid {
			t.Fatalf("%s: accepted", what)
		}
		got := key(line)
		if spec == "host" {
			if got != strings.ToLower(got) || strings.ContainsAny(got, " \t\n/") {
				t.Fatalf("%s: line %q keyed %q, want a lower-case host name", what, line, got)
			}
			if !strings.Contains(line, "://") && got != "" {
				t.Fatalf("%s: line %q with no URL keyed %q", what, line, got)
			}
			return
		}
		fields := strings.Fields(line)
		want := ""
		if field <= len(fields) {
			want = fields[field-1]
		}
		if got != want {
			t.Fatalf("%s: line %q keyed %q, want %q", what, line, got, want)
		}
	})
}
