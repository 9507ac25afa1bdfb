package otellimit

import (
	"context"
	"errors"
	"fmt"

	"github.com/rategate/rategate/limiter"
)

// Result is what became of an acquisition: the value of the
// rategate.rate_limiting.result attribute.
type Result uint8

const (
	// Granted: the permits were granted ("granted").
	Granted Result = iota
	// Limited: too few permits now, or callers queued ahead of a
	// TryAcquire ("limited"; limiter.ErrLimited).
	Limited
	// QueueFull: the limiter's queue was full, or a newer waiter pushed
	// this one out ("queue_full"; limiter.ErrQueueFull).
	QueueFull
	// ExceedsLimit: more permits than the limiter can ever grant at once
	// ("exceeds_limit"; limiter.ErrExceedsLimit).
	ExceedsLimit
	// Unavailable: the limiter's store could not decide, as when Redis
	// cannot be reached and the policy is to fail closed ("unavailable";
	// redislimit.ErrUnavailable).
	Unavailable
	// Closed: the limiter was closed ("closed"; limiter.ErrClosed).
	Closed
	// Canceled: the caller's context was cancelled while it waited, or the
	// HTTP client went away ("canceled"; context.Canceled).
	Canceled
	// DeadlineExceeded: the permits could not be granted before the
	// caller's deadline, or within the middleware's Wait
	// ("deadline_exceeded"; context.DeadlineExceeded).
	DeadlineExceeded
	// Error: any other failure: a negative count, no limiter or key for
	// the request, an error the classification does not know ("error").
	Error

	numResults
)

var resultNames = [numResults]string{
	"granted", "limited", "queue_full", "exceeds_limit", "unavailable",
	"closed", "canceled", "deadline_exceeded", "error",
}

// String returns the attribute value: "granted", "limited", "queue_full",
// "exceeds_limit", "unavailable", "closed", "canceled",
// "deadline_exceeded" or "error".
func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// unavailableText is the text of redislimit.ErrUnavailable. This module's
// tests check it against the real error, so that ResultOf recognises it
// without importing redislimit (and with it a Redis client) into every
// program that records metrics.
const unavailableText = "redislimit: redis unavailable"

// ResultOf classifies the error of an acquisition (nil is Granted). An
// error is Unavailable when its tree (errors.Unwrap, and Unwrap() []error)
// holds redislimit.ErrUnavailable, recognised by its text, or an error
// whose Unavailable() bool method returns true (for a store of your own);
// this is tested first, since such an error may also wrap the cause, a
// context.DeadlineExceeded of a timed-out round trip say. Then the errors
// of package limiter and of package context are recognised with errors.Is;
// anything else is Error.
func ResultOf(err error) Result {
	// The errors of this module's leases, unwrapped, first: a refused
	// TryAcquire is classified without walking an error tree.
	switch err {
	case nil:
		return Granted
	case limiter.ErrLimited:
		return Limited
	case limiter.ErrQueueFull:
		return QueueFull
	case limiter.ErrExceedsLimit:
		return ExceedsLimit
	case limiter.ErrClosed:
		return Closed
	case context.Canceled:
		return Canceled
	case context.DeadlineExceeded:
		return DeadlineExceeded
	}
	switch {
	case unavailable(err):
		return Unavailable
	case errors.Is(err, limiter.ErrClosed):
		return Closed
	case errors.Is(err, limiter.ErrQueueFull):
		return QueueFull
	case errors.Is(err, limiter.ErrExceedsLimit):
		return ExceedsLimit
	case errors.Is(err, limiter.ErrLimited):
		return Limited
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Error
}

// unavailable reports whether err's tree holds an error that says its store
// could not decide: a leaf with redislimit.ErrUnavailable's text, or an
// error with an Unavailable method that returns true.
func unavailable(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unavailable() bool }:
		if e.Unavailable() {
			return true
		}
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return unavailable(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			if unavailable(c) {
				return true
			}
		}
		return false
	}
	return err.Error() == unavailableText
}
