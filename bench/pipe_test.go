package bench

// Byte-stream shaping: rategate's pipe.Reader and pipe.Writer against a
// plain copy and juju/ratelimit's Reader.
//
// BenchmarkPipeUnlimited is the overhead: the same Read (or Write) of one
// buffer, plain and through a pipe whose limiter never refuses; MB/s should
// match within 2%, and allocs/op must be 0.
//
// BenchmarkPipeRate reads at 100 MB/s on the real clock, in 32 KiB reads,
// with a bucket of 32 KiB (half of which refills in 164 µs, well under the
// ~1 ms lateness of Linux timers) and of 1 MiB. Its metrics: %limit is the
// throughput achieved after the initial burst, as a percentage of the
// limit (the goal is >= 99); cpu% is the process's CPU time over wall time
// (100 is one core busy).
//
// TestPipeThreads counts the OS threads that 500 shaped streams waiting at
// once make the process start.

import (
	"context"
	"flag"
	"io"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/ratelimit"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

// pipeSource is an endless reader whose Read is one copy from a 1 MiB
// block: a plain copy at memory speed.
type pipeSource struct {
	block []byte
	off   int
}

func newPipeSource() *pipeSource {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i)
	}
	return &pipeSource{block: b}
}

func (s *pipeSource) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], s.block[s.off:])
		n += m
		s.off = (s.off + m) % len(s.block)
	}
	return n, nil
}

// pipeSink is a writer whose Write is one copy into a buffer.
type pipeSink struct{ buf []byte }

func (s *pipeSink) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += len(s.buf) {
		copy(s.buf, p[i:])
	}
	return len(p), nil
}

// pipeUnlimited never refuses: 2^40 bytes a second (2^30 a millisecond, to
// fit a 32-bit int), a burst of 2^30.
func pipeUnlimited() *limiter.TokenBucket {
	return must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1<<30, time.Millisecond), Burst: 1 << 30}))
}

func BenchmarkPipeUnlimited(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"32KiB", 32 << 10}, {"1MiB", 1 << 20}} {
		b.Run("read="+size.name+"/plain", func(b *testing.B) {
			src, buf := newPipeSource(), make([]byte, size.n)
			b.SetBytes(int64(size.n))
			for b.Loop() {
				src.Read(buf)
			}
		})
		b.Run("read="+size.name+"/rategate", func(b *testing.B) {
			r, buf := pipe.NewReader(newPipeSource(), pipeUnlimited()), make([]byte, size.n)
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if n, err := r.Read(buf); n != size.n || err != nil {
					b.Fatal(n, err)
				}
			}
		})
		b.Run("write="+size.name+"/plain", func(b *testing.B) {
			dst, buf := &pipeSink{buf: make([]byte, size.n)}, make([]byte, size.n)
			b.SetBytes(int64(size.n))
			for b.Loop() {
				dst.Write(buf)
			}
		})
		b.Run("write="+size.name+"/rategate", func(b *testing.B) {
			w, buf := pipe.NewWriter(&pipeSink{buf: make([]byte, size.n)}, pipeUnlimited()), make([]byte, size.n)
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if n, err := w.Write(buf); n != size.n || err != nil {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// pipeNoCopy is a reader that returns len(p) without touching p: reading
// through a pipe from it measures the pipe's own cost per Read.
type pipeNoCopy struct{}

func (pipeNoCopy) Read(p []byte) (int, error) { return len(p), nil }

// BenchmarkPipeOverhead is the pipe's own cost per Read and per Write, with
// an underlying reader and writer that do nothing: what a shaped Read adds
// to the copy it wraps.
func BenchmarkPipeOverhead(b *testing.B) {
	buf := make([]byte, 32<<10)
	b.Run("read/plain", func(b *testing.B) {
		var r io.Reader = pipeNoCopy{}
		for b.Loop() {
			r.Read(buf)
		}
	})
	b.Run("read/rategate", func(b *testing.B) {
		r := pipe.NewReader(pipeNoCopy{}, pipeUnlimited())
		for b.Loop() {
			r.Read(buf)
		}
	})
	b.Run("write/plain", func(b *testing.B) {
		w := io.Discard
		for b.Loop() {
			w.Write(buf)
		}
	})
	b.Run("write/rategate", func(b *testing.B) {
		w := pipe.NewWriter(io.Discard, pipeUnlimited())
		for b.Loop() {
			w.Write(buf)
		}
	})
}

const pipeLimit = 100_000_000 // bytes a second

func BenchmarkPipeRate(b *testing.B) {
	for _, burst := range []struct {
		name string
		n    int
	}{{"32KiB", 32 << 10}, {"1MiB", 1 << 20}} {
		b.Run("burst="+burst.name+"/juju", func(b *testing.B) {
			bucket := ratelimit.NewBucketWithRate(pipeLimit, int64(burst.n))
			pipeMeasure(b, ratelimit.Reader(newPipeSource(), bucket), func() { bucket.TakeAvailable(int64(burst.n)) })
		})
		b.Run("burst="+burst.name+"/rategate", func(b *testing.B) {
			lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(pipeLimit, time.Second), Burst: burst.n}))
			pipeMeasure(b, pipe.NewReader(newPipeSource(), lim), func() { lim.TryAcquire(burst.n) })
		})
	}
}

