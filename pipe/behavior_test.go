package pipe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// eofReader returns its data and io.EOF in the same call.
type eofReader struct{ data []byte }

func (r *eofReader) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, io.EOF
	}
	return n, nil
}

type closeSpy struct {
	io.Reader
	io.Writer
	closed int
	err    error
}

func (c *closeSpy) Close() error { c.closed++; return c.err }

func TestReadPassesEOFThrough(t *testing.T) {
	lim := newBucket(t, limiter.Per(MiB, time.Second), MiB)
	r := NewReader(&eofReader{data: []byte("hello")}, lim)
	buf := make([]byte, 10)
	n, err := r.Read(buf)
	if n != 5 || err != io.EOF || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %d, %v, %q; want 5, io.EOF, \"hello\"", n, err, buf[:n])
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestShortWriteIsReported(t *testing.T) {
	lim := newBucket(t, limiter.Per(MiB, time.Second), MiB)
	rec := &recorder{max: 3}
	w := NewWriter(rec, lim)
	data := make([]byte, 10)
	fillPattern(data, 0)
	n, err := w.Write(data)
	if n != 3 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("Write = %d, %v; want 3, io.ErrShortWrite", n, err)
	}
}

func TestUnderlyingErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	lim := newBucket(t, limiter.Per(MiB, time.Second), MiB)
	w := NewWriter(failWriter{boom}, lim)
	if n, err := w.Write([]byte("abc")); n != 0 || err != boom {
		t.Fatalf("Write = %d, %v; want 0, boom", n, err)
	}
	r := NewReader(failWriter{boom}, lim)
	if n, err := r.Read(make([]byte, 3)); n != 0 || err != boom {
		t.Fatalf("Read = %d, %v; want 0, boom", n, err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
func (f failWriter) Read([]byte) (int, error)  { return 0, f.err }

func TestClosePropagates(t *testing.T) {
	lim := newBucket(t, limiter.Per(MiB, time.Second), MiB)
	boom := errors.New("close failed")
	src := &closeSpy{Reader: strings.NewReader("abc"), err: boom}
	r := NewReader(src, lim)
	if err := r.Close(); err != boom || src.closed != 1 {
		t.Fatalf("Reader.Close = %v (closed %d times); want the source's error, once", err, src.closed)
	}
	if _, err := r.Read(make([]byte, 3)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
	dst := &closeSpy{Writer: io.Discard}
	w := NewWriter(dst, lim)
	if err := w.Close(); err != nil || dst.closed != 1 {
		t.Fatalf("Writer.Close = %v (closed %d times)", err, dst.closed)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	// Not closers: Close is fine and still stops the stream.
	if err := NewReader(strings.NewReader(""), lim).Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseEndsAWait: a Read and a Write waiting for permits return
// ErrClosed the instant the stream is closed.
func TestCloseEndsAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newBucket(t, limiter.Per(1, time.Hour), 1)
		lim.TryAcquire(1)
		r := NewReader(&source{size: -1}, lim)
		w := NewWriter(io.Discard, lim)
		start := time.Now()
		time.AfterFunc(time.Second, func() { r.Close(); w.Close() })
		errs := make(chan error, 2)
		go func() { _, err := r.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := w.Write(make([]byte, 1)); errs <- err }()
		for range 2 {
			if err := <-errs; !errors.Is(err, ErrClosed) {
				t.Errorf("wait ended with %v, want ErrClosed", err)
			}
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("the waits ended after %v, want 1s", d)
		}
	})
}

// TestContextEndsAWait: WithContext bounds the wait for permits.
func TestContextEndsAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newBucket(t, limiter.Per(1, time.Hour), 1)
		lim.TryAcquire(1)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		r := NewReader(&source{size: -1}, lim, WithContext(ctx))
		start := time.Now()
		n, err := r.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read = %d, %v; want 0, context.DeadlineExceeded", n, err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("Read failed after %v, want 3s", d)
		}
	})
}

