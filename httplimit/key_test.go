package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, c := range []struct {
		name    string
		remote  string
		headers map[string][]string
		trusted []netip.Prefix
		want    string
	}{
		{"remote addr", "192.0.2.7:5555", nil, nil, "192.0.2.7"},
		{"remote IPv6: its /64", "[2001:db8::7]:5555", nil, nil, "2001:db8::/64"},
		{"remote IPv6 zone", "[fe80::1%eth0]:80", nil, nil, "fe80::/64"},
		{"remote 4in6", "[::ffff:192.0.2.7]:80", nil, nil, "192.0.2.7"},
		{"remote without port", "192.0.2.7", nil, nil, "192.0.2.7"},
		{"untrusted peer: header ignored", "192.0.2.7:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, proxies, "192.0.2.7"},
		{"no trusted prefixes: header ignored", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, nil, "10.0.0.1"},
		{"trusted peer", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, proxies, "198.51.100.1"},
		{"spoofed left entries", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1"}}, proxies, "198.51.100.1"},
		{"chain of proxies", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.1.1.1, 10.2.2.2"}}, proxies, "198.51.100.1"},
		{"several header lines", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1", "10.1.1.1"}}, proxies, "198.51.100.1"},
		{"all trusted", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"10.9.9.9, 10.1.1.1"}}, proxies, "10.9.9.9"},
		{"garbage from a trusted hop", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, unknown, 10.1.1.1"}}, proxies, "10.1.1.1"},
		{"IPv6 entry with port", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"[2001:db8::9]:443"}}, proxies, "2001:db8::/64"},
		{"non-canonical entry", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"2001:DB8:0::9"}}, proxies, "2001:db8::/64"},
		{"trusted 4in6 peer", "[::ffff:10.0.0.1]:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, proxies, "198.51.100.1"},
		{"trusted IPv6 peer", "[2001:db8:ffff::1]:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, proxies, "198.51.100.1"},
		{"Forwarded", "10.0.0.1:1", map[string][]string{"Forwarded": {`for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https`}}, proxies, "2001:db8:cafe::/64"},
		{"Forwarded chain", "10.0.0.1:1", map[string][]string{"Forwarded": {"for=198.51.100.1;by=10.1.1.1, For=10.1.1.1"}}, proxies, "198.51.100.1"},
		{"Forwarded unknown", "10.0.0.1:1", map[string][]string{"Forwarded": {"for=unknown, for=10.1.1.1"}}, proxies, "10.1.1.1"},
		{"X-Forwarded-For before Forwarded", "10.0.0.1:1", map[string][]string{"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"198.51.100.1"}}, proxies, "198.51.100.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := get(c.remote)
			for k, v := range c.headers {
				r.Header[k] = v
			}
			got, err := httplimit.ClientIP(c.trusted...)(r)
			if err != nil || got != c.want {
				t.Errorf("ClientIP = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestIPKey(t *testing.T) {
	key, err := httplimit.IPKey(httplimit.IPKeyOptions{IPv6Prefix: 64, Header: "forwarded", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]string{
		"[2001:db8:1:2:3:4:5:6]:1":  "2001:db8:1:2::/64",
		"[2001:db8:1:2::99]:1":      "2001:db8:1:2::/64",
		"192.0.2.1:1":               "192.0.2.1",
		"[::ffff:192.0.2.1]:1":      "192.0.2.1",
		"127.0.0.1:1 for=192.0.2.8": "192.0.2.8",
	} {
		r := get(remote)
		if addr, fwd, ok := strings.Cut(remote, " "); ok {
			r.RemoteAddr = addr
			r.Header.Set("Forwarded", fwd)
			r.Header.Set("X-Forwarded-For", "6.6.6.6") // not the header named
		}
		if got, err := key(r); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", remote, got, err, want)
		}
	}
	full, err := httplimit.IPKey(httplimit.IPKeyOptions{IPv6Prefix: 128})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := full(get("[2001:db8:0::9]:1")); got != "2001:db8::9" {
		t.Errorf("IPv6Prefix 128: %q, want the address", got)
	}
	def, _ := httplimit.IPKey(httplimit.IPKeyOptions{})
	if got, _ := def(get("[2001:db8:1:2:3:4:5:6]:1")); got != "2001:db8:1:2::/64" {
		t.Errorf("IPv6Prefix 0: %q, want the /64", got)
	}
	if _, err := key(get("not an address")); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("bad RemoteAddr: %v, want ErrNoKey", err)
	}
	for field, o := range map[string]httplimit.IPKeyOptions{
		"Trusted[1]": {Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}},
		"Header":     {Header: "X-Real-IP"},
		"IPv6Prefix": {IPv6Prefix: 129},
	} {
		_, err := httplimit.IPKey(o)
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != field {
			t.Errorf("%+v: %v, want an OptionError for %s", o, err, field)
		}
	}
}

func TestHeaderAndKeys(t *testing.T) {
	r := get("192.0.2.1:1")
	if _, err := httplimit.HeaderKey("x-api-key")(r); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("missing header: %v", err)
	}
	r.Header.Set("X-Api-Key", "secret")
	if k, err := httplimit.HeaderKey("x-api-key")(r); k != "secret" || err != nil {
		t.Errorf("header key %q %v", k, err)
	}
	r.Pattern = "GET /x"
	k, err := httplimit.Keys(httplimit.Route, httplimit.HeaderKey("X-Api-Key"), httplimit.ClientIP())(r)
	if err != nil || k != "GET /x\x00secret\x00192.0.2.1" {
		t.Errorf("Keys = %q, %v", k, err)
	}
	chi := httplimit.RouteFunc(func(*http.Request) string { return "/users/{id}" })
	if k, _ := chi(r); k != "/users/{id}" {
		t.Errorf("RouteFunc = %q", k)
	}
	if _, err := httplimit.RouteFunc(func(*http.Request) string { return "" })(r); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("RouteFunc without pattern: %v", err)
	}
}

// FuzzClientIP: any RemoteAddr and forwarding headers give a key that is
// an IPv4 address or an IPv6 /64 (or an error), and an untrusted peer is
// its own key whatever the headers say.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:1", "6.6.6.6, 198.51.100.1", `for="[2001:db8::1]:80"`)
	f.Add("192.0.2.1:1", "198.51.100.1", "for=unknown")
	f.Add("[::1]:1", "", "for=_hidden;proto=http, for=1.2.3.4")
	trusted := httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"))
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		r := get(remote)
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["Forwarded"] = []string{fwd}
		key, err := trusted(r)
		if err != nil {
			return
		}
		if p, perr := netip.ParsePrefix(key); perr == nil {
			if !p.Addr().Is6() || p.Bits() != 64 || p.Masked() != p || p.String() != key {
				t.Fatalf("remote %q xff %q fwd %q: key %q is not a canonical IPv6 /64", remote, xff, fwd, key)
			}
		} else if a, perr := netip.ParseAddr(key); perr != nil || !a.Is4() || a.String() != key {
			t.Fatalf("remote %q xff %q fwd %q: key %q is not a canonical IPv4 address", remote, xff, fwd, key)
		}
		if peer, _ := httplimit.ClientIP()(r); peer != "" && !strings.HasPrefix(peer, "10.") && peer != "::/64" && key != peer {
			t.Errorf("untrusted peer %q keyed as %q", peer, key)
		}
	})
}

// LimitByIP and ClientIP key an IPv6 client by its /64: 20 requests from
// 20 addresses of one /64 against LimitByIP(2, time.Minute) get 2 served.
func TestIPv6GroupedBy64(t *testing.T) {
	h := httplimit.LimitByIP(2, time.Minute)(ok)
	served := 0
	for i := range 20 {
		if serve(h, get(fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1))).StatusCode == 200 {
			served++
		}
	}
	if served != 2 {
		t.Errorf("%d of 20 requests from one /64 served, want 2", served)
	}
	// Another /64 has its own quota.
	if code := serve(h, get("[2001:db8:1:3::1]:443")).StatusCode; code != 200 {
		t.Errorf("another /64: %d", code)
	}
	key, err := httplimit.ClientIP()(get("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:1"))
	if err != nil || key != "2001:db8:1:2::/64" {
		t.Errorf("ClientIP() = %q %v, want the /64", key, err)
	}
}
