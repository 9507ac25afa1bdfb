package otellimit

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rategate/rategate/limiter"
)

// Attribute keys.
const (
	// AttrPolicy is the policy name the user gives.
	AttrPolicy = attribute.Key("rategate.rate_limiting.policy")
	// AttrResult is a decision's [Result].
	AttrResult = attribute.Key("rategate.rate_limiting.result")
	// AttrOutcome is an outcome reported through Lease.Report:
	// "succeeded", "throttled", "failed" or "unknown".
	AttrOutcome = attribute.Key("rategate.rate_limiting.outcome")
	// AttrKey is a key's value as a [KeyMapper] gives it; absent unless the
	// user sets a KeyMapper.
	AttrKey = attribute.Key("rategate.rate_limiting.key")
	// AttrRedisAnswer says who answered a Redis-backed limiter's decision:
	// a [RedisAnswer]'s String.
	AttrRedisAnswer = attribute.Key("rategate.rate_limiting.redis.answer")
)

// OtherKey is the key value recorded for keys beyond Options.MaxKeyValues
// distinct values of one policy.
const OtherKey = "_OTHER"

// policyID names a policy: its name and, for a KeyMapper's values, the key.
type policyID struct {
	name, key string
	keyed     bool
}

// policy holds the counters and attribute sets of one policy (and key
// value). Its counters are read by Metrics.observe.
type policy struct {
	m   *Metrics
	key string // the key value, for a KeyMapper's policy

	_        [64]byte
	granted  atomic.Int64 // results[Granted], on a cache line of its own
	_        [64]byte
	results  [numResults]atomic.Int64
	outcomes [4]atomic.Int64
	redis    [numRedisAnswers]atomic.Int64
	held     atomic.Int64
	hadLease atomic.Bool

	// sources are the limiters whose Stats, Limit and Rate the policy
	// reports; guarded by m.mu.
	sources []*source

	base       attribute.Set
	baseRec    []metric.RecordOption
	baseObs    []metric.ObserveOption
	resultObs  [numResults][]metric.ObserveOption
	resultRec  [numResults][]metric.RecordOption
	outcomeObs [4][]metric.ObserveOption
	redisObs   [numRedisAnswers][]metric.ObserveOption
	redisRec   [numRedisAnswers][]metric.RecordOption
}

func newPolicy(m *Metrics, id policyID) *policy {
	attrs := []attribute.KeyValue{AttrPolicy.String(id.name)}
	if id.keyed {
		attrs = append(attrs, AttrKey.String(id.key))
	}
	p := &policy{m: m, key: id.key, base: attribute.NewSet(attrs...)}
	opt := metric.WithAttributeSet(p.base)
	p.baseRec, p.baseObs = []metric.RecordOption{opt}, []metric.ObserveOption{opt}
	with := func(kv attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(attrs[:len(attrs):len(attrs)], kv)...))
	}
	for r := range numResults {
		o := with(AttrResult.String(Result(r).String()))
		p.resultObs[r], p.resultRec[r] = []metric.ObserveOption{o}, []metric.RecordOption{o}
	}
	for i := range p.outcomes {
		p.outcomeObs[i] = []metric.ObserveOption{with(AttrOutcome.String(limiter.Outcome(i).String()))}
	}
	for a := range numRedisAnswers {
		o := with(AttrRedisAnswer.String(RedisAnswer(a).String()))
		p.redisObs[a], p.redisRec[a] = []metric.ObserveOption{o}, []metric.RecordOption{o}
	}
	return p
}

// count counts a decision.
func (p *policy) count(r Result) {
	if r == Granted {
		p.granted.Add(1)
		return
	}
	p.results[r].Add(1)
}

// refused counts a refusal for err and returns its result.
func (p *policy) refused(err error) Result {
	r := p.m.result(err)
	p.count(r)
	return r
}

// waited records the time an Acquire took.
func (p *policy) waited(ctx context.Context, d time.Duration, r Result) {
	p.m.inQueue.Record(ctx, d.Seconds(), p.resultRec[r]...)
}

// outcome counts an outcome reported through Lease.Report.
func (p *policy) outcome(o limiter.Outcome) {
	if int(o) < len(p.outcomes) {
		p.outcomes[o].Add(1)
	}
}

// observe reports p's counters and its sources' state; m.mu is held.
func (p *policy) observe(m *Metrics, o metric.Observer) {
	if n := p.granted.Load(); n > 0 {
		o.ObserveInt64(m.requests, n, p.resultObs[Granted]...)
	}
	for r := Granted + 1; r < numResults; r++ {
		if n := p.results[r].Load(); n > 0 {
			o.ObserveInt64(m.requests, n, p.resultObs[r]...)
		}
	}
	for i := range p.outcomes {
		if n := p.outcomes[i].Load(); n > 0 {
			o.ObserveInt64(m.outcomes, n, p.outcomeObs[i]...)
		}
	}
	for a := range p.redis {
		if n := p.redis[a].Load(); n > 0 {
			o.ObserveInt64(m.redisN, n, p.redisObs[a]...)
		}
	}
	if p.hadLease.Load() {
		o.ObserveInt64(m.leases, p.held.Load(), p.baseObs...)
	}
	p.observeSources(m, o)
}

// observeSources reports the sums of the sources' waiters, queued permits,
// limits and rates.
func (p *policy) observeSources(m *Metrics, o metric.Observer) {
	var waiters, queued, limit int64
	var rate float64
	var stats, limits, rates bool
	for _, s := range p.sources {
		if s.stats != nil {
			st := s.stats.Stats()
			waiters += int64(st.Waiters)
			queued += st.Queued
			stats = true
		}
		if s.limit != nil {
			limit += int64(s.limit.Limit())
			limits = true
		}
		if s.rate != nil {
			if r := s.rate.Rate(); r.Period() > 0 {
				rate += float64(r.Events()) / r.Period().Seconds()
			}
			rates = true
		}
	}
	if stats {
		o.ObserveInt64(m.waiters, waiters, p.baseObs...)
		o.ObserveInt64(m.queued, queued, p.baseObs...)
	}
	if limits {
		o.ObserveInt64(m.limit, limit, p.baseObs...)
	}
	if rates {
		o.ObserveFloat64(m.rate, rate, p.baseObs...)
	}
}

// source is a limiter (or keyed set) whose state a policy reports.
type source struct {
	stats interface{ Stats() limiter.Stats }
	limit interface{ Limit() int }
	rate  interface{ Rate() limiter.Rate }
}

// addSource makes lim a source of p, if it has anything to report, and
// returns it (nil otherwise).
func (p *policy) addSource(lim any) *source {
	s := &source{}
	s.stats, _ = lim.(interface{ Stats() limiter.Stats })
	s.limit, _ = lim.(interface{ Limit() int })
	s.rate, _ = lim.(interface{ Rate() limiter.Rate })
	if s.stats == nil && s.limit == nil && s.rate == nil {
		return nil
	}
	p.m.mu.Lock()
	p.sources = append(p.sources, s)
	p.m.mu.Unlock()
	return s
}

// removeSource stops reporting s.
func (p *policy) removeSource(s *source) {
	if s == nil {
		return
	}
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	for i, x := range p.sources {
		if x == s {
			p.sources = append(p.sources[:i], p.sources[i+1:]...)
			return
		}
	}
}