// TestRetryKeepsBytes: a Read whose wait fails keeps what it read and
// delivers it first when read again (here after the limiter's queue, which
// refused, has room again).
func TestRetryKeepsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10, Queue: limiter.QueueOptions{Limit: 5}})
		if err != nil {
			t.Fatal(err)
		}
		// Another waiter fills the queue, so the Read's Acquire is refused.
		lim.TryAcquire(10)
		go lim.Acquire(t.Context(), 5)
		synctest.Wait()
		src := &source{size: 30}
		r := NewReader(src, lim)
		buf := make([]byte, 4)
		if n, err := r.Read(buf); n != 0 || !errors.Is(err, limiter.ErrQueueFull) {
			t.Fatalf("Read = %d, %v; want 0, ErrQueueFull", n, err)
		}
		time.Sleep(time.Second)
		rec := &recorder{start: time.Now()}
		got, err := io.Copy(rec, r)
		if err != nil || got != 30 || rec.bad != nil || rec.off != 30 {
			t.Fatalf("copied %d bytes (%v, %v), want the 30 in order", got, err, rec.bad)
		}
	})
}

// TestSetRateWithinOneChunk changes a token bucket's rate while a Reader
// reads at it, down and up, and checks that the new rate governs from the
// piece after the one waiting at the change.
func TestSetRateWithinOneChunk(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to int
	}{{"down", 64 * KiB, 16 * KiB}, {"up", 16 * KiB, 64 * KiB}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const burst = 16 * KiB
				lim := newBucket(t, limiter.Per(tc.from, time.Second), burst)
				r := NewReader(&source{size: -1}, lim)
				rec := &recorder{start: time.Now()}
				change := 2 * time.Second
				time.AfterFunc(change, func() { lim.SetRate(limiter.Per(tc.to, time.Second)) })
				end := 5 * time.Second
				buf := make([]byte, 32*KiB)
				maxPiece := 0
				for time.Since(rec.start) <= end {
					n, err := r.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					maxPiece = max(maxPiece, n)
					rec.check(buf[:n])
				}
				// One piece at the old rate may straddle the change.
				oneChunk := time.Duration(int64(maxPiece) * int64(time.Second) / int64(tc.from))
				var after []delivery
				var got int64
				for _, d := range rec.ds {
					if d.at > change+oneChunk {
						after = append(after, d)
						if d.at <= end {
							got += d.n
						}
					}
				}
				if err := checkBucketBound(after, limiter.Per(tc.to, time.Second), burst); err != nil {
					t.Fatalf("after the change: %v", err)
				}
				span := end - change - oneChunk
				want := int64(tc.to) * int64(span) / int64(time.Second)
				if 100*got < 99*want {
					t.Fatalf("%d bytes in the %v after the change, less than 99%% of %d at the new rate", got, span, want)
				}
			})
		})
	}
}

// TestChainLearnsBurst: a limiter.Chain does not tell its burst; the
// Reader learns it from ErrExceedsLimit and never delivers more than a
// burst at once, nor loses or repeats a byte.
func TestChainLearnsBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newBucket(t, limiter.Per(8*KiB, time.Second), 4*KiB)
		b := newBucket(t, limiter.Per(4*KiB, time.Second), KiB)
		lim := limiter.Chain(a, b)
		r := NewReader(&source{size: 64 * KiB}, lim)
		rec := &recorder{start: time.Now()}
		buf := make([]byte, 32*KiB)
		for {
			n, err := r.Read(buf)
			if n > KiB {
				t.Fatalf("Read returned %d bytes, more than the chain's burst %d", n, KiB)
			}
			rec.check(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if rec.bad != nil || rec.off != 64*KiB {
			t.Fatalf("got %d bytes (%v), want 64 KiB in order", rec.off, rec.bad)
		}
		if err := checkBucketBound(rec.ds, limiter.Per(4*KiB, time.Second), KiB); err != nil {
			t.Fatal(err)
		}
		if d, want := time.Since(rec.start), 15750*time.Millisecond; d != want {
			t.Errorf("took %v, want %v (63 KiB at 4 KiB/s)", d, want)
		}
	})
}

func TestBadArguments(t *testing.T) {
	lim := newBucket(t, limiter.Per(1, time.Second), 1)
	if _, err := NewWriter(nil, lim).Write([]byte("x")); !errors.Is(err, ErrNilStream) {
		t.Errorf("nil writer: %v", err)
	}
	if _, err := NewReader(nil, lim).WriteTo(io.Discard); !errors.Is(err, ErrNilStream) {
		t.Errorf("nil reader: %v", err)
	}
	if _, err := NewReader(nil, nil).Read(make([]byte, 1)); !errors.Is(err, ErrNilStream) {
		t.Errorf("nil reader, nil limiter: %v", err)
	}
	if !errors.Is(ErrClosed, limiter.ErrClosed) {
		t.Error("ErrClosed does not wrap limiter.ErrClosed")
	}
	func() {
		defer func() {
			if r := recover(); r != "pipe: nil Context" {
				t.Errorf("WithContext(nil) panicked with %v, want \"pipe: nil Context\"", r)
			}
		}()
		WithContext(nil) //lint:ignore SA1012 the nil Context is the point
	}()
}

