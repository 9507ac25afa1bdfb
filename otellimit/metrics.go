package otellimit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/rategate/rategate/limiter"
)

// ScopeName is the instrumentation scope of the meter the instruments are
// made with.
const ScopeName = "github.com/rategate/rategate/otellimit"

// DefaultMaxKeyValues is how many distinct key values (see [KeyMapper]) a
// policy records when Options.MaxKeyValues is 0.
const DefaultMaxKeyValues = 100

// DefaultPolicy is the policy name of a limiter wrapped with an empty one.
const DefaultPolicy = "default"

// Options configures [New]. The zero Options uses the global meter provider
// (otel.GetMeterProvider) and the default classification of errors.
type Options struct {
	// MeterProvider makes the meter; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Classify, if set, is asked first for the result of every error a
	// limiter refuses with; when it returns false, [ResultOf] decides. Use
	// it for a limiter whose errors ResultOf does not know (the store of a
	// limiter of your own could not be reached: [Unavailable]).
	Classify func(err error) (Result, bool)
	// MaxKeyValues caps the distinct values a [KeyMapper] may give the key
	// attribute within one policy; later values are recorded as
	// [OtherKey]. 0 means DefaultMaxKeyValues.
	MaxKeyValues int
}

// Metrics records what limiters decide as OpenTelemetry metrics. Make one
// per meter provider with [New] and instrument any number of limiters with
// it, each under a policy name ([Metrics.Wrap], [Metrics.WrapPerKey],
// [WrapKeyed], [Metrics.Middleware], [Metrics.Redis]). Limiters wrapped
// under the same policy name (and key value) share their measurements.
//
// Counts are kept in the policy's atomic counters and read, with every
// wrapped limiter's Stats, by one callback when the meter provider
// collects: no goroutine, timer or synchronous instrument call is added to
// a granted TryAcquire. Durations (time in queue, lease held, Redis round
// trip) are recorded into histograms as they end.
type Metrics struct {
	classify  func(error) (Result, bool)
	maxKeys   int
	requests  metric.Int64ObservableCounter
	outcomes  metric.Int64ObservableCounter
	redisN    metric.Int64ObservableCounter
	waiters   metric.Int64ObservableUpDownCounter
	queued    metric.Int64ObservableUpDownCounter
	leases    metric.Int64ObservableUpDownCounter
	limit     metric.Int64ObservableGauge
	rate      metric.Float64ObservableGauge
	inQueue   metric.Float64Histogram
	leaseTime metric.Float64Histogram
	redisTime metric.Float64Histogram
	reg       metric.Registration

	mu       sync.Mutex
	policies map[policyID]*policy
	order    []*policy      // in creation order, for the callback
	keyVals  map[string]int // distinct key values per policy name
}

// durationBuckets are the histogram boundaries, in seconds, of the
// OpenTelemetry HTTP semantic conventions (and ASP.NET Core's rate-limiting
// durations).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// New makes the instruments on o.MeterProvider's meter for [ScopeName] and
// registers the callback that observes them. It fails with a
// *limiter.OptionError for a negative MaxKeyValues, and with the meter's
// error if an instrument cannot be made.
func New(o Options) (*Metrics, error) {
	if o.MaxKeyValues < 0 {
		return nil, &limiter.OptionError{Field: "MaxKeyValues", Problem: fmt.Sprintf("%d is negative", o.MaxKeyValues)}
	}
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := &Metrics{
		classify: o.Classify,
		maxKeys:  o.MaxKeyValues,
		policies: make(map[policyID]*policy),
		keyVals:  make(map[string]int),
	}
	if m.maxKeys == 0 {
		m.maxKeys = DefaultMaxKeyValues
	}
	if err := m.instruments(mp.Meter(ScopeName)); err != nil {
		return nil, err
	}
	return m, nil
}

