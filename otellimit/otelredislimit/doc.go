// Package otelredislimit records the decisions of package redislimit's
// limiters with package otellimit: who answered each one (Redis, or, when
// Redis could not decide, the limiter's error policy: fail closed, fail
// open, the fallback) and how long it took.
//
//	rec := metrics.Redis("shared-api")
//	rl, err := redislimit.NewTokenBucket(redislimit.Options{
//		Client: client, Key: "api", OnError: redislimit.UseFallback, Fallback: local,
//		OnDecision: otelredislimit.OnDecision(rec),
//	}, limiter.TokenBucketOptions{Rate: limiter.Per(100, time.Second), Burst: 100})
//	lim := metrics.Wrap(rl, "shared-api") // its grants and refusals, as any limiter's
package otelredislimit
