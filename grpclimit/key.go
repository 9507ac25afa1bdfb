package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// KeyFunc names what a call counts against: a client, an API key, a
// tenant, a method, or several together. method is the call's full method,
// "/package.Service/Method". It is the type of Options.Key. An error
// refuses the call: with Options.KeyErrorCode, or with the error's own code
// when it is a gRPC status error.
type KeyFunc = func(ctx context.Context, method string) (string, error)

// ErrNoKey is returned (wrapped) by a KeyFunc of this package that finds
// nothing to key the call by: no IP peer address, no such metadata, or
// metadata that is malformed.
var ErrNoKey = errors.New("grpclimit: no key for the call")

// PeerOptions configures PeerKey. Its fields are httplimit.IPKeyOptions',
// read the same way (package httplimit does the reading), with metadata in
// place of HTTP header fields.
type PeerOptions struct {
	// Trusted are the proxies whose forwarding metadata is believed: only
	// when the peer is one of them, and then from the right, so that a
	// client cannot pick its own key. Empty: the peer address only.
	Trusted []netip.Prefix
	// Header is the forwarding metadata the trusted proxies append to:
	// "x-forwarded-for" or "forwarded"; "" reads x-forwarded-for when the
	// call has it and forwarded otherwise.
	Header string
	// IPv6Prefix is the network an IPv6 client is keyed by: 0 means 64
	// (its /64, which one host or home usually holds whole, so a client
	// cannot take a new quota with each of its addresses); 128 keys each
	// address apart. 0 to 128.
	IPv6Prefix int
}

// PeerAddr returns the KeyFunc that keys a call by its client's IP
// address: the peer's, or, when the peer is in one of the trusted
// prefixes, the rightmost untrusted address of the x-forwarded-for (or
// forwarded) metadata, exactly as httplimit.ClientIP reads a request's
// forwarding header. An IPv6 client is keyed by its /64. Prefixes that are
// not valid match nothing. PeerAddr() reads the peer address only; it is
// Options.Key's default. A call whose peer has no IP address (a Unix
// socket, an in-memory connection) fails with ErrNoKey.
func PeerAddr(trusted ...netip.Prefix) KeyFunc {
	valid := make([]netip.Prefix, 0, len(trusted))
	for _, p := range trusted {
		if p.IsValid() {
			valid = append(valid, p)
		}
	}
	f, _ := PeerKey(PeerOptions{Trusted: valid})
	return f
}

// PeerKey returns a KeyFunc that keys a call by its client's IP address as
// o says, or an *limiter.OptionError naming the invalid option.
func PeerKey(o PeerOptions) (KeyFunc, error) {
	header := strings.ToLower(o.Header)
	switch header {
	case "", "x-forwarded-for", "forwarded":
	default:
		return nil, &limiter.OptionError{Field: "Header", Problem: fmt.Sprintf("%q is neither x-forwarded-for nor forwarded", o.Header)}
	}
	if o.IPv6Prefix < 0 || o.IPv6Prefix > 128 {
		return nil, &limiter.OptionError{Field: "IPv6Prefix", Problem: fmt.Sprintf("%d is not between 0 and 128", o.IPv6Prefix)}
	}
	bits := o.IPv6Prefix
	if bits == 0 {
		bits = 64
	}
	ipKey, err := httplimit.IPKey(httplimit.IPKeyOptions{Trusted: o.Trusted, Header: header, IPv6Prefix: bits})
	if err != nil {
		return nil, err
	}
	k := &peerKey{ipKey: ipKey, forwarded: len(o.Trusted) > 0}
	return k.key, nil
}

// peerKey keys a call as httplimit's IP KeyFunc keys a request with the
// peer's address as RemoteAddr and the forwarding metadata as headers, so
// that both packages trust the same hops in the same way.
type peerKey struct {
	ipKey     httplimit.KeyFunc
	forwarded bool // some hop is trusted: read the forwarding metadata
}

// requests holds the requests peerKey hands to httplimit's KeyFunc, which
// keeps nothing of them.
var requests = sync.Pool{New: func() any { return &http.Request{Header: make(http.Header, 2)} }}

func (k *peerKey) key(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", fmt.Errorf("%w: the call has no peer", ErrNoKey)
	}
	r := requests.Get().(*http.Request)
	defer requests.Put(r)
	r.RemoteAddr = p.Addr.String()
	if k.forwarded {
		if v := metadata.ValueFromIncomingContext(ctx, "x-forwarded-for"); len(v) > 0 {
			r.Header["X-Forwarded-For"] = v
		}
		if v := metadata.ValueFromIncomingContext(ctx, "forwarded"); len(v) > 0 {
			r.Header["Forwarded"] = v
		}
		defer clear(r.Header)
	}
	key, err := k.ipKey(r)
	if err != nil {
		return "", fmt.Errorf("%w: the peer address %q is not an IP address", ErrNoKey, r.RemoteAddr)
	}
	return key, nil
}

// Method keys a call by its full method, "/package.Service/Method": one
// limit per method (with Keys, per client per method).
func Method(_ context.Context, method string) (string, error) {
	return method, nil
}

// MetadataKey returns a KeyFunc that keys a call by the value of a metadata
// key (case-insensitive), such as an API key or a tenant. A call without
// it, with an empty value, or with more than one value (which a proxy in
// front might have checked one of, while the key would be another) fails
// with ErrNoKey. Only use metadata the client cannot choose freely (one
// that was authenticated first), or a client can take a new key, and a new
// quota, with each call.
func MetadataKey(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, error) {
		v := metadata.ValueFromIncomingContext(ctx, name)
		switch {
		case len(v) == 0:
			return "", fmt.Errorf("%w: no %s metadata", ErrNoKey, name)
		case len(v) > 1:
			return "", fmt.Errorf("%w: %d values of %s metadata", ErrNoKey, len(v), name)
		case v[0] == "":
			return "", fmt.Errorf("%w: empty %s metadata", ErrNoKey, name)
		}
		return v[0], nil
	}
}

// Keys returns a KeyFunc whose key joins the keys of fns with NUL bytes
// (which neither IP addresses, method names nor text metadata can hold, so
// distinct parts give distinct keys), such as Keys(Method, PeerAddr()): one
// limit per client per method. It fails with the first error of fns.
func Keys(fns ...KeyFunc) KeyFunc {
	fns = append([]KeyFunc(nil), fns...)
	return func(ctx context.Context, method string) (string, error) {
		parts := make([]string, len(fns))
		for i, f := range fns {
			var err error
			if parts[i], err = f(ctx, method); err != nil {
				return "", err
			}
		}
		return strings.Join(parts, "\x00"), nil
	}
}
