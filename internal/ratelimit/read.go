package ratelimit

import (
	"math"
	"strings"
	"time"
)

// What a response says about its host's limits, in whichever dialect the
// server writes:
//
//   - the RateLimit and RateLimit-Policy fields of
//     draft-ietf-httpapi-ratelimit-headers -08 to -11 (Structured Field
//     lists: "default";r=50;t=30 and "default";q=100;w=60, policy names as
//     Strings or, as some servers write them, Tokens);
//   - draft -07's RateLimit dictionary (limit=100, remaining=50, reset=30)
//     with its RateLimit-Policy (100;w=60);
//   - draft -06's RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
//     (reset in seconds from now);
//   - X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset, as
//     GitHub, go-chi/httprate and many others send them, the reset either
//     a Unix time or seconds from now (see resetAt).
//
// Every dialect present is read; each says how many requests are left for
// how long, and the policies say how fast requests may be spread.

// Limits is what one response says of its host's limits.
type Limits struct {
	left []quotaLeft
	// pace is the spacing at which the server's request policies are
	// spread (w/q of the slowest): 0 when no policy states a window.
	pace time.Duration
	// burst is how many requests may arrive at once and then be spread at
	// pace: the least burst the policies state (a parameter of
	// rategate's policies for token buckets), 1 when one states none.
	burst int64
	// concurrent is the quota of a concurrent-requests policy: at most so
	// many requests in flight (0: none).
	concurrent int64
}

// quotaLeft says a policy allows r more requests, and more within t.
type quotaLeft struct {
	policy string // the item's name for drafts -08 to -11 (after a '"'), else the dialect's
	r      int64
	t      time.Duration
}

// Known reports whether the response stated any limit.
func (s *Limits) Known() bool { return len(s.left) > 0 || s.pace > 0 || s.concurrent > 0 }

// Forever is what a wait too long to count saturates to.
const Forever = time.Duration(math.MaxInt64)

// defaultReset is the t of a RateLimit item that states none.
const defaultReset = time.Second

// Seconds converts whole seconds to a Duration, saturating.
func Seconds(s int64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s > int64(Forever/time.Second) {
		return Forever
	}
	return time.Duration(s) * time.Second
}

// Fields holds the values of the fields of one response that say
// something of its limits (nil: absent).
type Fields struct {
	RateLimit, Policy       []string // RateLimit and RateLimit-Policy (drafts -07 to -11)
	Limit, Remaining, Reset []string // RateLimit-Limit, -Remaining and -Reset (draft -06)
	XRemaining, XReset      []string // X-RateLimit-Remaining and -Reset
}

// HeaderFields returns the Fields of h, an http.Header (canonical keys)
// or, with lower, gRPC metadata (lower-case keys).
func HeaderFields(h map[string][]string, lower bool) Fields {
	if lower {
		return Fields{
			RateLimit: h["ratelimit"], Policy: h["ratelimit-policy"],
			Limit: h["ratelimit-limit"], Remaining: h["ratelimit-remaining"], Reset: h["ratelimit-reset"],
			XRemaining: h["x-ratelimit-remaining"], XReset: h["x-ratelimit-reset"],
		}
	}
	return Fields{
		RateLimit: h["Ratelimit"], Policy: h["Ratelimit-Policy"],
		Limit: h["Ratelimit-Limit"], Remaining: h["Ratelimit-Remaining"], Reset: h["Ratelimit-Reset"],
		XRemaining: h["X-Ratelimit-Remaining"], XReset: h["X-Ratelimit-Reset"],
	}
}

// Read reads every dialect of f at now.
func Read(f *Fields, now time.Time) Limits {
	var s Limits
	policies := readPolicies(f.Policy)
	if !readIETF(&s, f.RateLimit, policies) {
		readDraft07(&s, f.RateLimit)
	}
	readDraft06(&s, f)
	readLegacy(&s, f, now)
	for _, p := range policies {
		if p.concurrent {
			s.concurrent = max(s.concurrent, p.q)
		} else {
			s.addPace(p)
		}
	}
	return s
}

// addPace takes p's pace into s, if p states a window: the slowest pace
// and the least burst.
func (s *Limits) addPace(p policy) {
	if p.w <= 0 {
		return
	}
	s.pace = max(s.pace, paceOf(p.q, p.w))
	if s.burst == 0 || p.burst < s.burst {
		s.burst = p.burst
	}
}

// policy is one quota policy: q per w seconds (w 0: not stated).
type policy struct {
	name       string
	q, w       int64
	burst      int64 // at least 1
	concurrent bool  // its unit is concurrent requests
}

// paceOf is w seconds spread over q requests, rounded up.
func paceOf(q, w int64) time.Duration {
	ws := Seconds(w)
	if ws == Forever {
		return Forever
	}
	return (ws + time.Duration(q) - 1) / time.Duration(q)
}

// readPolicies reads RateLimit-Policy: `"name";q=100;w=60` items (-08 to
// -11, qu naming the unit) or `100;w=60` (-06, -07). Items that cannot be
// read are left out; units other than requests (content-bytes) too.
func readPolicies(lines []string) []policy {
	if len(lines) == 0 {
		return nil
	}
	l, err := parseSFList(lines)
	if err != nil {
		return nil
	}
	var out []policy
	for _, m := range l {
		if p, ok := readPolicy(&m); ok {
			out = append(out, p)
		}
	}
	return out
}

