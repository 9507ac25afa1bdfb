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

// FuzzRateOptions: NewRateLimiter never panics; it fails with an
// *limiter.OptionError naming one of its fields, and always when the rates
// are out of order; a limiter it returns starts within [Floor, Ceiling].
func FuzzRateOptions(f *testing.F) {
	f.Add(int64(1), int64(1e9), int64(10), int64(1e9), int64(100), int64(1e9), 0, 0, 0)
	f.Add(int64(5), int64(1e9), int64(0), int64(0), int64(5), int64(1e9), 1, 3, 1)
	f.Add(int64(-1), int64(1e9), int64(1), int64(-5), int64(1), int64(0), -1, -1, 2)
	f.Fuzz(func(t *testing.T, fn, fd, in, id, cn, cd int64, burst, queue, order int) {
		opts := RateOptions{
			Floor:   limiter.Per(int(fn), time.Duration(fd)),
			Initial: limiter.Per(int(in), time.Duration(id)),
			Ceiling: limiter.Per(int(cn), time.Duration(cd)),
			Burst:   burst,
			Queue:   limiter.QueueOptions{Limit: queue, Order: limiter.Order(order)},
		}
		lim, err := NewRateLimiter(opts)
		if err != nil {
			var oe *limiter.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("%+v: %v is not an *limiter.OptionError", opts, err)
			}
			switch oe.Field {
			case "Floor", "Initial", "Ceiling", "Burst", "Queue.Limit", "Queue.Order":
			default:
				t.Fatalf("%+v: error names %q", opts, oe.Field)
			}
			return
		}
		defer lim.Close()
		initial := opts.Initial
		if initial.IsZero() {
			initial = opts.Floor
		}
		if compareRates(opts.Floor, initial) > 0 || compareRates(initial, opts.Ceiling) > 0 {
			t.Fatalf("%+v accepted: Floor <= Initial <= Ceiling does not hold", opts)
		}
		if compareRates(lim.Rate(), initial) != 0 {
			t.Fatalf("%+v: starts at %v", opts, lim.Rate())
		}
		lease := lim.TryAcquire(1)
		lease.Report(limiter.Throttled, 0)
		if r := lim.Rate(); compareRates(r, opts.Floor) < 0 || compareRates(r, opts.Ceiling) > 0 {
			t.Fatalf("%+v: rate %v outside [Floor, Ceiling]", opts, r)
		}
	})
}

// FuzzConcurrencyOptions: NewConcurrencyLimiter never panics, names the
// field it rejects, and accepts exactly the options with 0 <= Floor <=
// Initial <= Ceiling (zeros taking their defaults) and a valid queue.
func FuzzConcurrencyOptions(f *testing.F) {
	f.Add(0, 0, 10, 0, 0)
	f.Add(5, 3, 10, -1, 0)
	f.Add(1, 1, 1, 0, 1)
	f.Fuzz(func(t *testing.T, floor, initial, ceil, queue, order int) {
		opts := ConcurrencyOptions{Floor: floor, Initial: initial, Ceiling: ceil, Queue: limiter.QueueOptions{Limit: queue, Order: limiter.Order(order)}}
		lim, err := NewConcurrencyLimiter(opts)
		fl, in := floor, initial
		if fl == 0 {
			fl = 1
		}
		if in == 0 {
			in = fl
		}
		valid := floor >= 0 && initial >= 0 && ceil > 0 && fl <= ceil && in >= fl && in <= ceil && queue >= 0 && (order == 0 || order == 1)
		if valid != (err == nil) {
			t.Fatalf("%+v: err %v, want valid %v", opts, err, valid)
		}
		if err != nil {
			var oe *limiter.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("%+v: %v is not an *limiter.OptionError", opts, err)
			}
			return
		}
		defer lim.Close()
		if lim.Limit() != in {
			t.Fatalf("%+v: limit %d, want %d", opts, lim.Limit(), in)
		}
	})
}

