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

func TestRedisKey(t *testing.T) {
	for _, tc := range []struct {
		kind, key, sub string
		keyed          bool
		suffix, want   string
	}{
		{"tb", "api", "", false, "", "rategate:tb:{api}"},
		{"sl", "api", "", false, ":log", "rategate:sl:{api}:log"},
		{"tb", "{acme}day", "", false, "", "rategate:tb:{acme}=%7Bacme%7Dday"},
		{"sl", "api", "}{x", true, ":log", "rategate:sl:{%7D%7Bx}/api/%7D%7Bx:log"},
		{"sl", "api", "{acme}alice", true, "", "rategate:sl:{acme}/api/%7Bacme%7Dalice"},
		{"tb", "{}", "", false, "", "rategate:tb:{%7B%7D}"}, // an empty tag: the whole key
	} {
		if k := redisKey(tc.kind, tc.key, tc.sub, tc.keyed, tc.suffix); k != tc.want {
			t.Errorf("redisKey(%q, %q, %q, %v, %q) = %q, want %q", tc.kind, tc.key, tc.sub, tc.keyed, tc.suffix, k, tc.want)
		}
	}
	// No two limits share a key: a plain and a keyed one, or keys that
	// move a separator.
	for _, pair := range [][2]string{
		{redisKey("tb", "k", "", false, ""), redisKey("tb", "k", "k", true, "")},
		{redisKey("tb", "a/b", "c", true, ""), redisKey("tb", "a", "b/c", true, "")},
		{redisKey("tb", "{t}a=b", "", false, ""), redisKey("tb", "{t}a", "", false, "=b")},
		{redisKey("tb", "{k}", "", false, ""), redisKey("tb", "k", "", false, "")},
	} {
		if pair[0] == pair[1] {
			t.Errorf("two limits share the key %q", pair[0])
		}
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
		for _, k := range []string{redisKey("sl", a, b, true, ":log"), redisKey("sl", a, "", false, ""), redisKey("tb", b, a, true, "")} {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
				t.Fatalf("the Redis key %q has more than one hash tag", k)
			}
		}
		if redisKey("tb", a, "", false, "") == redisKey("tb", b, "", false, "") && a != b {
			t.Fatalf("%q and %q share a Redis key", a, b)
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

// For allocates at most once: the key's limiter, its Redis keys inside it.
func TestKeyedForAllocs(t *testing.T) {
	c := newClient(t)
	for _, k := range []*Keyed{
		must(NewKeyedTokenBucket(Options{Client: c, Key: "api"}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1})),
		must(NewKeyedSlidingLog(Options{Client: c, Key: "api per tenant"}, limiter.SlidingLogOptions{Limit: 1, Window: time.Second})),
	} {
		defer k.Close()
		for _, key := range []string{"203.0.113.7", "2001:db8::1", "tenant a/user b", strings.Repeat("k", 40)} {
			if a := testing.AllocsPerRun(100, func() { k.For(key) }); a > 1 {
				t.Errorf("For(%q) allocates %.0f times", key, a)
			}
		}
	}
	// A key whose Redis key is too long for the room inside the limiter
	// costs one more: its Redis keys' bytes, made once at their length
	// (not once per doubling of a growing slice, and with no copy of the
	// key to hash it).
	k := must(NewKeyedTokenBucket(Options{Client: c, Key: "api"}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1}))
	defer k.Close()
	long := strings.Repeat("k", 250)
	if a := testing.AllocsPerRun(100, func() { k.For(long) }); a > 2 {
		t.Errorf("For of a %d-byte key allocates %.0f times, want 2", len(long), a)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