// TestNilLimiterMeansNoLimit: a nil limiter lets every byte through at
// once, on every path (Read, Write, WriteTo, ReadFrom), counted, with EOF
// as the plain stream has it, and Close still ends the stream.
func TestNilLimiterMeansNoLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 3*MiB + 7
		var c countBytes
		start := time.Now()
		for _, copyPath := range []func() (int64, error){
			func() (int64, error) {
				return io.Copy(io.Discard, NewReader(&source{size: size}, nil, WithCounter(&c)))
			},
			func() (int64, error) {
				return io.Copy(NewWriter(io.Discard, nil, WithCounter(&c)), &source{size: size})
			},
			func() (int64, error) {
				return io.Copy(writerOnlyT{io.Discard}, readerOnlyT{NewReader(&source{size: size}, nil, WithCounter(&c))})
			},
		} {
			if n, err := copyPath(); n != size || err != nil {
				t.Fatalf("copied %d, %v; want %d, nil", n, err, size)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("unlimited copies took %v", d)
		}
		if c.n != 3*size {
			t.Errorf("counted %d bytes, want %d", c.n, 3*size)
		}
		r := NewReader(strings.NewReader("ab"), nil)
		buf := make([]byte, 8)
		if n, err := r.Read(buf); n != 2 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
		if n, err := r.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("Read at the end = %d, %v; want 0, io.EOF", n, err)
		}
		r.Close()
		if _, err := r.Read(buf); !errors.Is(err, ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	})
}

type countBytes struct{ n int64 }

func (c *countBytes) Add(n int64) { c.n += n }

type (
	readerOnlyT struct{ io.Reader }
	writerOnlyT struct{ io.Writer }
)

// TestZeroAllocs: Read and Write allocate nothing, with permits at hand
// and while waiting for them.
func TestZeroAllocs(t *testing.T) {
	buf := make([]byte, 32*KiB)
	lim := newBucket(t, limiter.Per(1<<30, time.Millisecond), 1<<30) // 2^40 per second; fits a 32-bit int
	r := NewReader(&source{size: -1}, lim)
	w := NewWriter(io.Discard, lim)
	if a := testing.AllocsPerRun(100, func() { r.Read(buf) }); a != 0 {
		t.Errorf("Read: %v allocations", a)
	}
	if a := testing.AllocsPerRun(100, func() { w.Write(buf) }); a != 0 {
		t.Errorf("Write: %v allocations", a)
	}
	synctest.Test(t, func(t *testing.T) {
		for _, burst := range []int{64 * KiB, 4 * MiB} { // spins; sleeps
			lim := newBucket(t, limiter.Per(100_000_000, time.Second), burst)
			r := NewReader(&source{size: -1}, lim)
			w := NewWriter(io.Discard, lim)
			r.Read(buf) // the timer
			w.Write(buf)
			if a := testing.AllocsPerRun(100, func() { r.Read(buf) }); a != 0 {
				t.Errorf("waiting Read: %v allocations", a)
			}
			if a := testing.AllocsPerRun(100, func() { w.Write(buf) }); a != 0 {
				t.Errorf("waiting Write: %v allocations", a)
			}
		}
	})
}

var _ = bytes.MinRead

// TestPreciseWaitHonoursClose: the precise end of a pacer's wait (a spin,
// on the real clock: a bubble would not spin) still ends at Close, at once.
// The wait is a minute long and the spin is forced over all of it, so the
// Read can only end early through Close. The bound (1 s) is loose enough
// never to flake.
func TestPreciseWaitHonoursClose(t *testing.T) {
	lim, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(1, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(&source{size: -1}, lim)
	r.s.timer.Spin = time.Hour
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil { // the pacer's first grant
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := r.Read(buf) // waits a minute for the next byte
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	r.Close()
	err = <-done
	if elapsed := time.Since(start); elapsed > time.Second || !errors.Is(err, ErrClosed) {
		t.Errorf("Read returned %v %v after Close; want ErrClosed at once", err, elapsed)
	}
}
