package pipe

import (
	"fmt"
	"io"
	"math/big"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// accuracyCase is one configuration of the accuracy tests: a token bucket
// of rate bytes per second and burst, read (or written) in pieces of size,
// from a source that returns at most srcMax bytes per Read (0: no cap).
type accuracyCase struct {
	rate   limiter.Rate
	burst  int
	size   int
	srcMax int
}

func (c accuracyCase) String() string {
	return fmt.Sprintf("rate=%v/burst=%d/size=%d/srcmax=%d", c.rate, c.burst, c.size, c.srcMax)
}

var accuracyCases = []accuracyCase{
	{limiter.Per(KiB, time.Second), KiB, 1, 0},
	{limiter.Per(KiB, time.Second), 1, 1, 0}, // the burst is one read long
	{limiter.Per(KiB, time.Second), 4 * KiB, 32 * KiB, 0},
	{limiter.Per(MiB, time.Second), 32 * KiB, 32 * KiB, 0},
	{limiter.Per(10_000_000, time.Second), 64 * KiB, 32 * KiB, 1000}, // short reads
	{limiter.Per(100_000_000, time.Second), 32 * KiB, 32 * KiB, 0},   // spins: half the burst refills in 164 µs
	{limiter.Per(100_000_000, time.Second), MiB, MiB, 0},
	{limiter.Per(100_000_000, time.Second), MiB, 1500, 0},
	{limiter.Per(GiB, time.Second), MiB, MiB, 0},
	// The burst one read long again; 2, as the clock has nanoseconds: a
	// burst of 1 at 1 GiB/s would need grants 0.93 ns apart.
	{limiter.Per(GiB, time.Second), 2, 2, 0},
	{limiter.Per(GiB, time.Second), 2, 1, 0},
	{limiter.Per(GiB, time.Second), 4 * KiB, 1, 0},
	{limiter.Per(3, 7*time.Millisecond), 5, 3, 2}, // an odd rate
}

// runLength is long enough for 200 pieces after the burst, so that the
// piece still waiting at the end is under 1% of the run.
func (c accuracyCase) runLength() time.Duration {
	piece := min(c.size, max(1, c.burst/2))
	if c.srcMax > 0 {
		piece = min(piece, c.srcMax)
	}
	rt := 200 * int64(piece)
	return time.Duration(new(big.Int).Div(new(big.Int).Mul(big.NewInt(rt), big.NewInt(int64(c.rate.Period()))), big.NewInt(c.rate.Events())).Int64()) + 1
}

// checkAccuracy checks the bound over every interval, and that by T the
// stream delivered at least 99% of burst + rate·T.
func checkAccuracy(t *testing.T, c accuracyCase, ds []delivery, T time.Duration) {
	t.Helper()
	if err := checkBucketBound(ds, c.rate, int64(c.burst)); err != nil {
		t.Fatal(err)
	}
	var got int64
	for _, d := range ds {
		if d.at <= T {
			got += d.n
		}
	}
	allowed := new(big.Int).Div(new(big.Int).Mul(big.NewInt(c.rate.Events()), big.NewInt(int64(T))), big.NewInt(int64(c.rate.Period())))
	allowed.Add(allowed, big.NewInt(int64(c.burst)))
	if 100*got < 99*allowed.Int64() {
		t.Fatalf("%d bytes delivered in %v, less than 99%% of the %d allowed", got, T, allowed)
	}
	t.Logf("%d bytes in %v: %.3f%% of burst + rate·t", got, T, 100*float64(got)/float64(allowed.Int64()))
}

// TestReaderAccuracy reads an endless stream through a Reader and checks,
// on synctest's exact clock, the bound over every interval, the 99%
// throughput, and that every byte arrives once, in order.
func TestReaderAccuracy(t *testing.T) {
	for _, c := range accuracyCases {
		t.Run(c.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				T := c.runLength()
				lim := newBucket(t, c.rate, c.burst)
				r := NewReader(&source{size: -1, max: c.srcMax}, lim)
				rec := &recorder{start: time.Now()}
				buf := make([]byte, c.size)
				for time.Since(rec.start) <= T {
					n, err := r.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					if n > c.burst {
						t.Fatalf("Read returned %d bytes, more than the burst %d", n, c.burst)
					}
					rec.check(buf[:n])
				}
				if rec.bad != nil {
					t.Fatal(rec.bad)
				}
				checkAccuracy(t, c, rec.ds, T)
			})
		})
	}
}

