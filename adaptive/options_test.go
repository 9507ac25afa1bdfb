package adaptive

import (
	"errors"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

func TestRateOptions(t *testing.T) {
	s := func(n int) limiter.Rate { return limiter.Per(n, time.Second) }
	for _, tc := range []struct {
		name  string
		opts  RateOptions
		field string // "" when valid
	}{
		{"valid", RateOptions{Floor: s(1), Initial: s(10), Ceiling: s(100)}, ""},
		{"initial defaults to floor", RateOptions{Floor: s(1), Ceiling: s(100)}, ""},
		{"all equal", RateOptions{Floor: s(5), Initial: s(5), Ceiling: s(5)}, ""},
		{"equal in other units", RateOptions{Floor: s(1), Initial: limiter.Per(60, time.Minute), Ceiling: limiter.Per(3600, time.Hour)}, ""},
		{"zero floor", RateOptions{Ceiling: s(100)}, "Floor"},
		{"negative floor", RateOptions{Floor: s(-1), Ceiling: s(100)}, "Floor"},
		{"zero ceiling", RateOptions{Floor: s(1)}, "Ceiling"},
		{"zero period", RateOptions{Floor: s(1), Ceiling: limiter.Per(5, 0)}, "Ceiling"},
		{"negative initial", RateOptions{Floor: s(1), Initial: s(-3), Ceiling: s(100)}, "Initial"},
		{"floor above ceiling", RateOptions{Floor: s(101), Ceiling: s(100)}, "Floor"},
		{"initial below floor", RateOptions{Floor: s(10), Initial: s(9), Ceiling: s(100)}, "Initial"},
		{"initial above ceiling", RateOptions{Floor: s(10), Initial: limiter.Per(6001, time.Minute), Ceiling: s(100)}, "Initial"},
		{"negative burst", RateOptions{Floor: s(1), Ceiling: s(100), Burst: -1}, "Burst"},
		{"negative queue limit", RateOptions{Floor: s(1), Ceiling: s(100), Queue: limiter.QueueOptions{Limit: -1}}, "Queue.Limit"},
		{"burst overflows", RateOptions{Floor: s(1), Ceiling: s(100), Burst: 1 << 62}, "Burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := NewRateLimiter(tc.opts)
			checkOption(t, err, tc.field)
			if err == nil {
				defer lim.Close()
				want := tc.opts.Initial
				if want.IsZero() {
					want = tc.opts.Floor
				}
				if compareRates(lim.Rate(), want) != 0 {
					t.Errorf("Rate() = %v, want Initial (or Floor) %v", lim.Rate(), want)
				}
			}
		})
	}
}

func TestConcurrencyOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  ConcurrencyOptions
		limit int    // the initial limit, when valid
		field string // "" when valid
	}{
		{"valid", ConcurrencyOptions{Floor: 2, Initial: 5, Ceiling: 10}, 5, ""},
		{"defaults", ConcurrencyOptions{Ceiling: 10}, 1, ""},
		{"initial defaults to floor", ConcurrencyOptions{Floor: 3, Ceiling: 10}, 3, ""},
		{"all equal", ConcurrencyOptions{Floor: 4, Initial: 4, Ceiling: 4}, 4, ""},
		{"zero ceiling", ConcurrencyOptions{}, 0, "Ceiling"},
		{"negative floor", ConcurrencyOptions{Floor: -1, Ceiling: 10}, 0, "Floor"},
		{"negative initial", ConcurrencyOptions{Initial: -1, Ceiling: 10}, 0, "Initial"},
		{"floor above ceiling", ConcurrencyOptions{Floor: 11, Ceiling: 10}, 0, "Floor"},
		{"initial below floor", ConcurrencyOptions{Floor: 5, Initial: 4, Ceiling: 10}, 0, "Initial"},
		{"initial above ceiling", ConcurrencyOptions{Initial: 11, Ceiling: 10}, 0, "Initial"},
		{"negative queue limit", ConcurrencyOptions{Ceiling: 10, Queue: limiter.QueueOptions{Limit: -1}}, 0, "Queue.Limit"},
		{"bad order", ConcurrencyOptions{Ceiling: 10, Queue: limiter.QueueOptions{Order: 7}}, 0, "Queue.Order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := NewConcurrencyLimiter(tc.opts)
			checkOption(t, err, tc.field)
			if err == nil {
				defer lim.Close()
				if lim.Limit() != tc.limit {
					t.Errorf("Limit() = %d, want %d", lim.Limit(), tc.limit)
				}
			}
		})
	}
}

func checkOption(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var oe *limiter.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want an *limiter.OptionError for %s", err, field)
	}
	if oe.Field != field {
		t.Errorf("err names %q (%v), want %q", oe.Field, err, field)
	}
}
