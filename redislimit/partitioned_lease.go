package redislimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rategate/rategate/internal/exact"
)

// wake makes sure the lease keeper runs and syncs soon.
func (p *Partitioned) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeLocked()
}

// wakeLocked is wake for a caller that holds mu.
func (p *Partitioned) wakeLocked() {
	if p.closed.Load() {
		return
	}
	if !p.running {
		p.running = true
		p.keeperRunning.Store(true)
		p.done = make(chan struct{})
		go p.keep(p.done)
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// keep is the lease keeper: it runs while this process holds or wants
// partitions, and syncs with Redis when a lease needs renewing, when callers
// want more capacity, or when a quarantined partition may be used.
func (p *Partitioned) keep(done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	minGap := time.Duration(int64(p.ttl) / 32)
	for {
		select {
		case <-timer.C:
		case <-p.kick:
			// Not more often than minGap while refused, so that a process
			// no partition can be found for does not hammer Redis.
			if gap := time.Duration(p.now()-p.lastSync) - minGap; gap < 0 && !p.closed.Load() {
				timer.Reset(-gap)
				continue
			}
		}
		next, more := p.sync()
		if !more {
			return
		}
		timer.Stop()
		timer.Reset(next)
	}
}

// syncRequest is what one sync tells Redis.
type syncRequest struct {
	keep   []int   // partitions to renew (in use or pending)
	rel    []int   // partitions given back
	debts  []int64 // their buckets' debt, µs
	want   int
	hungry bool
	seen   int64 // Redis time (µs) until which the hash must exist, by the last sync of ours that found it
}

// sync runs one lease round trip and reports when to run the next, or that
// the keeper may stop (nothing held, nothing wanted, or closed).
func (p *Partitioned) sync() (time.Duration, bool) {
	req, closing := p.prepare()
	if len(req.keep) == 0 && len(req.rel) == 0 && req.want == 0 {
		if p.stopIfIdle() {
			return 0, false
		}
		// Demand came in since prepare: sync again at once.
		return 0, true
	}
	sendAt := p.now()
	res, err := p.call(req)
	if hook := p.o.OnDecision; hook != nil {
		hook(DecisionInfo{Duration: time.Duration(p.now() - sendAt), Err: err, Answer: p.o.OnError.answer(err)})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastSync = sendAt
	if err != nil {
		p.unavail.Store(&err) // it wraps ErrUnavailable (a failed round trip, or a malformed reply)
		// A head waiter that finds no usable lease waits for the held
		// partitions to change; with Redis out of reach, Options.OnError
		// must now decide for it.
		p.serve(time.Now())
		if closing {
			return 0, false // the leases lapse in Redis after their TTL
		}
		// The leases stay usable until their deadline; try again well before it.
		return max(p.ttl/16, time.Millisecond), true
	}
	p.unavail.Store(nil)
	p.seenUntil = res.now + p.keepMS()*1000
	next := p.apply(req, res, sendAt)
	if closing {
		return 0, false
	}
	return next, true
}

// prepare decides, under the lock, which partitions to give back (and stops
// using them at once), which to renew, and how many more to ask for.
func (p *Partitioned) prepare() (syncRequest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.activate(now)
	var req syncRequest
	hungry := p.demand.Swap(0) > 0 || p.q.Len() > 0
	used := p.permits() - p.lastPermits
	p.lastPermits += used
	elapsed := now - p.lastSync
	closing := p.closed.Load()
	var give int
	switch {
	case closing:
		give = len(p.parts)
	case p.excess > 0:
		give = min(p.excess, len(p.parts))
	case !hungry:
		give = len(p.parts) - p.needed(used, elapsed)
	}
	p.excess = 0
	if give > 0 {
		req.rel, req.debts = p.release(now, give)
	}
	req.seen = p.seenUntil
	req.keep = slices.Clone(p.parts)
	for _, q := range p.pending {
		req.keep = append(req.keep, q.idx)
	}
	if closing {
		// Pending partitions were never used: they go back empty.
		for _, q := range p.pending {
			req.rel = append(req.rel, q.idx)
			req.debts = append(req.debts, p.refillUS(q.idx))
		}
		p.pending = nil
		req.keep = req.keep[:0]
	} else if hungry && give == 0 {
		req.want = p.po.Partitions - len(req.keep)
		req.hungry = true
	}
	return req, closing
}

// needed is how many partitions serve the demand seen in the last elapsed
// ns, used permits, with a quarter to spare: the rest are given back.
func (p *Partitioned) needed(used, elapsed int64) int {
	if used <= 0 || elapsed <= 0 {
		return 0
	}
	// One partition grants unit/cost permits per ns.
	perPart := float64(p.unit) / float64(p.cost) * float64(elapsed)
	return min(int(math.Ceil(1.25*float64(used)/perPart)), len(p.parts))
}

// release stops using the last give partitions in p.parts and returns them
// with each one's share of the bucket's debt, in µs of one partition's
// refill, to be stored in Redis. The caller holds mu.
func (p *Partitioned) release(now int64, give int) (idx []int, debtsUS []int64) {
	c := p.cfg.Load()
	debt, old := p.lockDebt(now)
	keepDebt := debt
	for _, i := range p.parts[len(p.parts)-give:] {
		b := p.partBurst(i)
		share, _ := exact.MulDivCeil(debt, b, max(c.burst, 1))
		share = min(share, b*p.cost)
		keepDebt -= share
		// share scaled units take share/unit ns for one partition to earn.
		ns := exact.CeilDiv(share, p.unit)
		idx = append(idx, i)
		debtsUS = append(debtsUS, exact.CeilDiv(ns, 1000))
	}
	p.parts = p.parts[:len(p.parts)-give]
	p.install(now, c.deadline, max(keepDebt, 0), old)
	return idx, debtsUS
}

// activate puts pending partitions whose quarantine is over into use, with
// empty buckets. The caller holds mu.
func (p *Partitioned) activate(now int64) {
	var ready []int
	p.pending = slices.DeleteFunc(p.pending, func(q pendingPart) bool {
		if q.notBefore <= now {
			ready = append(ready, q.idx)
			return true
		}
		return false
	})
	if len(ready) == 0 {
		return
	}
	debt, old := p.lockDebt(now)
	for _, i := range ready {
		debt += p.partBurst(i) * p.cost
	}
	p.parts = append(p.parts, ready...)
	slices.Sort(p.parts)
	p.install(now, p.leaseDeadline, debt, old)
}

// stopIfIdle ends the keeper when nothing is held or wanted.
func (p *Partitioned) stopIfIdle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed.Load() && (p.demand.Load() > 0 || p.q.Len() > 0 || len(p.parts) > 0 || len(p.pending) > 0) {
		return false
	}
	p.running = false
	p.keeperRunning.Store(false)
	return true
}

// syncReply is the script's answer.
type syncReply struct {
	now, qend int64 // µs of Redis's clock
	excess    int
	level     float64
	free      int
	lost      []int
	got       []int
	gotDebt   []int64 // µs; -1 for an empty bucket
}

// call runs the sync script once; a script is sent again only on NOSCRIPT
// (by redis.Script.Run), never after an error that may have committed.
func (p *Partitioned) call(req syncRequest) (syncReply, error) {
	args := make([]any, 0, 9+len(req.keep)+2*len(req.rel))
	args = append(args, p.owner, p.ttl.Microseconds(), p.po.Partitions, req.want, boolArg(req.hungry),
		p.keepMS(), req.seen, len(req.keep))
	for _, i := range req.keep {
		args = append(args, i)
	}
	args = append(args, len(req.rel))
	for j, i := range req.rel {
		args = append(args, i, req.debts[j])
	}
	p.calls.Add(1)
	// A late answer is dropped: partitions it gave are ours in Redis but
	// unknown here, so they lapse after the TTL or come back to us, empty,
	// at a later sync.
	v, err := p.rc.run(context.Background(), partitionScript, nil, []string{p.key}, args...)
	if err != nil {
		return syncReply{}, err
	}
	return parseSyncReply(v)
}

// keepMS is how long the hash outlives its last sync, in ms: two TTLs and a
// partition's refill time, when no lease of it can be live and every
// stored bucket is full again (at most 30 days).
func (p *Partitioned) keepMS() int64 {
	return min((2*p.ttl.Microseconds()+p.refillUS(0)+999)/1000, int64(30*24*time.Hour/time.Millisecond))
}

// parseSyncReply reads the sync script's reply. A malformed one is an error
// wrapping ErrUnavailable, as every failed sync's is.
func parseSyncReply(reply any) (syncReply, error) {
	bad := func() (syncReply, error) {
		return syncReply{}, unavailable(fmt.Errorf("redislimit: malformed partition sync reply %v", reply))
	}
	v, ok := intReply(nil, reply)
	if !ok || len(v) < 7 {
		return bad()
	}
	r := syncReply{now: v[0], qend: v[1], excess: int(v[2]), level: float64(v[3]) / 1000, free: int(v[4])}
	nl := int(v[5])
	if nl < 0 || len(v) < 7+nl {
		return bad()
	}
	for _, x := range v[6 : 6+nl] {
		r.lost = append(r.lost, int(x))
	}
	ng := int(v[6+nl])
	rest := v[7+nl:]
	if ng < 0 || len(rest) != 2*ng {
		return bad()
	}
	for j := range ng {
		r.got = append(r.got, int(rest[2*j]))
		r.gotDebt = append(r.gotDebt, rest[2*j+1])
	}
	return r, nil
}

// apply installs the outcome of a sync sent at sendAt and returns when the
// next should run. The caller holds mu.
func (p *Partitioned) apply(req syncRequest, r syncReply, sendAt int64) time.Duration {
	now := p.now()
	// Every lease renewed or taken by this call lives in Redis until at
	// least sendAt + TTL on Redis's clock; stop using them a margin before.
	deadline := sendAt + int64(p.ttl-p.margin)
	p.leaseDeadline = deadline
	debt, old := p.lockDebt(now)
	lost := len(r.lost) > 0
	if lost {
		// Some partition was taken over (our lease expired) or Redis lost
		// it: start the rest empty, so that nothing its new holder uses is
		// also used here.
		p.parts = slices.DeleteFunc(p.parts, func(i int) bool { return slices.Contains(r.lost, i) })
		p.pending = slices.DeleteFunc(p.pending, func(q pendingPart) bool { return slices.Contains(r.lost, q.idx) })
	}
	quarantine := r.qend - r.now // µs during which leases granted before Redis lost them may be in use
	for j, i := range r.got {
		if quarantine > 0 {
			p.pending = append(p.pending, pendingPart{idx: i, notBefore: now + quarantine*1000})
			continue
		}
		full := p.partBurst(i) * p.cost
		d := full
		if us := r.gotDebt[j]; us >= 0 && us <= math.MaxInt64/1000/p.unit {
			d = min(us*1000*p.unit, full)
		}
		debt += d
		p.parts = append(p.parts, i)
	}
	slices.Sort(p.parts)
	if lost {
		var tol int64
		for _, i := range p.parts {
			tol += p.partBurst(i) * p.cost
		}
		debt = max(debt, tol)
	}
	// Otherwise, even after our leases lapsed (a stall, Redis out of
	// reach), the bucket is kept: it went on filling with partitions that
	// no one else held meanwhile (the owner in Redis is still us).
	p.install(now, deadline, debt, old)

	next := p.renewEvery()
	if r.excess > 0 {
		p.excess = r.excess
		next = 0
	}
	held := len(p.parts) + len(p.pending)
	if req.hungry && (float64(held) < math.Floor(r.level) || r.free > 0 && float64(held) < math.Ceil(r.level)) {
		next = min(next, p.pollEvery())
	}
	for _, q := range p.pending {
		next = min(next, time.Duration(q.notBefore-now))
	}
	if held == 0 && !req.hungry {
		next = 0 // let the keeper stop, or serve demand that came meanwhile
	}
	return max(next, 0)
}

// refillUS is how long partition i takes to fill from empty, in µs.
func (p *Partitioned) refillUS(i int) int64 {
	us, ok := exact.MulDivCeil(p.partBurst(i), p.cost, p.unit*1000)
	if !ok {
		return math.MaxInt64 / 4
	}
	return us
}

// renewEvery is the period of renewals: a third of the TTL, so that two
// can fail before the leases lapse, and at most a second, so that holders
// hear within a second that another process wants partitions.
func (p *Partitioned) renewEvery() time.Duration { return min(p.ttl/3, time.Second) }

// pollEvery is how often a process below its fair share looks for the
// partitions others give back.
func (p *Partitioned) pollEvery() time.Duration {
	return min(max(p.ttl/12, 5*time.Millisecond), 50*time.Millisecond)
}