// readPolicy reads one RateLimit-Policy member; false when it cannot be
// read or counts something other than requests.
func readPolicy(m *sfMember) (policy, bool) {
	it := &m.item
	var p policy
	switch {
	case m.inner:
		return p, false
	case it.bare.kind == sfString || it.bare.kind == sfToken:
		p.name = it.bare.s
		q, ok := it.param("q")
		if !ok || q.kind != sfInteger {
			return p, false
		}
		p.q = q.i
	case it.bare.kind == sfInteger:
		p.q = it.bare.i
	default:
		return p, false
	}
	if w, ok := it.param("w"); ok && w.kind == sfInteger && w.i > 0 {
		p.w = w.i
	}
	p.burst = 1
	if b, ok := it.param("burst"); ok && b.kind == sfInteger && b.i > 1 {
		p.burst = b.i
	}
	if qu, ok := it.param("qu"); ok && (qu.kind == sfString || qu.kind == sfToken) {
		switch qu.s {
		case "requests":
		case "concurrent-requests":
			p.concurrent = true
		default:
			return p, false
		}
	}
	return p, p.q > 0
}

// readIETF reads the RateLimit field of drafts -08 to -11: a list of
// `"policy";r=50;t=30` items (t, the seconds until more quota, defaulting
// to defaultReset). It returns false when the field is not such a list;
// an item that cannot be read spoils the field, which is then ignored, as
// the draft says.
func readIETF(s *Limits, lines []string, policies []policy) bool {
	if len(lines) == 0 {
		return false
	}
	l, err := parseSFList(lines)
	if err != nil {
		return false
	}
	var left []quotaLeft
	for _, m := range l {
		it := &m.item
		if m.inner || (it.bare.kind != sfString && it.bare.kind != sfToken) {
			return false
		}
		r, ok := it.param("r")
		if !ok || r.kind != sfInteger || r.i < 0 {
			return false
		}
		t := defaultReset
		if tv, ok := it.param("t"); ok {
			if tv.kind != sfInteger || tv.i < 0 {
				return false
			}
			t = Seconds(tv.i)
		}
		if isConcurrent(policies, it.bare.s) {
			continue // its r comes back on completion, not with time
		}
		left = append(left, quotaLeft{`"` + it.bare.s, r.i, t})
	}
	s.left = append(s.left, left...)
	return true
}

func isConcurrent(ps []policy, name string) bool {
	for _, p := range ps {
		if p.name == name && p.concurrent {
			return true
		}
	}
	return false
}

// readDraft07 reads draft -07's RateLimit dictionary: limit, remaining,
// reset (seconds from now).
func readDraft07(s *Limits, lines []string) {
	if len(lines) == 0 {
		return
	}
	d, err := parseSFDict(lines)
	if err != nil {
		return
	}
	r, t := int64(-1), int64(-1)
	for _, m := range d {
		if m.val.inner || m.val.item.bare.kind != sfInteger {
			continue
		}
		switch m.key {
		case "remaining":
			r = m.val.item.bare.i
		case "reset":
			t = m.val.item.bare.i
		}
	}
	if r >= 0 && t >= 0 {
		s.left = append(s.left, quotaLeft{"draft-07", r, Seconds(t)})
	}
}

// readDraft06 reads draft -06's RateLimit-Remaining and RateLimit-Reset
// (seconds from now), and RateLimit-Limit's policies (`10, 10;w=1`).
func readDraft06(s *Limits, f *Fields) {
	rem, reset := f.Remaining, f.Reset
	if len(rem) == 0 || len(reset) == 0 {
		return
	}
	r, err1 := parseSFItem(rem)
	t, err2 := parseSFItem(reset)
	if err1 != nil || err2 != nil || r.bare.kind != sfInteger || t.bare.kind != sfInteger || r.bare.i < 0 || t.bare.i < 0 {
		return
	}
	s.left = append(s.left, quotaLeft{"draft-06", r.bare.i, Seconds(t.bare.i)})
	for _, p := range readPolicies(f.Limit) {
		s.addPace(p)
	}
}

// readLegacy reads X-RateLimit-Remaining and X-RateLimit-Reset.
func readLegacy(s *Limits, f *Fields, now time.Time) {
	rem, reset := f.XRemaining, f.XReset
	if len(rem) == 0 || len(reset) == 0 {
		return
	}
	r, ok1 := legacyNumber(rem[0])
	at, ok2 := legacyNumber(reset[0])
	if !ok1 || !ok2 {
		return
	}
	s.left = append(s.left, quotaLeft{"x-ratelimit", int64(min(r, math.MaxInt64/2)), resetAt(at, now)})
}

// Legacy X-RateLimit-Reset values are a Unix time (GitHub, go-chi/httprate)
// or seconds from now (many others). No reset is decades away, so a value of
// at least half the current Unix time in milliseconds is a Unix time in
// milliseconds, one of at least half the current Unix time in seconds (27
// years and more as a delay) a Unix time in seconds, and a smaller one
// seconds from now.

// resetAt returns how long from now a legacy reset value v is.
func resetAt(v float64, now time.Time) time.Duration {
	nowSecs := float64(now.UnixNano()) / 1e9
	d := v
	switch {
	case v >= nowSecs*1e3/2:
		d = v/1e3 - nowSecs
	case v >= nowSecs/2:
		d = v - nowSecs
	}
	if d <= 0 {
		return 0
	}
	if d >= float64(Forever/time.Second) {
		return Forever
	}
	return time.Duration(math.Ceil(d * 1e9))
}

// legacyNumber reads a non-negative decimal number ("42", "1700000000",
// "1.5"), saturating at 1e18.
func legacyNumber(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = strings.TrimSpace(v[:i]) // "10, 10;w=1": the first
	}
	n, frac, scale, dot, digits := 0.0, 0.0, 1.0, false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isDigit(c) && dot:
			scale /= 10
			frac += float64(c-'0') * scale
		case isDigit(c):
			n = min(n*10+float64(c-'0'), 1e18)
			digits++
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return 0, false
		}
	}
	return n + frac, digits > 0
}
