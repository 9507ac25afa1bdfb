package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/limiter"
)

// DefaultMaxHosts is Config.MaxHosts when it is 0.
const DefaultMaxHosts = 4096

// The learned rates' bounds when Config leaves them zero.
var (
	DefaultFloor   = limiter.Per(1, time.Second)
	DefaultCeiling = limiter.Per(10_000, time.Second)
)

// Config configures NewHosts.
type Config struct {
	// MaxHosts caps the hosts kept: 0 means DefaultMaxHosts. Beyond it,
	// the least recently used host with no request under way is
	// forgotten.
	MaxHosts int
	// MaxWait bounds what a host can make a client wait: a longer
	// Retry-After or reset counts as MaxWait. 0: no bound.
	MaxWait time.Duration
	// Learn makes a host that pushes back (Response.Throttled) without
	// stating its limits get a rate learned from its answers, an
	// adaptive.RateLimiter between Floor and Ceiling (zero: DefaultFloor,
	// DefaultCeiling).
	Learn          bool
	Floor, Ceiling limiter.Rate
}

// Hosts is what a client knows of its hosts' limits (or of a gRPC
// client's targets): what their responses state, the Retry-After they
// ask for, and the rate learned from the pushback of those that state
// nothing. It is safe for concurrent use.
//
// A request goes through it in this order: Pin its host; Wait (without
// counting) until the host may be sent a request; take the caller's
// permits and one of Learned's; Wait again, counting, which returns the
// request's Ticket; send; Done with the response. A request that gives up
// before it is counted calls Unpin instead of Done.
type Hosts struct {
	cfg  Config
	mu   sync.Mutex
	m    map[string]*Host
	head *Host // the most recently used; tail the least
	tail *Host
}

// NewHosts returns an empty Hosts. The Config must be valid (Floor ≤
// Ceiling, both positive, when set).
func NewHosts(cfg Config) *Hosts {
	cfg.fill()
	return &Hosts{cfg: cfg, m: make(map[string]*Host)}
}

// fill sets the defaults of the fields left zero.
func (cfg *Config) fill() {
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = DefaultMaxHosts
	}
	if cfg.Floor.IsZero() {
		cfg.Floor = DefaultFloor
	}
	if cfg.Ceiling.IsZero() {
		cfg.Ceiling = DefaultCeiling
		if compareRates(cfg.Floor, cfg.Ceiling) > 0 {
			cfg.Ceiling = cfg.Floor
		}
	}
}

// Host is what Hosts knows of one host's limits.
//
// Each response's r says the host could take r more requests when it
// answered; of the requests sent since, those answered before that
// response's request was sent were counted in r, the others may not have
// been. So the host can take at least r + 1 + answeredAtSend - sent more,
// and time only adds to that (windows pass, buckets refill): sent may
// reach the largest such cap. When it has, a request goes at the policy's
// pace, or once the time the last response gave for more quota has come.
type Host struct {
	key        string
	prev, next *Host
	pins       int // requests between Pin and Done or Unpin

	notBefore time.Time // Retry-After: no request before this
	sent      int64     // requests sent to the host
	answered  int64     // of which answered (or failed)
	known     bool      // the host states limits
	quotas    []policyCap
	probing   bool // one request out beyond a cap, to learn more
	pace      time.Duration
	burst     int64     // requests that may go at once at the policy's pace
	tat       time.Time // with pace: no request at the policy's pace before tat - (burst-1)*pace
	maxFlight int64     // a concurrent-requests policy's quota (0: none)
	changed   chan struct{}

	learned *adaptive.RateLimiter // the rate learned from pushback, while the host states nothing
	okSec   int64                 // the second (Unix) of okCur
	okCur   int64                 // responses taken (not pushed back) in second okSec
	okPrev  int64                 // and in the second before
}

// Ticket is what a sent request remembers for its response.
type Ticket struct {
	answeredAtSend int64 // responses received before it was sent
	probe          bool
}

