package otellimit

import (
	"context"
	"sync"

	"github.com/rategate/rategate/limiter"
)

// KeyMapper maps a key (a client IP, an API key, a host) to the value of
// the rategate.rate_limiting.key attribute: a tenant's plan, a route, a
// region. It must have few values: never return the key itself unless the
// keys are few and known. Values beyond Options.MaxKeyValues for a policy
// are recorded as [OtherKey]. A nil KeyMapper records every key under the
// policy alone, with no key attribute: the default.
type KeyMapper[K comparable] func(key K) string

// keyPolicies finds the policy of each key's mapped value.
type keyPolicies[K comparable] struct {
	m      *Metrics
	name   string
	mapKey KeyMapper[K]
	p      *policy  // the policy when mapKey is nil
	byVal  sync.Map // mapped value -> *policy
}

func newKeyPolicies[K comparable](m *Metrics, name string, mapKey KeyMapper[K]) *keyPolicies[K] {
	kp := &keyPolicies[K]{m: m, name: name, mapKey: mapKey}
	if mapKey == nil {
		kp.p = m.policy(name, "", false)
	}
	return kp
}

// of returns the policy of key.
func (kp *keyPolicies[K]) of(key K) *policy {
	if kp.mapKey == nil {
		return kp.p
	}
	v := kp.mapKey(key)
	if p, ok := kp.byVal.Load(v); ok {
		return p.(*policy)
	}
	p := kp.m.policy(kp.name, v, true)
	if p.key == v {
		// Not a value recorded as OtherKey: the cache stays as small as
		// the recorded values, whatever the mapper returns.
		kp.byVal.Store(v, p)
	}
	return p
}

// WrapPerKey returns a function that wraps perKey's limiter of each key
// under the policy name, for httplimit.Options.PerKey, pool.Options.PerKey
// and httplimit.Transport.PerHost (or any func returning a key's limiter).
// It returns nil for a key perKey returns nil for. The keys' limiters are
// counted together under the policy (or under mapKey's values, when
// mapKey is not nil); their Stats, limits and rates are not observed, since
// a limiter per call cannot be: for those, wrap the keyed set itself with
// [WrapKeyed]. Each call allocates the small wrapper.
func (m *Metrics) WrapPerKey(perKey func(key string) limiter.Limiter, policy string, mapKey KeyMapper[string]) func(key string) limiter.Limiter {
	return m.wrapPerKey(perKey, newKeyPolicies(m, policy, mapKey), true)
}

func (m *Metrics) wrapPerKey(perKey func(string) limiter.Limiter, kp *keyPolicies[string], count bool) func(string) limiter.Limiter {
	return func(key string) limiter.Limiter {
		lim := perKey(key)
		if lim == nil {
			return nil
		}
		return &Limiter{lim: lim, p: kp.of(key), count: count}
	}
}

// KeyedLimiter is a set of limiters, one per key, used by key: what
// limiter.Keyed and limiter.KeyedTokenBucket are, and, with string keys,
// httplimit.KeyedLimiter.
type KeyedLimiter[K comparable] interface {
	TryAcquire(key K, n int) limiter.Lease
	Acquire(ctx context.Context, key K, n int) (limiter.Lease, error)
}

// Keyed is a KeyedLimiter that records the decisions of the set it wraps
// under a policy; make it with [WrapKeyed]. It decides exactly as the set
// does, and passes For, Quota, Stats and Close through when the set has
// them.
type Keyed[K comparable] struct {
	set   KeyedLimiter[K]
	kp    *keyPolicies[K]
	src   *source
	srcP  *policy
	count bool
}

// WrapKeyed returns set instrumented under the policy name (DefaultPolicy
// when empty). Every key is counted under the policy, with no key
// attribute, unless mapKey is not nil (see [KeyMapper]). The set's Stats
// (for a limiter.Keyed or KeyedTokenBucket, the sum over its keys) are
// read at each collection, under the policy alone, until [Keyed.Close].
// WrapKeyed panics if set is nil.
func WrapKeyed[K comparable](m *Metrics, set KeyedLimiter[K], policy string, mapKey KeyMapper[K]) *Keyed[K] {
	return wrapKeyed(m, set, newKeyPolicies(m, policy, mapKey), true)
}

func wrapKeyed[K comparable](m *Metrics, set KeyedLimiter[K], kp *keyPolicies[K], count bool) *Keyed[K] {
	if set == nil {
		panic("otellimit: WrapKeyed of a nil KeyedLimiter")
	}
	p := m.policy(kp.name, "", false)
	return &Keyed[K]{set: set, kp: kp, src: p.addSource(set), srcP: p, count: count}
}

// TryAcquire asks the set for key's permits and counts the decision.
func (k *Keyed[K]) TryAcquire(key K, n int) limiter.Lease {
	return tryAcquire(keyOf[K]{k.set, key}, k.kp.of(key), k.count, n)
}

// Acquire asks the set for key's permits, counts the decision and records
// the time it took.
func (k *Keyed[K]) Acquire(ctx context.Context, key K, n int) (limiter.Lease, error) {
	return acquire(ctx, keyOf[K]{k.set, key}, k.kp.of(key), k.count, n)
}

// For returns key's limiter, instrumented like the set, when the set has a
// For(K) limiter.Limiter method (limiter.Keyed and KeyedTokenBucket do);
// otherwise a limiter that asks the set for key.
func (k *Keyed[K]) For(key K) limiter.Limiter {
	var lim limiter.Limiter = keyOf[K]{k.set, key}
	if f, ok := k.set.(interface{ For(K) limiter.Limiter }); ok {
		lim = f.For(key)
	}
	return &Limiter{lim: lim, p: k.kp.of(key), count: k.count}
}

// Quota returns the set's Quota of key, or the zero Quota if the set has no
// Quota(K) limiter.Quota method.
func (k *Keyed[K]) Quota(key K) limiter.Quota {
	if q, ok := k.set.(interface{ Quota(K) limiter.Quota }); ok {
		return q.Quota(key)
	}
	return limiter.Quota{}
}

// Stats returns the set's Stats, or the zero Stats if it has none.
func (k *Keyed[K]) Stats() limiter.Stats {
	if s, ok := k.set.(interface{ Stats() limiter.Stats }); ok {
		return s.Stats()
	}
	return limiter.Stats{}
}

// Close stops reporting the set's state and closes it, if it has a Close
// method, returning its error.
func (k *Keyed[K]) Close() error {
	k.srcP.removeSource(k.src)
	if c, ok := k.set.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// keyOf is one key of a set, as a limiter.Limiter for tryAcquire and
// acquire (a value: no allocation).
type keyOf[K comparable] struct {
	set KeyedLimiter[K]
	key K
}

func (k keyOf[K]) TryAcquire(n int) limiter.Lease { return k.set.TryAcquire(k.key, n) }
func (k keyOf[K]) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	return k.set.Acquire(ctx, k.key, n)
}
