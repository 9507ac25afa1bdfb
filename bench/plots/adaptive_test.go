package plots

import (
	"testing"
	"time"

	"github.com/rategate/rategate/bench/adaptive"
)

// adaptiveFigure: the rate found by rategate's adaptive rate limiter and the
// rate let through by its deterministic peers against a service whose
// capacity steps 100/s, 40/s, 200/s; then the calls in flight under the
// adaptive concurrency limiters against 100, 40, 200 workers. (failsafe-go's
// AdaptiveThrottler draws at random, so it is in the tables of
// bench/results/adaptive.md but not here.)
func adaptiveFigure(t *testing.T) Figure {
	end := adaptive.End(adaptive.Stages)
	capacity := func() []Point {
		var pts []Point
		var at time.Duration
		for _, s := range adaptive.Stages {
			pts = append(pts, Point{at.Seconds(), float64(s.Capacity)}, Point{(at + s.Length).Seconds(), float64(s.Capacity)})
			at += s.Length
		}
		return pts
	}
	byName := func(es []adaptive.Entry, name string) adaptive.Entry {
		for _, e := range es {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("no contender %q", name)
		return adaptive.Entry{}
	}
	rate := adaptive.RateEntries()
	rg := adaptive.RunRate(byName(rate, "rategate adaptive.RateLimiter").New(), adaptive.Stages)
	aimd := adaptive.RunRate(byName(rate, "go-concurrency-limits AIMD").New(), adaptive.Stages)
	g2 := adaptive.RunRate(byName(rate, "go-concurrency-limits Gradient2").New(), adaptive.Stages)

	conc := adaptive.ConcurrencyEntries()
	inFlight := func(name string) []Point {
		return every100ms(adaptive.RunConcurrency(byName(conc, name).New(), adaptive.Stages).InFlight())
	}
	return Figure{
		Title:  "Adaptive limits: capacity 100, 40, 200 (20 s each), found from outcomes",
		XLabel: "time (s)",
		XMax:   end.Seconds(),
		XStep:  5,
		Panels: []Panel{
			{
				Title:  "Rate: a service answering 429 above its capacity (calls offered at 400/s)",
				YLabel: "calls/s",
				YMax:   450,
				YStep:  50,
				Lines: []Line{
					{Label: "rategate: rate", Color: "#1f77b4", Width: 2, Points: every100ms(rg.Limits)},
					{Label: "AIMD: sent", Color: "#ff7f0e", Points: every100ms(aimd.SentRate(500 * time.Millisecond))},
					{Label: "Gradient2, failsafe limiter: sent", Color: "#2ca02c", Dashed: true, Points: every100ms(g2.SentRate(500 * time.Millisecond))},
					{Label: "capacity", Color: gray, Dashed: true, Points: capacity()},
				},
			},
			{
				Title:  "Concurrency: workers past which calls queue (calls offered at 1.5× what they serve)",
				YLabel: "calls in flight",
				YMax:   250,
				YStep:  50,
				Lines: []Line{
					{Label: "rategate", Color: "#1f77b4", Width: 2, Points: inFlight("rategate adaptive.ConcurrencyLimiter")},
					{Label: "failsafe AdaptiveLimiter", Color: red, Points: inFlight("failsafe-go AdaptiveLimiter")},
					{Label: "Gradient2", Color: "#2ca02c", Points: inFlight("go-concurrency-limits Gradient2")},
					{Label: "AIMD", Color: "#ff7f0e", Points: inFlight("go-concurrency-limits AIMD")},
					{Label: "workers", Color: gray, Dashed: true, Points: capacity()},
				},
			},
		},
	}
}

// every100ms turns a series sampled every adaptive.Sample into points
// every 100 ms (the mean of each ten samples).
func every100ms(series []float64) []Point {
	const per = int(100 * time.Millisecond / adaptive.Sample)
	var pts []Point
	for i := 0; i+per <= len(series); i += per {
		var sum float64
		for _, v := range series[i : i+per] {
			sum += v
		}
		pts = append(pts, Point{X: (time.Duration(i+per) * adaptive.Sample).Seconds(), Y: sum / float64(per)})
	}
	return pts
}