// FuzzKeyedRateOptions: NewKeyedRateLimiter never panics; it accepts
// exactly the options whose RateOptions NewRateLimiter accepts and whose
// Forget is not negative, and refuses the others with an
// *limiter.OptionError naming the field NewRateLimiter names (or Forget).
// A Keyed it returns grants a fresh key at once, takes a report on the
// lease, and closes.
func FuzzKeyedRateOptions(f *testing.F) {
	f.Add(int64(1), int64(1e9), int64(10), int64(1e9), int64(100), int64(1e9), 0, 0, 0, int64(0))
	f.Add(int64(5), int64(1e9), int64(0), int64(0), int64(5), int64(1e9), 1, 3, 1, int64(time.Minute))
	f.Add(int64(1), int64(1e9), int64(0), int64(0), int64(1), int64(1e9), 0, 0, 0, int64(1))
	f.Add(int64(1), int64(1e9), int64(0), int64(0), int64(100), int64(1e9), 0, 0, 0, int64(-1))
	f.Add(int64(-1), int64(1e9), int64(1), int64(-5), int64(1), int64(0), -1, -1, 2, int64(0))
	f.Add(int64(101), int64(1e9), int64(0), int64(0), int64(100), int64(1e9), 0, 0, 0, int64(0))
	f.Add(int64(10), int64(1e9), int64(9), int64(1e9), int64(100), int64(1e9), 0, 0, 0, int64(0))
	f.Add(int64(1), int64(1e9), int64(0), int64(0), int64(100), int64(1e9), 1<<62, 0, 0, int64(0))
	f.Add(int64(1), int64(1e9), int64(0), int64(0), int64(100), int64(1e9), 0, 0, 7, int64(-1))
	f.Fuzz(func(t *testing.T, fn, fd, in, id, cn, cd int64, burst, queue, order int, forget int64) {
		opts := KeyedRateOptions{
			RateOptions: RateOptions{
				Floor:   limiter.Per(int(fn), time.Duration(fd)),
				Initial: limiter.Per(int(in), time.Duration(id)),
				Ceiling: limiter.Per(int(cn), time.Duration(cd)),
				Burst:   burst,
				Queue:   limiter.QueueOptions{Limit: queue, Order: limiter.Order(order)},
			},
			Forget: time.Duration(forget),
		}
		k, err := NewKeyedRateLimiter[string](opts)
		single, serr := NewRateLimiter(opts.RateOptions)
		if single != nil {
			defer single.Close()
		}
		if err != nil {
			if k != nil {
				t.Fatalf("%+v: a Keyed and the error %v", opts, err)
			}
			var oe, want *limiter.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("%+v: %v is not an *limiter.OptionError", opts, err)
			}
			switch {
			case serr == nil && (forget >= 0 || oe.Field != "Forget"):
				t.Fatalf("%+v: refused (%v), but NewRateLimiter accepts its RateOptions and Forget is %v", opts, err, opts.Forget)
			case serr != nil && (!errors.As(serr, &want) || want.Field != oe.Field):
				t.Fatalf("%+v: refused (%v), NewRateLimiter: %v", opts, err, serr)
			}
			return
		}
		defer k.Close()
		initial := opts.Initial
		if initial.IsZero() {
			initial = opts.Floor
		}
		switch {
		case forget < 0:
			t.Fatalf("%+v accepted: Forget is negative", opts)
		case serr != nil:
			t.Fatalf("%+v accepted, but NewRateLimiter refuses its RateOptions: %v", opts, serr)
		case compareRates(opts.Floor, initial) > 0 || compareRates(initial, opts.Ceiling) > 0:
			t.Fatalf("%+v accepted: Floor <= Initial <= Ceiling does not hold", opts)
		}
		a := k.TryAcquire("a", 1)
		b := k.For("b").TryAcquire(1)
		if !a.Granted() || !b.Granted() {
			t.Fatalf("%+v: fresh keys: TryAcquire(a, 1) err %v, For(b).TryAcquire(1) err %v", opts, a.Err(), b.Err())
		}
		a.Report(limiter.Throttled, 0)
		b.Report(limiter.Succeeded, time.Millisecond)
		if err := k.Close(); err != nil {
			t.Fatalf("%+v: Close: %v", opts, err)
		}
	})
}