// pipeMeasure empties the limiter's bucket with drain, then reads r in
// 32 KiB io.ReadFull calls, one per op, and reports the throughput as a
// percentage of pipeLimit, and the CPU used.
func pipeMeasure(b *testing.B, r io.Reader, drain func()) {
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(buf)))
	var total int64
	cpu0 := pipeCPU()
	drain()
	start := time.Now()
	for b.Loop() {
		n, err := io.ReadFull(r, buf)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	wall := time.Since(start)
	cpu := pipeCPU() - cpu0
	b.ReportMetric(100*float64(total)/wall.Seconds()/pipeLimit, "%limit")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu%")
}

// TestPipeRealClock measures, on the real clock, the throughput of a pipe
// Reader (or Writer) across rates, bursts and read sizes, as a percentage
// of the limit, with the CPU it used. It takes about 25 s, so it runs only
// when asked:
//
//	go test -run TestPipeRealClock -v -pipe.realclock
func TestPipeRealClock(t *testing.T) {
	if !*pipeRealClock {
		t.Skip("pass -pipe.realclock to run")
	}
	cases := []struct {
		name      string
		rate      int
		burst, rd int
		writer    bool
	}{
		{"1KiB/s burst=1KiB read=1B", 1 << 10, 1 << 10, 1, false},
		{"1KiB/s burst=1B read=1B", 1 << 10, 1, 1, false},
		{"1MiB/s burst=32KiB read=32KiB", 1 << 20, 32 << 10, 32 << 10, false},
		{"100MB/s burst=32KiB read=32KiB", pipeLimit, 32 << 10, 32 << 10, false},
		{"100MB/s burst=32KiB write=32KiB", pipeLimit, 32 << 10, 32 << 10, true},
		{"100MB/s burst=1MiB read=32KiB", pipeLimit, 1 << 20, 32 << 10, false},
		{"1GiB/s burst=1MiB read=1MiB", 1 << 30, 1 << 20, 1 << 20, false},
		{"1GiB/s burst=64KiB read=64KiB", 1 << 30, 64 << 10, 64 << 10, false},
	}
	t.Log("| configuration | % of limit | cpu% |")
	t.Log("| --- | --- | --- |")
	for _, c := range cases {
		lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(c.rate, time.Second), Burst: c.burst}))
		buf := make([]byte, c.rd)
		r := pipe.NewReader(pipeNoCopy{}, lim)
		w := pipe.NewWriter(io.Discard, lim)
		var total int64
		cpu0 := pipeCPU()
		lim.TryAcquire(c.burst)
		start := time.Now()
		for time.Since(start) < 3*time.Second {
			var n int
			if c.writer {
				n, _ = w.Write(buf)
			} else {
				n, _ = r.Read(buf)
			}
			total += int64(n)
		}
		wall := time.Since(start)
		t.Logf("| %s | %.2f | %.0f |", c.name, 100*float64(total)/wall.Seconds()/float64(c.rate), 100*(pipeCPU()-cpu0).Seconds()/wall.Seconds())
	}
}

var pipeRealClock = flag.Bool("pipe.realclock", false, "run TestPipeRealClock")

// TestPipeThreads: 500 streams, each shaped by its own pacer at 1,000 bytes
// a second (so each waits about a millisecond per byte, in the precise end
// of its wait most of the time), read for half a second on the real clock.
// Waiting must not hold an OS thread per stream: the process may start a
// handful of threads, not one per waiting stream.
func TestPipeThreads(t *testing.T) {
	const streams = 500
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var bytes atomic.Int64
	for range streams {
		lim := must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(1000, time.Second)}))
		r := pipe.NewReader(pipeNoCopy{}, lim, pipe.WithContext(ctx))
		wg.Go(func() {
			buf := make([]byte, 1)
			for {
				n, err := r.Read(buf)
				bytes.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	started := threads.Count() - before
	t.Logf("%d streams read %d bytes in 0.5 s and started %d OS threads", streams, bytes.Load(), started)
	if started > 8 {
		t.Errorf("%d waiting streams started %d OS threads, want a handful", streams, started)
	}
}
