package pipe

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// patternPeriod is the period of the test streams' bytes: a prime, so that
// no piece size (powers of two, mostly) hides a repeated or lost piece.
const patternPeriod = 65521

// pattern holds two periods of the test streams' bytes, so that any
// stretch of up to one period is one slice of it.
var pattern = func() []byte {
	b := make([]byte, 2*patternPeriod)
	for i := range b {
		j := i % patternPeriod
		b[i] = byte(j ^ j>>8*7)
	}
	return b
}()

// patternByte is byte i of every test stream.
func patternByte(i int64) byte { return pattern[i%patternPeriod] }

// fillPattern fills p with the stream's bytes from offset off.
func fillPattern(p []byte, off int64) {
	for len(p) > 0 {
		n := copy(p, pattern[off%patternPeriod:][:min(len(p), patternPeriod)])
		p, off = p[n:], off+int64(n)
	}
}

// matchPattern reports the first offset in p that differs from the stream
// from off, or -1.
func matchPattern(p []byte, off int64) int64 {
	for i := 0; i < len(p); {
		n := min(len(p)-i, patternPeriod)
		want := pattern[(off+int64(i))%patternPeriod:][:n]
		if !bytes.Equal(p[i:i+n], want) {
			for j := range n {
				if p[i+j] != want[j] {
					return int64(i + j)
				}
			}
		}
		i += n
	}
	return -1
}

// source is an endless (or size-limited) reader of the pattern, returning at
// most max bytes per Read (0: no cap).
type source struct {
	off, size int64 // size < 0: endless
	max       int
}

func (s *source) Read(p []byte) (int, error) {
	if s.size >= 0 && s.off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if s.max > 0 {
		n = min(n, s.max)
	}
	if s.size >= 0 {
		n = int(min(int64(n), s.size-s.off))
	}
	fillPattern(p[:n], s.off)
	s.off += int64(n)
	return n, nil
}

// delivery is n bytes handed on at an instant.
type delivery struct {
	at time.Duration
	n  int64
}

// checkBucketBound checks that the bytes delivered in every interval
// [t_i, t_j] are at most burst + rate·(t_j - t_i), exactly (big integers).
func checkBucketBound(ds []delivery, rate limiter.Rate, burst int64) error {
	n, d := big.NewInt(rate.Events()), big.NewInt(int64(rate.Period()))
	// For each j: max over i<=j of P_j - P_{i-1} - rate*(t_j - t_i) <= burst,
	// i.e. d*(P_j) - n*t_j - min_i(d*P_{i-1} - n*t_i) <= d*burst.
	var prefix int64
	var best *big.Int
	lim := new(big.Int).Mul(d, big.NewInt(burst))
	for _, x := range ds {
		left := new(big.Int).Sub(new(big.Int).Mul(d, big.NewInt(prefix)), new(big.Int).Mul(n, big.NewInt(int64(x.at))))
		if best == nil || left.Cmp(best) < 0 {
			best = left
		}
		prefix += x.n
		right := new(big.Int).Sub(new(big.Int).Mul(d, big.NewInt(prefix)), new(big.Int).Mul(n, big.NewInt(int64(x.at))))
		if new(big.Int).Sub(right, best).Cmp(lim) > 0 {
			return fmt.Errorf("bound broken: by %v, %d bytes delivered, more than burst %d + %v over some interval", x.at, prefix, burst, rate)
		}
	}
	return nil
}

func newBucket(t testing.TB, rate limiter.Rate, burst int) *limiter.TokenBucket {
	t.Helper()
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: rate, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// recorder is a writer that records when it receives how many bytes, and
// checks they follow the pattern.
type recorder struct {
	start time.Time
	off   int64
	ds    []delivery
	bad   error
	max   int // accept at most max bytes per Write (a short write); 0: all
}

func (r *recorder) Write(p []byte) (int, error) {
	n := len(p)
	if r.max > 0 {
		n = min(n, r.max)
	}
	r.check(p[:n])
	return n, nil
}

func (r *recorder) check(p []byte) {
	if i := matchPattern(p, r.off); i >= 0 && r.bad == nil {
		r.bad = fmt.Errorf("byte %d is %#x, want %#x", r.off+i, p[i], patternByte(r.off+i))
	}
	r.off += int64(len(p))
	if len(p) > 0 {
		r.ds = append(r.ds, delivery{time.Since(r.start), int64(len(p))})
	}
}

func bytesReader(b []byte) io.Reader { return &bytesReaderT{b: b} }

// bytesReaderT is a bytes.Reader-like source with WriteTo, written here so
// that the test sees each call.
type bytesReaderT struct{ b []byte }

func (r *bytesReaderT) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *bytesReaderT) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.b)
	r.b = r.b[n:]
	return int64(n), err
}

func sortDeliveries(ds []delivery) {
	slices.SortStableFunc(ds, func(a, b delivery) int { return cmp.Compare(a.at, b.at) })
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
