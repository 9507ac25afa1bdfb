package otelredislimit

import (
	"github.com/rategate/rategate/otellimit"
	"github.com/rategate/rategate/redislimit"
)

// OnDecision returns a hook for redislimit.Options.OnDecision that records
// every decision with r. It does not allocate.
func OnDecision(r *otellimit.Redis) func(redislimit.DecisionInfo) {
	return func(d redislimit.DecisionInfo) {
		if a, ok := Answer(d.Answer); ok {
			r.Record(a, d.Duration)
		}
	}
}

// Answer returns the otellimit.RedisAnswer of a redislimit.Answer, and
// false for an answer it does not know.
func Answer(a redislimit.Answer) (otellimit.RedisAnswer, bool) {
	switch a {
	case redislimit.AnsweredByRedis:
		return otellimit.AnsweredByRedis, true
	case redislimit.AnsweredFailClosed:
		return otellimit.AnsweredFailClosed, true
	case redislimit.AnsweredFailOpen:
		return otellimit.AnsweredFailOpen, true
	case redislimit.AnsweredFallback:
		return otellimit.AnsweredFallback, true
	}
	return 0, false
}
