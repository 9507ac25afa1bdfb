package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// peerCtx is the context of a call from addr with incoming metadata kv.
func peerCtx(addr net.Addr, kv ...string) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: addr})
	return metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
}

func tcpAddr(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

// PeerKey keys calls as httplimit's IP KeyFunc keys requests with the same
// peer and forwarding fields, and groups IPv6 clients by /64 by default.
func TestPeerKeyMatchesHTTP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name string
		o    PeerOptions
		peer string
		kv   []string
		want string
	}{
		{"IPv4", PeerOptions{}, "192.0.2.1:5000", nil, "192.0.2.1"},
		{"IPv6 by /64", PeerOptions{}, "[2001:db8:1:2:3::4]:5000", nil, "2001:db8:1:2::/64"},
		{"IPv6 by address", PeerOptions{IPv6Prefix: 128}, "[2001:db8:1:2:3::4]:5000", nil, "2001:db8:1:2:3::4"},
		{"IPv6 by /48", PeerOptions{IPv6Prefix: 48}, "[2001:db8:1:2:3::4]:5000", nil, "2001:db8:1::/48"},
		{"IPv4-mapped", PeerOptions{}, "[::ffff:192.0.2.1]:5000", nil, "192.0.2.1"},
		{"untrusted peer's forwarding ignored", PeerOptions{}, "192.0.2.1:5000", []string{"x-forwarded-for", "198.51.100.7"}, "192.0.2.1"},
		{"trusted proxy", PeerOptions{Trusted: proxies}, "10.0.0.1:5000", []string{"x-forwarded-for", "198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"client's own entry ignored", PeerOptions{Trusted: proxies}, "10.0.0.1:5000", []string{"x-forwarded-for", "1.2.3.4, 198.51.100.7"}, "198.51.100.7"},
		{"entries in several values", PeerOptions{Trusted: proxies}, "10.0.0.1:5000", []string{"x-forwarded-for", "198.51.100.7", "x-forwarded-for", "10.0.0.3"}, "198.51.100.7"},
		{"malformed entry: last trusted hop", PeerOptions{Trusted: proxies}, "10.0.0.1:5000", []string{"x-forwarded-for", "garbage, 10.0.0.9"}, "10.0.0.9"},
		{"all trusted: leftmost", PeerOptions{Trusted: proxies}, "10.0.0.1:5000", []string{"x-forwarded-for", "10.0.0.8"}, "10.0.0.8"},
		{"forwarded", PeerOptions{Trusted: proxies}, "[2001:db8:ffff::1]:443", []string{"forwarded", `for="[2001:db8:cafe::17]:4711";proto=https`}, "2001:db8:cafe::/64"},
		{"named header only", PeerOptions{Trusted: proxies, Header: "Forwarded"}, "10.0.0.1:5000", []string{"x-forwarded-for", "198.51.100.7"}, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := must(PeerKey(tc.o))
			got, err := f(peerCtx(tcpAddr(tc.peer), tc.kv...), methodEcho)
			if err != nil || got != tc.want {
				t.Fatalf("key = %q, %v; want %q", got, err, tc.want)
			}
			// The same request in HTTP.
			bits := tc.o.IPv6Prefix
			if bits == 0 {
				bits = 64
			}
			hf := must(httplimit.IPKey(httplimit.IPKeyOptions{Trusted: tc.o.Trusted, Header: tc.o.Header, IPv6Prefix: bits}))
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				r.Header.Add(tc.kv[i], tc.kv[i+1])
			}
			if hk, err := hf(r); err != nil || hk != got {
				t.Errorf("httplimit keys the same request %q, %v", hk, err)
			}
		})
	}
}

func TestPeerKeyNoIP(t *testing.T) {
	f := PeerAddr(netip.Prefix{}) // an invalid prefix matches nothing
	for _, ctx := range []context.Context{
		context.Background(),
		peerCtx(&net.UnixAddr{Name: "/run/api.sock", Net: "unix"}),
	} {
		if k, err := f(ctx, methodEcho); !errors.Is(err, ErrNoKey) {
			t.Errorf("key %q, err %v; want ErrNoKey", k, err)
		}
	}
}

// Behind a trusted proxy (here the loopback client itself), each forwarded
// client gets its own quota over a real connection; without trust, they
// all share the proxy's.
func TestForwardedClientsPerKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     KeyFunc
		clients int
		want    int
	}{
		{"trusted proxy", PeerAddr(netip.MustParsePrefix("127.0.0.0/8")), 3, 2},
		{"no trust", PeerAddr(), 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keyed := must(limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
				return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Minute})
			}}))
			var mu sync.Mutex
			perKey := map[string]int{}
			s := must(New(Options{PerKey: keyed.For, Key: tc.key, OnDecision: func(_ context.Context, d Decision) {
				if d.Code == 0 {
					mu.Lock()
					perKey[d.Key]++
					mu.Unlock()
				}
			}}))
			addr, _ := serve(t, s)
			conn := dial(t, addr, nil)
			for i := range tc.clients * 4 {
				client := fmt.Sprintf("203.0.113.%d", i%tc.clients)
				_ = echo(metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", client), conn)
			}
			mu.Lock()
			defer mu.Unlock()
			total := 0
			for k, n := range perKey {
				if n != tc.want {
					t.Errorf("key %q served %d calls, want %d", k, n, tc.want)
				}
				if strings.HasPrefix(k, "127.") == (tc.name == "trusted proxy") {
					t.Errorf("key %q", k)
				}
				total += n
			}
			if tc.name == "no trust" && total != tc.want {
				t.Errorf("%d calls served in all, want %d", total, tc.want)
			}
		})
	}
}
