package httplimit_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// Fuzz targets for the option validation of New, IPKey and NewKeyedLog.

// refusedFor checks that err is an *limiter.OptionError naming one of the
// fields whose rule the options break (problems: field -> what is wrong),
// and that err is nil when they break none.
func refusedFor(t *testing.T, what string, err error, problems map[string]string) {
	t.Helper()
	if err == nil {
		for field, p := range problems {
			t.Fatalf("%s: accepted, but %s %s", what, field, p)
		}
		return
	}
	var oe *limiter.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: error %T %v, want an *limiter.OptionError", what, err, err)
	}
	if len(problems) == 0 {
		t.Fatalf("%s: valid options refused: %v", what, err)
	}
	if _, ok := problems[oe.Field]; !ok || !strings.Contains(err.Error(), oe.Field) {
		t.Fatalf("%s: error %q names %q, want one of %v", what, err, oe.Field, problems)
	}
}

// quoted is name as a structured-field string (RFC 8941 sString).
func quoted(name string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
}

// FuzzNew: New accepts exactly the options that set at most one of
// Limiter, PerKey and Keyed, a Wait that is not negative, a QueueFullStatus
// of 0, 429 or 503, and a Policy of printable ASCII, and refuses the others
// with an *limiter.OptionError naming a field that breaks its rule. A
// middleware it returns serves a first request under a limit of 1 per
// hour, with the RateLimit-Policy field of its Policy (unless NoHeaders)
// and the legacy fields if asked, and refuses the second with 429 and
// Retry-After.
func FuzzNew(f *testing.F) {
	f.Add(uint8(0), int64(0), 0, "", false, false)
	f.Add(uint8(1), int64(0), 429, "per-ip", false, true)
	f.Add(uint8(2), int64(time.Second), 503, `per "minute"\`, true, false)
	f.Add(uint8(4), int64(10*time.Second), 0, " ~", true, true)
	f.Add(uint8(1), int64(time.Hour), 0, "", false, false) // Wait long enough to queue
	f.Add(uint8(3), int64(0), 0, "", false, false)         // Limiter and PerKey
	f.Add(uint8(7), int64(-1), 200, "tab\t", false, false)
	f.Add(uint8(1), int64(math.MinInt64), 0, "", false, false)
	f.Add(uint8(1), int64(0), 428, "", false, false)
	f.Add(uint8(1), int64(0), -429, "", false, false)
	f.Add(uint8(4), int64(0), 0, "caf\u00e9", false, false)
	f.Add(uint8(2), int64(0), 0, "del\x7f", false, false)
	f.Fuzz(func(t *testing.T, which uint8, wait int64, status int, policy string, noHeaders, legacy bool) {
		// Every limit is 1 per hour; which says which of Limiter (1),
		// PerKey (2) and Keyed (4) are set.
		set, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		o := httplimit.Options{Wait: time.Duration(wait), QueueFullStatus: status, Policy: policy, NoHeaders: noHeaders, LegacyHeaders: legacy}
		if which&1 != 0 {
			o.Limiter = set.For("all")
		}
		if which&2 != 0 {
			o.PerKey = set.For
		}
		if which&4 != 0 {
			o.Keyed = set
		}
		what := fmt.Sprintf("New(limiters %03b, Wait %v, QueueFullStatus %d, Policy %q, NoHeaders %v, LegacyHeaders %v)",
			which&7, o.Wait, status, policy, noHeaders, legacy)
		problems := map[string]string{}
		if bits := which&1 + which>>1&1 + which>>2&1; bits > 1 {
			problems["Limiter"] = "sets more than one of Limiter, PerKey and Keyed"
		}
		if wait < 0 {
			problems["Wait"] = "is negative"
		}
		if status != 0 && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
			problems["QueueFullStatus"] = "is neither 429 nor 503"
		}
		for _, c := range []byte(policy) {
			if c < ' ' || c > '~' {
				problems["Policy"] = "holds a byte that is not printable ASCII"
			}
		}
		m, err := httplimit.New(o)
		refusedFor(t, what, err, problems)
		if err != nil {
			if m != nil {
				t.Fatalf("%s: a Middleware and the error %v", what, err)
			}
			return
		}
		h := m.Wrap(ok)
		resp := serve(h, get("192.0.2.1:1234"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: first request: %s, want 200", what, resp.Status)
		}
		limited := which&7 != 0
		if !limited {
			if resp = serve(h, get("192.0.2.1:1234")); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: no limit, second request: %s, want 200", what, resp.Status)
			}
			return
		}
		name := policy
		if name == "" {
			name = "default"
		}
		switch p := resp.Header.Get("RateLimit-Policy"); {
		case noHeaders && p != "":
			t.Fatalf("%s: RateLimit-Policy %q with NoHeaders", what, p)
		case !noHeaders && !strings.HasPrefix(p, quoted(name)+";"):
			t.Fatalf("%s: RateLimit-Policy %q, want the policy %s", what, p, quoted(name))
		}
		if l := resp.Header.Get("X-RateLimit-Limit"); legacy != (l == "1") {
			t.Fatalf("%s: X-RateLimit-Limit %q", what, l)
		}
		if o.Wait >= 30*time.Minute {
			return // the second request would queue for the hour
		}
		resp = serve(h, get("192.0.2.1:1234"))
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || err != nil || ra < 1 {
			t.Fatalf("%s: second request: %s, Retry-After %q, want 429 and a wait", what, resp.Status, resp.Header.Get("Retry-After"))
		}
	})
}

// FuzzIPKey: IPKey accepts exactly valid Trusted prefixes, a Header that
// names X-Forwarded-For or Forwarded in any case (or is empty), and an
// IPv6Prefix from 0 to 128, naming the field it refuses (Trusted[i] for
// the i-th prefix). A KeyFunc it returns keys an IPv4 peer by its address
// and an IPv6 peer by its network of IPv6Prefix bits (64 for 0).
func FuzzIPKey(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0}, 8, "", 0)
	f.Add([]byte{10, 0, 0, 0}, 32, "x-forwarded-for", 128)
	f.Add(netip.MustParseAddr("2001:db8::").AsSlice(), 32, "FORWARDED", 1)
	f.Add(netip.MustParseAddr("2001:db8::").AsSlice(), 128, "Forwarded", 48)
	f.Add([]byte{10, 0, 0, 0}, 0, "X-Forwarded-For", 64)
	f.Add([]byte{10, 0, 0, 0}, 33, "", 0)
	f.Add([]byte{10, 0, 0, 0}, -1, "", 0)
	f.Add([]byte{10, 0, 0}, 8, "", 0)
	f.Add([]byte(nil), 0, "", 0)
	f.Add([]byte{10, 0, 0, 0}, 8, "X-Real-IP", 0)
	f.Add([]byte{10, 0, 0, 0}, 8, "X-Forwarded-For ", 0)
	f.Add([]byte{10, 0, 0, 0}, 8, "", 129)
	f.Add([]byte{10, 0, 0, 0}, 8, "", -1)
	f.Fuzz(func(t *testing.T, addr []byte, bits int, header string, v6 int) {
		a, _ := netip.AddrFromSlice(addr)
		p := netip.PrefixFrom(a, bits)
		o := httplimit.IPKeyOptions{Trusted: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), p}, Header: header, IPv6Prefix: v6}
		what := fmt.Sprintf("IPKey(Trusted [192.0.2.0/24 %v], Header %q, IPv6Prefix %d)", p, header, v6)
		problems := map[string]string{}
		if (len(addr) != 4 && len(addr) != 16) || bits < 0 || bits > 8*len(addr) {
			problems["Trusted[1]"] = "is not a valid prefix"
		}
		if header != "" && !strings.EqualFold(header, "X-Forwarded-For") && !strings.EqualFold(header, "Forwarded") {
			problems["Header"] = "names neither X-Forwarded-For nor Forwarded"
		}
		if v6 < 0 || v6 > 128 {
			problems["IPv6Prefix"] = "is not from 0 to 128"
		}
		key, err := httplimit.IPKey(o)
		refusedFor(t, what, err, problems)
		if err != nil {
			if key != nil {
				t.Fatalf("%s: a KeyFunc and the error %v", what, err)
			}
			return
		}
		if k, err := key(get("198.51.100.7:80")); k != "198.51.100.7" || err != nil {
			t.Fatalf("%s: IPv4 peer keyed %q, %v", what, k, err)
		}
		if v6 == 0 {
			v6 = httplimit.DefaultIPv6Prefix
		}
		peer := netip.MustParseAddr("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff")
		want := netip.PrefixFrom(peer, v6).Masked().String()
		if v6 == 128 {
			want = peer.String()
		}
		if k, err := key(get("[" + peer.String() + "]:80")); k != want || err != nil {
			t.Fatalf("%s: IPv6 peer keyed %q, %v, want %q", what, k, err, want)
		}
	})
}

// FuzzNewKeyedLog: NewKeyedLog accepts exactly a positive Limit and Window
// and a MaxKeys that is not negative, naming the field it refuses. A
// KeyedLog it returns grants a new key Limit permits (up to 4096) at once, and refuses
// more than Limit with ErrExceedsLimit; with a long Window, a key that has
// had its Limit is refused.
func FuzzNewKeyedLog(f *testing.F) {
	const maxTake = 1 << 12
	f.Add(10, int64(time.Minute), 0)
	f.Add(1, int64(1), 1)
	f.Add(math.MaxInt, int64(math.MaxInt64), math.MaxInt)
	f.Add(3, int64(time.Hour), 64)
	f.Add(0, int64(time.Second), 0)
	f.Add(-1, int64(time.Second), 0)
	f.Add(1, int64(0), 0)
	f.Add(1, int64(-time.Second), 0)
	f.Add(1, int64(time.Second), -1)
	f.Add(math.MinInt, int64(math.MinInt64), math.MinInt)
	f.Fuzz(func(t *testing.T, limit int, window int64, maxKeys int) {
		o := httplimit.KeyedLogOptions{Limit: limit, Window: time.Duration(window), MaxKeys: maxKeys}
		what := fmt.Sprintf("NewKeyedLog(%+v)", o)
		problems := map[string]string{}
		if limit <= 0 {
			problems["Limit"] = "is not positive"
		}
		if window <= 0 {
			problems["Window"] = "is not positive"
		}
		if maxKeys < 0 {
			problems["MaxKeys"] = "is negative"
		}
		k, err := httplimit.NewKeyedLog(o)
		refusedFor(t, what, err, problems)
		if err != nil {
			if k != nil {
				t.Fatalf("%s: a KeyedLog and the error %v", what, err)
			}
			return
		}
		// A key holds each permit of its window (8 bytes), so take at
		// most maxTake at once.
		take := min(limit, maxTake)
		if l := k.TryAcquire("a", take); !l.Granted() || l.Permits() != take {
			t.Fatalf("%s: new key: TryAcquire(%d) = {Granted:%v Permits:%d Err:%v}", what, take, l.Granted(), l.Permits(), l.Err())
		}
		if l := k.TryAcquire("a", 1); take == limit && window >= int64(time.Minute) && l.Granted() {
			t.Fatalf("%s: TryAcquire(1) granted after Limit within the window", what)
		}
		if limit < math.MaxInt {
			if l := k.TryAcquire("b", limit+1); l.Granted() || !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
				t.Fatalf("%s: TryAcquire(Limit+1) = {Granted:%v Err:%v}, want ErrExceedsLimit", what, l.Granted(), l.Err())
			}
		}
	})
}
