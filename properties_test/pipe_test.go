package properties_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
	"pgregory.net/rapid"
)

// pipeCase is one drawn byte stream: a token bucket of rate bytes per
// second and burst, shaping a stream of the sum of ops bytes, read (or
// written) in pieces of the sizes in ops, through one of the ways a stream
// can be used.
type pipeCase struct {
	rate   int64 // bytes per second
	burst  int
	mode   string
	ops    []int // read or write sizes
	srcMax int   // the source returns at most this much per Read; 0: no cap
}

func (c pipeCase) String() string {
	return fmt.Sprintf("rate %d B/s, burst %d, %s, srcMax %d, ops %v", c.rate, c.burst, c.mode, c.srcMax, c.ops)
}

func (c pipeCase) total() int64 {
	var t int64
	for _, n := range c.ops {
		t += int64(n)
	}
	return t
}

var pipeModes = []string{"Read", "Write", "Reader.WriteTo", "Writer.ReadFrom", "Reader.WriteTo-buffer", "Writer.ReadFrom-buffer"}

func drawPipeCase(t *rapid.T) pipeCase {
	var c pipeCase
	// From 1 KiB/s to 1 GiB/s, log-uniform.
	exp := rapid.IntRange(10, 29).Draw(t, "rateExp")
	c.rate = int64(1)<<exp + rapid.Int64Range(0, int64(1)<<exp).Draw(t, "rateJitter")
	// A burst of at least one read, and of at least 2 ns of rate (the clock
	// counts nanoseconds: a smaller burst cannot be paced).
	minBurst := int(max(1, 2*c.rate/1e9+1))
	c.burst = rapid.IntRange(minBurst, 1<<20).Draw(t, "burst")
	c.mode = rapid.SampledFrom(pipeModes).Draw(t, "mode")
	maxOp := rapid.IntRange(1, 1<<20).Draw(t, "maxOp")
	// Keep runs to a few hundred waits: at most ~200 bursts or half-bursts.
	budget := int64(c.burst) * 100
	budget = max(budget, 4096)
	budget = min(budget, 8<<20)
	n := rapid.IntRange(1, 40).Draw(t, "ops")
	var total int64
	for i := range n {
		op := rapid.IntRange(1, maxOp).Draw(t, fmt.Sprintf("op%d", i))
		if total+int64(op) > budget {
			break
		}
		c.ops = append(c.ops, op)
		total += int64(op)
	}
	if len(c.ops) == 0 {
		c.ops = []int{int(min(budget, int64(maxOp)))}
	}
	if rapid.Bool().Draw(t, "shortReads") {
		c.srcMax = rapid.IntRange(1, 1<<16).Draw(t, "srcMax")
	}
	return c
}

// pipeRun is what a run recorded: the deliveries and the bytes, in order.
type pipeRun struct {
	grants  []grant
	data    []byte
	elapsed time.Duration
	pieces  int
	err     error
}

// pipeSrc returns the stream's bytes, at most max per Read.
type pipeSrc struct {
	data []byte
	max  int
}

func (s *pipeSrc) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if s.max > 0 {
		n = min(n, s.max)
	}
	n = copy(p[:n], s.data)
	s.data = s.data[n:]
	return n, nil
}

// pipeSrcWT adds WriteTo, in writes of at most max.
type pipeSrcWT struct{ *pipeSrc }

