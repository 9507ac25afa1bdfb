package redislimit

import (
	"context"
	"fmt"
	"time"
)

// Answer names who decided a decision that asked Redis.
type Answer uint8

const (
	// AnsweredByRedis: Redis decided (granted or refused).
	AnsweredByRedis Answer = iota
	// AnsweredFailClosed: Redis could not decide, and the decision was
	// refused (OnError FailClosed).
	AnsweredFailClosed
	// AnsweredFailOpen: Redis could not decide, and the decision was
	// granted (OnError FailOpen).
	AnsweredFailOpen
	// AnsweredFallback: Redis could not decide, and Options.Fallback
	// decided (OnError UseFallback).
	AnsweredFallback
)

// String returns the answer's name: "redis", "fail-closed", "fail-open" or
// "fallback".
func (a Answer) String() string {
	switch a {
	case AnsweredByRedis:
		return "redis"
	case AnsweredFailClosed:
		return "fail-closed"
	case AnsweredFailOpen:
		return "fail-open"
	case AnsweredFallback:
		return "fallback"
	}
	return fmt.Sprintf("Answer(%d)", uint8(a))
}

// DecisionInfo describes one decision that asked Redis, for
// Options.OnDecision.
type DecisionInfo struct {
	// Duration is how long the decision took: its round trip, with the wait
	// for a script call already on its way when the decision was coalesced
	// with others. For Partitioned, the lease sync's round trip.
	Duration time.Duration
	// Err is why Redis could not decide (it wraps ErrUnavailable and the
	// cause); nil when Redis answered.
	Err error
	// Answer says who decided.
	Answer Answer
}

// answer is who decides, under policy p, when a round trip ended with err.
func (p ErrorPolicy) answer(err error) Answer {
	switch {
	case err == nil:
		return AnsweredByRedis
	case p == FailOpen:
		return AnsweredFailOpen
	case p == UseFallback:
		return AnsweredFallback
	}
	return AnsweredFailClosed
}

// ask gets one request of h's limit decided, and reports the decision to
// Options.OnDecision (reading the clock only when it is set).
func (h *handle) ask(ctx context.Context, arg string) result {
	hook := h.e.o.OnDecision
	if hook == nil {
		return h.decide(ctx, arg)
	}
	start := time.Now()
	res := h.decide(ctx, arg)
	hook(DecisionInfo{Duration: time.Since(start), Err: res.err, Answer: h.e.o.OnError.answer(res.err)})
	return res
}