// Response is what Done learns from.
type Response struct {
	// At is when the response came (or the request failed); the zero
	// Time: now.
	At time.Time
	// Answered: a response came (false: the request failed without one).
	Answered bool
	// Limits is what the response states; a zero Limits when it states
	// nothing, or was served from a cache.
	Limits Limits
	// Stale: the response was served from a cache, and says nothing of
	// the host's limits now.
	Stale bool
	// Refused: the host refused the request and asked for no request
	// before RetryAfter from now (Retry-After, google.rpc.RetryInfo).
	Refused    bool
	RetryAfter time.Duration
	// Throttled: the host pushed back (429, 503, RESOURCE_EXHAUSTED, a
	// timeout): with Config.Learn, a host that states nothing gets a
	// learned rate.
	Throttled bool
}

// WaitError is Wait's error for a wait longer than its limit, or past the
// context's deadline.
type WaitError struct {
	Wait     time.Duration
	Deadline bool // the wait would outlast the context's deadline
}

func (e *WaitError) Error() string {
	if e.Deadline {
		return fmt.Sprintf("no request for %v, past the context deadline", e.Wait)
	}
	return fmt.Sprintf("no request for %v", e.Wait)
}

// Pin returns key's host, made if new, and keeps it until Done or Unpin.
func (hs *Hosts) Pin(key string) *Host {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok := hs.m[key]
	if ok {
		hs.unlink(h)
	} else {
		hs.evict()
		h = &Host{key: key}
		hs.m[key] = h
	}
	hs.pushFront(h)
	h.pins++
	return h
}

// Unpin lets h go, for a request that was not counted as sent.
func (hs *Hosts) Unpin(h *Host) {
	hs.mu.Lock()
	h.pins--
	hs.mu.Unlock()
}

// evict forgets least recently used hosts with no request under way while
// the hosts are MaxHosts or more. hs.mu is held.
func (hs *Hosts) evict() {
	for h := hs.tail; h != nil && len(hs.m) >= hs.cfg.MaxHosts; {
		prev := h.prev
		if h.pins == 0 {
			hs.unlink(h)
			delete(hs.m, h.key)
		}
		h = prev
	}
}

func (hs *Hosts) unlink(h *Host) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		hs.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		hs.tail = h.prev
	}
	h.prev, h.next = nil, nil
}

func (hs *Hosts) pushFront(h *Host) {
	h.next = hs.head
	if hs.head != nil {
		hs.head.prev = h
	}
	hs.head = h
	if hs.tail == nil {
		hs.tail = h
	}
}

// Len returns the number of hosts kept.
func (hs *Hosts) Len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.m)
}

// Learned returns the limiter of the rate learned for h, or nil: none was
// learned, or h states its limits (which win).
func (hs *Hosts) Learned(h *Host) limiter.Limiter {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h.learned == nil || h.known {
		return nil
	}
	return h.learned
}

// Wait waits until h may be sent a request, failing with a *WaitError at
// once when that is longer than limit or past ctx's deadline, and with
// ctx.Err() when ctx ends. With count, it then counts the request as sent
// and returns its Ticket.
func (hs *Hosts) Wait(ctx context.Context, h *Host, count bool, limit time.Duration) (Ticket, error) {
	if tk, ok, _, _ := hs.try(h, count); ok {
		return tk, nil // without a timer, which would escape
	}
	var timer precise.Timer
	defer timer.Stop()
	for {
		tk, ok, wait, changed := hs.try(h, count)
		if ok {
			return tk, nil
		}
		if wait > limit || (wait > 0 && pastDeadline(ctx, wait)) {
			return Ticket{}, &WaitError{Wait: wait, Deadline: wait <= limit}
		}
		var at time.Time
		if wait > 0 {
			at = time.Now().Add(wait)
		}
		// The pace of a server's policy is kept on time: a request late
		// by a timer's lateness is a request the server allowed and did
		// not get.
		if timer.Until(ctx, changed, at, 0) == precise.Done {
			return Ticket{}, ctx.Err()
		}
	}
}

// try admits a request to h now, counting it with count, or says how long
// to wait and for what (see Host.admit).
func (hs *Hosts) try(h *Host, count bool) (Ticket, bool, time.Duration, <-chan struct{}) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	how := allowed
	if !h.free() { // else no need to read the clock
		var wait time.Duration
		var changed <-chan struct{}
		if how, wait, changed = h.admit(time.Now()); how == 0 {
			return Ticket{}, false, wait, changed
		}
	}
	var tk Ticket
	if count {
		tk = h.take(how)
	}
	return tk, true, 0, nil
}

