package limiter

import (
	"time"

	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/internal/waitq"
)

// Order is the order in which queued waiters are served.
type Order int

const (
	// OldestFirst serves waiters first in, first out. It is the default.
	OldestFirst Order = iota
	// NewestFirst serves the newest waiter first. When the queue is over its
	// limit, the oldest waiters fail with ErrQueueFull to make room.
	NewestFirst
)

// QueueOptions configures how Acquire waits.
type QueueOptions struct {
	// Limit caps the permits waiting in the queue (a zero-permit request
	// counts as one); an Acquire that would exceed it fails at once with
	// ErrQueueFull (OldestFirst) or pushes out the oldest waiters (NewestFirst). Zero means no cap: Acquire waits until
	// its context ends. Negative is an error.
	Limit int
	// Order is the service order: OldestFirst (default) or NewestFirst.
	Order Order
	// Spin, when positive, fixes how long before its instant the head
	// waiter stops sleeping on a Go timer and waits precisely instead. Zero,
	// the default, adapts it to how late Go timers have fired in this
	// process (an estimate of their 90th percentile lateness, at most 2 ms):
	// timers on Linux fire up to a millisecond late, and a grant booked when
	// a late timer fires loses that lateness, which caps a pacer well under
	// its rate. The precise end waits, on Linux, on one OS timer (a timerfd)
	// that the whole process shares, and polls the clock for its last
	// microseconds; elsewhere it polls the clock, yielding between polls,
	// which keeps a core busy while it lasts. Either way a grant is never
	// booked before the instant the bound allows. Inside a testing/synctest
	// bubble the waiter waits on its Go timer alone.
	Spin time.Duration
	// PlainTimers makes the head waiter wait on a Go timer alone, as
	// x/time/rate's Wait does: no precise end, so no CPU spent polling or
	// wake-up of the shared OS timer, for a program that would rather save
	// that CPU than the timer's lateness (each wait then ends up to a
	// millisecond late on Linux, and a pacer or a bucket's queue grants
	// that much below its rate). Spin is then ignored.
	PlainTimers bool
}

// waitq returns the options of the queue q configures.
func (q QueueOptions) waitq() waitq.Options {
	return waitq.Options{
		Limit:       int64(q.Limit),
		NewestFirst: q.Order == NewestFirst,
		Full:        ErrQueueFull,
		Timer:       precise.Timer{Spin: q.Spin, Plain: q.PlainTimers},
	}
}

func (q QueueOptions) validate() error {
	if q.Limit < 0 {
		return optErr("Queue.Limit", "must not be negative, got %d", q.Limit)
	}
	if q.Order != OldestFirst && q.Order != NewestFirst {
		return optErr("Queue.Order", "must be OldestFirst or NewestFirst, got %d", int(q.Order))
	}
	if q.Spin < 0 {
		return optErr("Queue.Spin", "must not be negative, got %v", q.Spin)
	}
	return nil
}

func validLimit(limit int) error {
	if limit <= 0 {
		return optErr("Limit", "must be positive, got %d", limit)
	}
	return nil
}

func validWindow(w time.Duration) error {
	if w <= 0 {
		return optErr("Window", "must be positive, got %v", w)
	}
	return nil
}

// validWindowed validates what the three window limiters' options share.
func validWindowed(limit int, window time.Duration, q QueueOptions) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	if err := validWindow(window); err != nil {
		return err
	}
	return q.validate()
}
