package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/rategate/rategate/limiter"
)

// KeyFunc names the client (or the client and route) a request counts
// against. It is the type of Options.Key.
type KeyFunc = func(r *http.Request) (string, error)

// ErrNoKey is returned (wrapped) by a KeyFunc that finds nothing to key the
// request by: no RemoteAddr, no such header, no route pattern.
var ErrNoKey = errors.New("httplimit: no key for the request")

// IPKeyOptions configures IPKey.
type IPKeyOptions struct {
	// Trusted are the proxies whose forwarding header is believed. The
	// header is read only when the request's peer (RemoteAddr) is trusted,
	// and then from the right: the client is the rightmost address that is
	// not trusted, so a client cannot pick its own key by sending the
	// header itself. Empty: RemoteAddr only.
	Trusted []netip.Prefix
	// Header is the forwarding header the trusted proxies append to:
	// "X-Forwarded-For", or "Forwarded" (RFC 7239). The empty string reads
	// X-Forwarded-For when the request has one and Forwarded otherwise;
	// name the header your proxies use, so that a client cannot send the
	// other one past a proxy that only appends to the first.
	Header string
	// IPv6Prefix is the length of the network an IPv6 client is keyed
	// by: 0 means DefaultIPv6Prefix (64: its /64, which one host or home
	// usually holds whole, and which gives a client 2^64 addresses to
	// choose from); 128 keys each address. 1 to 128.
	IPv6Prefix int
}

// DefaultIPv6Prefix is the prefix length IPv6 clients are keyed by when
// IPKeyOptions.IPv6Prefix is 0, as by ClientIP and LimitByIP: a /64, the
// network one host or home usually holds whole. Keying each IPv6 address
// would give a client with a /64 2^64 quotas.
const DefaultIPv6Prefix = 64

// ClientIP returns the KeyFunc that keys a request by its client's IP
// address: RemoteAddr's, or, when RemoteAddr is in one of the trusted
// prefixes, the rightmost untrusted address of X-Forwarded-For (or of
// Forwarded when the request has no X-Forwarded-For). An IPv6 client is
// keyed by its /64 ("2001:db8:1:2::/64"); IPKey takes another prefix
// length. See IPKeyOptions. Prefixes that are not valid match nothing.
// ClientIP() reads RemoteAddr only; it is Options.Key's default.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	k := &ipKey{trusted: trusted, v6bits: DefaultIPv6Prefix}
	return k.key
}

// IPKey returns a KeyFunc that keys a request by its client's IP address as
// o says, or an *limiter.OptionError naming the invalid option.
func IPKey(o IPKeyOptions) (KeyFunc, error) {
	for i, p := range o.Trusted {
		if !p.IsValid() {
			return nil, &limiter.OptionError{Field: fmt.Sprintf("Trusted[%d]", i), Problem: "not a valid prefix"}
		}
	}
	switch http.CanonicalHeaderKey(o.Header) {
	case "", "X-Forwarded-For", "Forwarded":
	default:
		return nil, &limiter.OptionError{Field: "Header", Problem: fmt.Sprintf("%q is neither X-Forwarded-For nor Forwarded", o.Header)}
	}
	if o.IPv6Prefix < 0 || o.IPv6Prefix > 128 {
		return nil, &limiter.OptionError{Field: "IPv6Prefix", Problem: fmt.Sprintf("%d is not 0 or between 1 and 128", o.IPv6Prefix)}
	}
	if o.IPv6Prefix == 0 {
		o.IPv6Prefix = DefaultIPv6Prefix
	}
	k := &ipKey{trusted: o.Trusted, header: http.CanonicalHeaderKey(o.Header), v6bits: o.IPv6Prefix}
	return k.key, nil
}

type ipKey struct {
	trusted []netip.Prefix
	header  string // "", "X-Forwarded-For" or "Forwarded"
	v6bits  int
}

// hop is an address and the text it was read from (when that text is the
// address's canonical form, the key can be that text, with no allocation).
type hop struct {
	addr netip.Addr
	text string
}

func (k *ipKey) key(r *http.Request) (string, error) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok {
		return "", fmt.Errorf("%w: RemoteAddr %q is not an IP address", ErrNoKey, r.RemoteAddr)
	}
	client := peer
	if k.isTrusted(peer.addr) {
		client = k.forwarded(r, peer)
	}
	return k.format(client), nil
}

