package limiter

import (
	"errors"
	"fmt"
)

// Errors returned by Acquire and by Lease.Err. Test for them with errors.Is.
var (
	// ErrClosed: the limiter was closed; queued waiters and later calls fail with it.
	ErrClosed = errors.New("limiter: closed")
	// ErrQueueFull: the wait queue's permit cap (QueueOptions.Limit) was reached,
	// or, with NewestFirst, the waiter was pushed out by newer ones.
	ErrQueueFull = errors.New("limiter: queue full")
	// ErrExceedsLimit: the request asks for more permits than the limiter can ever grant at once.
	ErrExceedsLimit = errors.New("limiter: request exceeds limit")
	// ErrLimited: TryAcquire found too few permits available now (or waiters queued ahead).
	ErrLimited = errors.New("limiter: not enough permits available")
	// ErrInvalidCount: a negative permit count was asked for; it is never granted.
	ErrInvalidCount = errors.New("limiter: negative permit count")
)

// OptionError reports an invalid constructor option, naming the field.
type OptionError struct {
	Field   string // the option, as in "Rate" or "Queue.Limit"
	Problem string // what is wrong with its value
}

// Error returns "limiter: invalid option <Field>: <Problem>".
func (e *OptionError) Error() string {
	return "limiter: invalid option " + e.Field + ": " + e.Problem
}

func optErr(field, format string, args ...any) error {
	return &OptionError{Field: field, Problem: fmt.Sprintf(format, args...)}
}