// TestWriterAccuracy is TestReaderAccuracy for a Writer.
func TestWriterAccuracy(t *testing.T) {
	for _, c := range accuracyCases {
		t.Run(c.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				T := c.runLength()
				lim := newBucket(t, c.rate, c.burst)
				rec := &recorder{start: time.Now()}
				w := NewWriter(rec, lim)
				src := &source{size: -1}
				size := c.size
				if c.srcMax > 0 {
					size = min(size, c.srcMax) // small writes
				}
				buf := make([]byte, size)
				for time.Since(rec.start) <= T {
					n, _ := src.Read(buf)
					if m, err := w.Write(buf[:n]); err != nil || m != n {
						t.Fatalf("Write = %d, %v; want %d, nil", m, err, n)
					}
				}
				if rec.bad != nil {
					t.Fatal(rec.bad)
				}
				for _, d := range rec.ds {
					if d.n > int64(c.burst) {
						t.Fatalf("the writer was given %d bytes at once, more than the burst %d", d.n, c.burst)
					}
				}
				checkAccuracy(t, c, rec.ds, T)
			})
		})
	}
}

// TestCopyPaths copies a finite stream with io.Copy through each fast path
// (Reader.WriteTo over an io.WriterTo source, over an io.ReaderFrom
// destination, over neither; Writer.ReadFrom likewise) and checks the bound,
// the bytes, and that the copy took exactly as long as the bound requires.
func TestCopyPaths(t *testing.T) {
	const size = 256 * KiB
	rate, burst := limiter.Per(64*KiB, time.Second), 16*KiB
	data := make([]byte, size)
	fillPattern(data, 0)
	type path struct {
		name string
		copy func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error)
	}
	paths := []path{
		{"Reader.WriteTo/src-WriterTo", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(writerOnly{dst}, NewReader(src, lim))
		}},
		{"Reader.WriteTo/dst-ReaderFrom", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(readFromWriter{dst}, NewReader(readerOnly{src}, lim))
		}},
		{"Reader.WriteTo/buffer", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(writerOnly{dst}, NewReader(readerOnly{src}, lim))
		}},
		{"Writer.ReadFrom/dst-ReaderFrom", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(NewWriter(readFromWriter{dst}, lim), readerOnly{src})
		}},
		{"Writer.ReadFrom/src-WriterTo", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(NewWriter(writerOnly{dst}, lim), src)
		}},
		{"Writer.ReadFrom/buffer", func(dst io.Writer, src io.Reader, lim limiter.Limiter) (int64, error) {
			return io.Copy(NewWriter(writerOnly{dst}, lim), readerOnly{src})
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := newBucket(t, rate, burst)
				rec := &recorder{start: time.Now()}
				n, err := p.copy(rec, bytesReader(data), lim)
				if err != nil || n != size {
					t.Fatalf("copy = %d, %v; want %d, nil", n, err, size)
				}
				if rec.bad != nil || rec.off != size {
					t.Fatalf("received %d bytes (%v), want %d", rec.off, rec.bad, size)
				}
				if err := checkBucketBound(rec.ds, rate, int64(burst)); err != nil {
					t.Fatal(err)
				}
				// (size - burst) bytes at 64 KiB/s: 3.75 s, not a nanosecond more.
				if got, want := time.Since(rec.start), 3750*time.Millisecond; got != want {
					t.Errorf("the copy took %v, want %v", got, want)
				}
			})
		})
	}
}

// readFromWriter gives a writer an io.ReaderFrom that reads into it
// through a small buffer (as bytes.Buffer reads into its own).
type readFromWriter struct{ w io.Writer }

func (r readFromWriter) Write(p []byte) (int, error) { return r.w.Write(p) }
func (r readFromWriter) ReadFrom(src io.Reader) (int64, error) {
	return io.CopyBuffer(writerOnly{r.w}, readerOnly{src}, make([]byte, 3000))
}