func (k *ipKey) isTrusted(a netip.Addr) bool {
	a = a.WithZone("").Unmap() // ::ffff:10.0.0.1 is 10.0.0.1, as its key is
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwarded walks the forwarding header from the right, starting at the
// trusted peer, and returns the first untrusted address (or the leftmost,
// or the last trusted hop when an entry cannot be read: that hop forwarded
// a client it could not name).
func (k *ipKey) forwarded(r *http.Request, peer hop) hop {
	name := k.header
	if name == "" {
		name = "X-Forwarded-For"
		if len(r.Header["X-Forwarded-For"]) == 0 {
			name = "Forwarded"
		}
	}
	vals := r.Header[name]
	last := peer
	for i := len(vals) - 1; i >= 0; i-- {
		v := vals[i]
		for v != "" {
			var entry string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				entry, v = v, ""
			}
			h, ok := parseEntry(entry, name == "Forwarded")
			if !ok {
				return last
			}
			if !k.isTrusted(h.addr) {
				return h
			}
			last = h
		}
	}
	return last
}

// parseEntry reads one X-Forwarded-For entry ("1.2.3.4", "2001:db8::1",
// some proxies add a port) or one Forwarded element's for= parameter.
func parseEntry(s string, forwarded bool) (hop, bool) {
	s = strings.TrimSpace(s)
	if forwarded {
		var ok bool
		if s, ok = forwardedFor(s); !ok {
			return hop{}, false
		}
	}
	return parseHost(s)
}

// forwardedFor returns the node of an RFC 7239 forwarded-element's for=
// parameter, unquoted: `for=192.0.2.60;proto=http` → "192.0.2.60",
// `for="[2001:db8:cafe::17]:4711"` → "[2001:db8:cafe::17]:4711".
func forwardedFor(elem string) (string, bool) {
	for elem != "" {
		var pair string
		if j := strings.IndexByte(elem, ';'); j >= 0 {
			pair, elem = elem[:j], elem[j+1:]
		} else {
			pair, elem = elem, ""
		}
		name, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(name, "for") {
			continue
		}
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		return val, true
	}
	return "", false
}

// parseHost reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port".
func parseHost(s string) (hop, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		s = s[:strings.LastIndexByte(s, ':')]
		return hop{addr: ap.Addr(), text: strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")}, true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return hop{}, false
	}
	return hop{addr: a, text: s}, true
}

// format returns the key of an address: its canonical text (the text it
// was read from, when that is canonical), or its IPv6 network.
func (k *ipKey) format(h hop) string {
	a := h.addr.WithZone("")
	if a.Is4In6() {
		return a.Unmap().String()
	}
	if a.Is6() && k.v6bits < 128 {
		p, _ := a.Prefix(k.v6bits)
		var buf [64]byte
		return string(p.AppendTo(buf[:0]))
	}
	var buf [64]byte
	if string(a.AppendTo(buf[:0])) == h.text {
		return h.text
	}
	return a.String()
}

// HeaderKey returns a KeyFunc that keys a request by the value of a header,
// such as an API key; a request without it fails with ErrNoKey (and is
// answered by Options.OnRefuse with 400 Bad Request). Only use a header the
// client cannot choose freely (one that was authenticated first), or a
// client can take a new key, and a new quota, with each request.
func HeaderKey(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if v := r.Header[name]; len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: no %s header", ErrNoKey, name)
	}
}

// Route keys a request by the pattern that routed it: r.Pattern, which
// net/http's ServeMux sets (such as "GET /items/{id}"), so every request of
// one route shares one key. The pattern is known only once the mux has
// routed the request: wrap the route's handler, not the mux
// (mux.Handle("GET /items/{id}", m.Wrap(h))). For other routers, give
// their pattern to RouteFunc: chi's
// chi.RouteContext(r.Context()).RoutePattern(), gorilla/mux's
// mux.CurrentRoute(r).GetPathTemplate().
func Route(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", fmt.Errorf("%w: the request has no route pattern (wrap the route's handler, not the mux)", ErrNoKey)
	}
	return r.Pattern, nil
}

// RouteFunc returns a KeyFunc that keys a request by the route pattern a
// router reports, for routers other than net/http's ServeMux (see Route).
func RouteFunc(pattern func(r *http.Request) string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if p := pattern(r); p != "" {
			return p, nil
		}
		return "", fmt.Errorf("%w: the router reports no route pattern", ErrNoKey)
	}
}

// Keys returns a KeyFunc whose key joins the keys of fns with NUL bytes
// (which neither IP addresses, route patterns nor header values can hold,
// so distinct parts give distinct keys), such as Keys(Route, ClientIP()):
// one limit per client per route. It fails with the first error of fns.
func Keys(fns ...KeyFunc) KeyFunc {
	fns = append([]KeyFunc(nil), fns...)
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, f := range fns {
			k, err := f(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte(0)
			}
			b.WriteString(k)
		}
		return b.String(), nil
	}
}