// Instrument names, units and descriptions: see the package documentation.
const (
	nameRequests  = "rategate.rate_limiting.requests"
	nameOutcomes  = "rategate.rate_limiting.outcomes"
	nameInQueue   = "rategate.rate_limiting.request.time_in_queue"
	nameWaiters   = "rategate.rate_limiting.queued_requests"
	nameQueued    = "rategate.rate_limiting.queued_permits"
	nameLeases    = "rategate.rate_limiting.active_request_leases"
	nameLeaseTime = "rategate.rate_limiting.request_lease.duration"
	nameLimit     = "rategate.rate_limiting.limit"
	nameRate      = "rategate.rate_limiting.rate"
	nameRedisN    = "rategate.rate_limiting.redis.decisions"
	nameRedisTime = "rategate.rate_limiting.redis.duration"
)

func (m *Metrics) instruments(mt metric.Meter) error {
	var errs [11]error
	m.requests, errs[0] = mt.Int64ObservableCounter(nameRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Acquisitions decided, by result."))
	m.outcomes, errs[1] = mt.Int64ObservableCounter(nameOutcomes, metric.WithUnit("{request}"),
		metric.WithDescription("Outcomes reported through Lease.Report, by outcome."))
	m.redisN, errs[2] = mt.Int64ObservableCounter(nameRedisN, metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of Redis-backed limiters, by who answered."))
	m.waiters, errs[3] = mt.Int64ObservableUpDownCounter(nameWaiters, metric.WithUnit("{request}"),
		metric.WithDescription("Acquire calls waiting in the limiters' queues."))
	m.queued, errs[4] = mt.Int64ObservableUpDownCounter(nameQueued, metric.WithUnit("{permit}"),
		metric.WithDescription("Permits asked for by the Acquire calls waiting in the limiters' queues."))
	m.leases, errs[5] = mt.Int64ObservableUpDownCounter(nameLeases, metric.WithUnit("{request}"),
		metric.WithDescription("Granted leases holding permits until released."))
	m.limit, errs[6] = mt.Int64ObservableGauge(nameLimit, metric.WithUnit("{permit}"),
		metric.WithDescription("The limit in force of the limiters that have one (Limit() int)."))
	m.rate, errs[7] = mt.Float64ObservableGauge(nameRate, metric.WithUnit("{permit}/s"),
		metric.WithDescription("The rate in force of the limiters that have one (Rate() limiter.Rate)."))
	m.inQueue, errs[8] = mt.Float64Histogram(nameInQueue, metric.WithUnit("s"),
		metric.WithDescription("The time an Acquire call took, granted or not."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.leaseTime, errs[9] = mt.Float64Histogram(nameLeaseTime, metric.WithUnit("s"),
		metric.WithDescription("The time a lease held its permits, from grant to release."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.redisTime, errs[10] = mt.Float64Histogram(nameRedisTime, metric.WithUnit("s"),
		metric.WithDescription("The time a Redis-backed limiter took to decide, by who answered."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("otellimit: making the instruments: %w", err)
	}
	reg, err := mt.RegisterCallback(m.observe,
		m.requests, m.outcomes, m.redisN, m.waiters, m.queued, m.leases, m.limit, m.rate)
	if err != nil {
		return fmt.Errorf("otellimit: registering the callback: %w", err)
	}
	m.reg = reg
	return nil
}

// Close stops observing: the counters and gauges are no longer reported
// (the histograms still record). Wrapped limiters keep working.
func (m *Metrics) Close() error {
	return m.reg.Unregister()
}

// observe is the callback: every policy's counters, and the sums of its
// sources' Stats, limits and rates.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.order {
		p.observe(m, o)
	}
	return nil
}

// policy returns the policy of name and key value (keyed), made on first use.
// A key value beyond Options.MaxKeyValues for name is OtherKey's.
func (m *Metrics) policy(name, key string, keyed bool) *policy {
	if name == "" {
		name = DefaultPolicy
	}
	id := policyID{name, key, keyed}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.policies[id]; ok {
		return p
	}
	if keyed && key != OtherKey {
		if m.keyVals[name] >= m.maxKeys {
			id.key = OtherKey
			if p, ok := m.policies[id]; ok {
				return p
			}
		} else {
			m.keyVals[name]++
		}
	}
	p := newPolicy(m, id)
	m.policies[id] = p
	m.order = append(m.order, p)
	return p
}

// result classifies the error of a refusal.
func (m *Metrics) result(err error) Result {
	if m.classify != nil {
		if r, ok := m.classify(err); ok {
			return r
		}
	}
	return ResultOf(err)
}
