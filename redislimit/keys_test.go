package redislimit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

func TestEncodeKeyPart(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"},
		{"[2001:db8::1]", "[2001:db8::1]"},
		{"tenant a", "tenant%20a"},
		{"a{b}c", "a%7Bb%7Dc"},
		{"a%7Bb%7Dc", "a%257Bb%257Dc"},
		{"x/y", "x%2Fy"},
		{"", ""},
	} {
		if got := encodeKeyPart(tc.in); got != tc.want {
			t.Errorf("encodeKeyPart(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	h := encodeKeyPart(long)
	if len(h) != 65 || h[0] != '~' || h == encodeKeyPart(long+"y") {
		t.Errorf("a long key: %q", h)
	}
}

func TestHashTag(t *testing.T) {
	if a, b := hashTag("k", "", false), hashTag("k", "", true); a == b {
		t.Errorf("a plain and a keyed limit share the tag %q", a)
	}
	// A sub-key cannot reach another Options.Key's limit.
	if a, b := hashTag("a/b", "c", true), hashTag("a", "b/c", true); a == b {
		t.Errorf("two limits share the tag %q", a)
	}
	if k := redisKey("sl", hashTag("api", "}{x", true), ":log"); k != "rategate:sl:{api/%7D%7Bx}:log" {
		t.Errorf("redisKey = %q", k)
	}
}

// FuzzEncodeKeyPart: for any two inputs, the encodings are bounded, carry
// no hash-tag brace or separator, and differ when the inputs do.
func FuzzEncodeKeyPart(f *testing.F) {
	f.Add("10.0.0.1", "10.0.0.2")
	f.Add("a{b}", "a%7Bb%7D")
	f.Add(strings.Repeat("z", 70), strings.Repeat("z", 71))
	f.Add("~abc", "%7Eabc")
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := encodeKeyPart(a), encodeKeyPart(b)
		for _, e := range []string{ea, eb} {
			if len(e) > maxKeyPart+1 || strings.ContainsAny(e, "{}/") {
				t.Fatalf("encoding %q: too long, or with a brace or slash", e)
			}
		}
		if a != b && ea == eb {
			t.Fatalf("%q and %q both encode to %q", a, b, ea)
		}
		if tag := hashTag(a, b, true); strings.Count(tag, "{") != 1 || strings.Count(tag, "}") != 1 {
			t.Fatalf("hashTag(%q, %q) = %q", a, b, tag)
		}
	})
}

// FuzzOptions: any Options either validate or fail with an
// *limiter.OptionError, never a panic.
func FuzzOptions(f *testing.F) {
	f.Add("k", 0, int64(0), int64(0), true)
	f.Add("", 3, int64(-1), int64(1), false)
	f.Fuzz(func(t *testing.T, key string, policy int, timeout, ttl int64, client bool) {
		o := Options{Key: key, OnError: ErrorPolicy(policy), Timeout: timeDur(timeout), LeaseTTL: timeDur(ttl)}
		if client {
			o.Client = newClient(t)
		}
		err := o.validate(ttl%2 == 0)
		if err == nil {
			return
		}
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field == "" {
			t.Fatalf("not an OptionError naming a field: %v", err)
		}
	})
}

func timeDur(n int64) time.Duration { return time.Duration(n) }