func (s pipeSrcWT) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(s.data) > 0 {
		n := len(s.data)
		if s.max > 0 {
			n = min(n, s.max)
		}
		m, err := w.Write(s.data[:n])
		total += int64(m)
		s.data = s.data[m:]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pipeRec records when it receives what.
type pipeRec struct {
	start time.Time
	run   *pipeRun
}

func (r pipeRec) Write(p []byte) (int, error) {
	r.note(p)
	return len(p), nil
}

func (r pipeRec) note(p []byte) {
	if len(p) > 0 {
		r.run.grants = append(r.run.grants, grant{at: time.Since(r.start), n: int64(len(p)), who: "stream"})
		r.run.data = append(r.run.data, p...)
		r.run.pieces++
	}
}

// pipeRecRF adds ReadFrom, reading into a small buffer of its own.
type pipeRecRF struct{ pipeRec }

func (r pipeRecRF) ReadFrom(src io.Reader) (int64, error) {
	buf := make([]byte, 3001)
	var total int64
	for {
		n, err := src.Read(buf)
		r.note(buf[:n])
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// writerOnly and readerOnly hide fast paths.
type pipeWriterOnly struct{ io.Writer }
type pipeReaderOnly struct{ io.Reader }

func runPipeCase(t *testing.T, c pipeCase, data []byte) (*pipeRun, string) {
	run := &pipeRun{}
	failure := runBubble(t, c.String, func(p *panics) {
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(int(c.rate), time.Second), Burst: c.burst})
		if err != nil {
			run.err = err
			return
		}
		start := time.Now()
		rec := pipeRec{start: start, run: run}
		src := &pipeSrc{data: data, max: c.srcMax}
		switch c.mode {
		case "Read":
			r := pipe.NewReader(src, lim)
			for _, op := range c.ops {
				buf := make([]byte, op)
				for got := 0; got < op; {
					n, err := r.Read(buf[got:])
					rec.note(buf[got : got+n])
					got += n
					if err != nil {
						run.err = err
						return
					}
				}
			}
		case "Write":
			w := pipe.NewWriter(rec, lim)
			for _, op := range c.ops {
				if _, err := w.Write(src.data[:op]); err != nil {
					run.err = err
					return
				}
				src.data = src.data[op:]
			}
		case "Reader.WriteTo":
			_, run.err = io.Copy(pipeWriterOnly{rec}, pipe.NewReader(pipeSrcWT{src}, lim))
		case "Reader.WriteTo-buffer":
			_, run.err = io.Copy(pipeRecRF{rec}, pipe.NewReader(src, lim))
		case "Writer.ReadFrom":
			_, run.err = io.Copy(pipe.NewWriter(pipeRecRF{rec}, lim), pipeReaderOnly{src})
		case "Writer.ReadFrom-buffer":
			_, run.err = io.Copy(pipe.NewWriter(pipeWriterOnly{rec}, lim), pipeSrcWT{src})
		}
		run.elapsed = time.Since(start)
	})
	return run, failure
}

// TestPipeBoundAndOrder draws streams (rate, burst, read or write sizes,
// short reads, the path through the package) and checks on synctest's
// exact clock that the bytes delivered in every interval of length t are at
// most burst + rate·t, that every byte is delivered exactly once and in
// order, and that the stream runs at the bound: it ends no later than the
// bound allows, give or take a nanosecond per piece of rounding.
func TestPipeBoundAndOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := drawPipeCase(rt)
		total := c.total()
		data := make([]byte, total)
		for i := range data {
			data[i] = byte(i*7 + i/251)
		}
		run, failure := runPipeCase(t, c, data)
		if failure != "" {
			rt.Fatalf("%v: %s", c, failure)
		}
		if run.err != nil {
			rt.Fatalf("%v: %v", c, run.err)
		}
		if !bytes.Equal(run.data, data) {
			i := 0
			for i < len(run.data) && i < len(data) && run.data[i] == data[i] {
				i++
			}
			rt.Fatalf("%v: %d bytes delivered, want %d; first difference at byte %d", c, len(run.data), len(data), i)
		}
		g := gcd(c.rate, int64(time.Second))
		n, d := c.rate/g, int64(time.Second)/g
		if err := checkTokenBucket(run.grants, n, d, int64(c.burst)); err != nil {
			rt.Fatalf("%v: %v", c, err)
		}
		// Liveness: the last byte comes when the bound first allows it.
		want := time.Duration(0)
		if total > int64(c.burst) {
			want = time.Duration(mulDivCeil(total-int64(c.burst), d, n))
		}
		if run.elapsed > want+time.Duration(run.pieces) {
			rt.Fatalf("%v: %d bytes took %v, the bound allows them in %v", c, total, run.elapsed, want)
		}
	})
}