// free reports whether h holds nothing back: it asked for no wait and
// states no limits.
func (h *Host) free() bool { return h.notBefore.IsZero() && !h.known && h.maxFlight == 0 }

// pastDeadline reports whether a wait of d would end after ctx's deadline.
func pastDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}

// policyCap is what the host's responses say of one of its policies.
type policyCap struct {
	name string
	cap  int64     // sent may reach this
	more time.Time // when the last response said more quota comes
}

// maxPolicies bounds the policies a host's state keeps; further ones are
// not read.
const maxPolicies = 8

// policy returns the state of the named policy, made if new (nil beyond
// maxPolicies).
func (h *Host) policy(name string) *policyCap {
	for i := range h.quotas {
		if h.quotas[i].name == name {
			return &h.quotas[i]
		}
	}
	if len(h.quotas) == maxPolicies {
		return nil
	}
	h.quotas = append(h.quotas, policyCap{name: name, cap: math.MinInt64})
	return &h.quotas[len(h.quotas)-1]
}

// How a request may go: within what responses allow, at the policy's
// pace, or as the one request that learns what is allowed now.
type admission uint8

const (
	allowed admission = iota + 1
	paced
	probe
)

// admit says how a request to h may go at now, or how long it must wait
// (0: no timer) and which channel to wait on for a response (nil: none).
func (h *Host) admit(now time.Time) (admission, time.Duration, <-chan struct{}) {
	if !h.notBefore.IsZero() {
		if now.Before(h.notBefore) {
			return 0, h.notBefore.Sub(now), nil
		}
		h.notBefore = time.Time{} // passed: nothing to keep
	}
	if h.maxFlight > 0 && h.sent-h.answered >= h.maxFlight {
		return 0, 0, h.change()
	}
	exhausted, more := false, time.Time{}
	for _, p := range h.quotas {
		if h.sent >= p.cap {
			exhausted = true
			more = maxTime(more, p.more)
		}
	}
	if !h.known || !exhausted {
		return allowed, 0, nil
	}
	next := more
	if h.pace > 0 && h.sent == h.answered {
		due := h.tat.Add(-time.Duration(min(h.burst-1, int64(Forever/h.pace))) * h.pace)
		if !now.Before(due) {
			return paced, 0, nil
		}
		next = minTime(next, due)
	}
	if !now.Before(more) {
		if !h.probing {
			return probe, 0, nil
		}
		return 0, 0, h.change() // the probe's answer says what comes next
	}
	if h.sent > h.answered {
		return 0, next.Sub(now), h.change()
	}
	return 0, next.Sub(now), nil
}

// take counts a request admitted as a as sent.
func (h *Host) take(a admission) Ticket {
	tk := Ticket{answeredAtSend: h.answered, probe: a == probe}
	if tk.probe {
		h.probing = true
	}
	h.sent++
	return tk
}

