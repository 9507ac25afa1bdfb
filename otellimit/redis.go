package otellimit

import (
	"context"
	"fmt"
	"time"
)

// RedisAnswer says who answered a decision of a Redis-backed limiter
// (package redislimit): the value of the rategate.rate_limiting.redis.answer
// attribute.
type RedisAnswer uint8

const (
	// AnsweredByRedis: Redis decided ("redis").
	AnsweredByRedis RedisAnswer = iota
	// AnsweredFailClosed: Redis could not decide and the limiter refused
	// ("fail_closed").
	AnsweredFailClosed
	// AnsweredFailOpen: Redis could not decide and the limiter granted
	// ("fail_open").
	AnsweredFailOpen
	// AnsweredFallback: Redis could not decide and the local fallback
	// limiter decided ("fallback").
	AnsweredFallback

	numRedisAnswers
)

var redisAnswerNames = [numRedisAnswers]string{"redis", "fail_closed", "fail_open", "fallback"}

// String returns the attribute value: "redis", "fail_closed", "fail_open"
// or "fallback".
func (a RedisAnswer) String() string {
	if a < numRedisAnswers {
		return redisAnswerNames[a]
	}
	return fmt.Sprintf("RedisAnswer(%d)", uint8(a))
}

// Redis records the round trips of Redis-backed limiters under a policy;
// make it with [Metrics.Redis] and give its Record to the limiters'
// decision hook (package otelredislimit does, for
// redislimit.Options.OnDecision). The limiters' decisions themselves are
// counted by wrapping them with [Metrics.Wrap], as any limiter's.
type Redis struct{ p *policy }

// Redis returns the recorder of Redis decisions under the policy name
// (DefaultPolicy when empty).
func (m *Metrics) Redis(policy string) *Redis {
	return &Redis{p: m.policy(policy, "", false)}
}

// Record counts one decision by who answered and records how long it
// took: the round trip to Redis, and the fallback's decision if there was
// one. It is safe for concurrent use and does not allocate.
func (r *Redis) Record(answer RedisAnswer, took time.Duration) {
	if answer >= numRedisAnswers {
		return
	}
	p := r.p
	p.redis[answer].Add(1)
	p.m.redisTime.Record(context.Background(), took.Seconds(), p.redisRec[answer]...)
}