func (h *Host) change() <-chan struct{} {
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// idle reports whether h remembers nothing that could hold a request back.
func (h *Host) idle(now time.Time) bool {
	if h.sent != h.answered || now.Before(h.notBefore) || now.Before(h.tat) {
		return false
	}
	for _, p := range h.quotas {
		if now.Before(p.more) {
			return false
		}
	}
	return true
}

// Done records the response to the request of tk, sent to h, and lets h go.
func (hs *Hosts) Done(h *Host, tk Ticket, r Response) {
	now := r.At
	if now.IsZero() {
		now = time.Now()
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h.pins--
	h.answered++
	if tk.probe {
		h.probing = false
	}
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	defer h.owe(now)
	if !r.Answered {
		return
	}
	if r.Refused {
		if at := hs.after(now, r.RetryAfter); at.After(h.notBefore) {
			h.notBefore = at
		}
	}
	if !r.Limits.Known() {
		if !r.Stale && h.idle(now) {
			h.known, h.quotas, h.pace, h.maxFlight = false, nil, 0, 0 // the server says no more
		}
		hs.learn(h, now, r.Throttled)
		return
	}
	h.known, h.learned = true, nil // the announcement wins
	lim := &r.Limits
	if lim.pace > 0 {
		h.pace, h.burst = lim.pace, max(lim.burst, 1)
	}
	h.maxFlight = lim.concurrent
	for _, q := range lim.left {
		// The requests answered before this one was sent are counted in
		// q.r; every other request sent so far may not be.
		if p := h.policy(q.policy); p != nil {
			p.cap = max(p.cap, satAdd(q.r, tk.answeredAtSend+1))
			p.more = hs.after(now, q.t)
			if r.Refused {
				// A refusal's delay is when the host takes a request:
				// exact (RetryInfo), where t counts whole seconds.
				p.more = minTime(p.more, h.notBefore)
			}
		}
	}
}

// after is now plus a wait a host asked for, bounded by MaxWait and
// saturating at a time far in the future.
func (hs *Hosts) after(now time.Time, d time.Duration) time.Time {
	if hs.cfg.MaxWait > 0 {
		d = min(d, hs.cfg.MaxWait)
	}
	return addTime(now, d)
}

// learn counts a response of a host that states no limits: taken, or
// pushed back, which gives the host a learned rate (with Config.Learn)
// starting from the responses taken over the last second.
func (hs *Hosts) learn(h *Host, now time.Time, throttled bool) {
	sec := now.Unix()
	if sec != h.okSec {
		if sec == h.okSec+1 {
			h.okPrev = h.okCur
		} else {
			h.okPrev = 0
		}
		h.okSec, h.okCur = sec, 0
	}
	if !throttled {
		h.okCur++
		return
	}
	if !hs.cfg.Learn || h.learned != nil || h.known {
		return
	}
	frac := float64(now.Nanosecond()) / 1e9
	got := int(float64(h.okPrev)*(1-frac) + float64(h.okCur))
	initial := hs.cfg.Floor
	if r := limiter.Per(max(got, 1), time.Second); got > 0 && compareRates(r, initial) > 0 {
		initial = r
		if compareRates(initial, hs.cfg.Ceiling) > 0 {
			initial = hs.cfg.Ceiling
		}
	}
	l, err := adaptive.NewRateLimiter(adaptive.RateOptions{Floor: hs.cfg.Floor, Initial: initial, Ceiling: hs.cfg.Ceiling})
	if err == nil { // the Config was checked by its owner
		// The first grant waits for the rate's first interval: the host
		// has just throttled what was sent before, and would throttle a
		// grant now, which would tell the new limiter nothing of the
		// rate it starts at.
		l.TryAcquire(1)
		h.learned = l
	}
}

// compareRates compares a and b as events per second.
func compareRates(a, b limiter.Rate) int {
	x := float64(a.Events()) / a.Period().Seconds()
	y := float64(b.Events()) / b.Period().Seconds()
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// owe moves the policy's pace on by one request answered at now.
func (h *Host) owe(now time.Time) {
	if h.pace > 0 {
		if h.tat.Before(now) {
			h.tat = now
		}
		h.tat = addTime(h.tat, h.pace)
	}
}

// Info is what Hosts knows of one host.
type Info struct {
	// Stated: the host states its limits, which are kept to.
	Stated bool
	// Pace is the spacing of the host's stated policy (w/q), 0 if none.
	Pace time.Duration
	// Learned is the rate learned from the host's pushback, while it
	// states nothing; the zero Rate if none.
	Learned limiter.Rate
	// NotBefore: the host asked for no request before this time (the
	// zero Time once it has passed).
	NotBefore time.Time
}

// Info returns what hs knows of key's host, and false if it keeps nothing
// of it.
func (hs *Hosts) Info(key string) (Info, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok := hs.m[key]
	if !ok {
		return Info{}, false
	}
	in := Info{Stated: h.known, NotBefore: h.notBefore}
	if h.known {
		in.Pace = h.pace
	} else if h.learned != nil {
		in.Learned = h.learned.Rate()
	}
	return in, true
}

// addTime is t.Add(d), saturating at a time far in the future.
func addTime(t time.Time, d time.Duration) time.Time {
	if far := t.Add(Forever); d >= Forever || t.Add(d).After(far) {
		return far
	}
	return t.Add(d)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CheckLearn fills in cfg's Floor and Ceiling as NewHosts does and returns
// the *limiter.OptionError of the learned rates' bounds ("Floor" or
// "Ceiling"), if they are invalid.
func CheckLearn(cfg *Config) error {
	cfg.fill()
	l, err := adaptive.NewRateLimiter(adaptive.RateOptions{Floor: cfg.Floor, Ceiling: cfg.Ceiling})
	if err != nil {
		return err
	}
	return l.Close()
}
