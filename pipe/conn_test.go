package pipe

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// TestConnWriteDeadline: a Write waiting for permits fails with
// os.ErrDeadlineExceeded, a timeout net.Error, at its deadline.
func TestConnWriteDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b)
		lim := newBucket(t, limiter.Per(KiB, time.Second), KiB)
		c := NewConn(a, nil, lim)
		defer c.Close()
		start := time.Now()
		c.SetWriteDeadline(start.Add(1500 * time.Millisecond))
		n, err := c.Write(make([]byte, 4*KiB))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Write = %d, %v; want a timeout", n, err)
		}
		// Pieces of 102 bytes (100 ms at 1 KiB/s): 25 of them fit in the
		// burst plus 1.5 s of rate, 2560 bytes.
		if want := 25 * 102; n != want {
			t.Errorf("wrote %d bytes before the deadline, want %d", n, want)
		}
		if d := time.Since(start); d != 1500*time.Millisecond {
			t.Errorf("failed after %v, want 1.5s", d)
		}
	})
}

// TestConnReadDeadlineKeepsBytes: a Read that times out waiting keeps the
// bytes it read; after the deadline is cleared, every byte arrives once,
// in order.
func TestConnReadDeadlineKeepsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		const size = 8 * KiB
		go func() {
			buf := make([]byte, size)
			fillPattern(buf, 0)
			b.Write(buf)
			b.Close()
		}()
		lim := newBucket(t, limiter.Per(KiB, time.Second), KiB)
		c := NewConn(a, lim, nil)
		defer c.Close()
		rec := &recorder{start: time.Now()}
		buf := make([]byte, 4*KiB)
		c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		timeouts := 0
		for {
			n, err := c.Read(buf)
			rec.check(buf[:n])
			if errors.Is(err, os.ErrDeadlineExceeded) {
				timeouts++
				c.SetReadDeadline(time.Time{})
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if timeouts != 1 || rec.bad != nil || rec.off != size {
			t.Fatalf("%d timeouts, %d bytes (%v); want 1 timeout and all %d bytes in order", timeouts, rec.off, rec.bad, size)
		}
		if err := checkBucketBound(rec.ds, limiter.Per(KiB, time.Second), KiB); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConnDeadlineMoved: extending the deadline of a waiting Read lets it
// finish; Close ends a waiting Read with net.ErrClosed.
func TestConnDeadlineMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go b.Write(make([]byte, 100))
		lim := newBucket(t, limiter.Per(1, 2*time.Second), 100)
		lim.TryAcquire(100)
		c := NewConn(a, lim, nil)
		start := time.Now()
		c.SetReadDeadline(start.Add(time.Second))
		time.AfterFunc(500*time.Millisecond, func() { c.SetReadDeadline(start.Add(time.Hour)) })
		n, err := c.Read(make([]byte, 2)) // pieces of 1 byte: the rate refills less in 100 ms
		if n != 1 || err != nil {
			t.Fatalf("Read = %d, %v; want 1, nil", n, err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("Read took %v, want 2s", d)
		}
		time.AfterFunc(time.Second, func() { c.Close() })
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read during Close: %v, want net.ErrClosed", err)
		}
	})
}

// chanListener is a net.Listener fed through a channel.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestListenerPerConnAndTotal: three accepted connections write at once;
// each stays within its own bucket, together they stay within the shared
// total, and together they reach 99% of it.
func TestListenerPerConnAndTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			own   = 16 * KiB // per connection, per second
			total = 32 * KiB // shared
			burst = 4 * KiB
			conns = 3
		)
		inner := &chanListener{conns: make(chan net.Conn, 1), done: make(chan struct{})}
		shared := newBucket(t, limiter.Per(total, time.Second), burst)
		ln, err := NewListener(inner, ListenerOptions{
			Write: shared,
			PerConn: func(net.Conn) (limiter.Limiter, limiter.Limiter, error) {
				b, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(own, time.Second), Burst: burst})
				return nil, b, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		start := time.Now()
		end := 4 * time.Second
		recs := make([]*recorder, conns)
		var wg sync.WaitGroup
		for i := range conns {
			server, client := net.Pipe()
			inner.conns <- server
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			recs[i] = &recorder{start: start}
			wg.Go(func() { // the client records what it receives
				buf := make([]byte, 64*KiB)
				for {
					n, err := client.Read(buf)
					recs[i].check(buf[:n])
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() { // the server writes as fast as it may until end
				defer c.Close()
				src := &source{size: -1}
				buf := make([]byte, 8*KiB)
				for time.Since(start) <= end {
					n, _ := src.Read(buf)
					if _, err := c.Write(buf[:n]); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		var all []delivery
		var got int64
		for i, r := range recs {
			if r.bad != nil {
				t.Fatalf("conn %d: %v", i, r.bad)
			}
			if err := checkBucketBound(r.ds, limiter.Per(own, time.Second), burst); err != nil {
				t.Fatalf("conn %d: %v", i, err)
			}
			all = append(all, r.ds...)
		}
		sortDeliveries(all)
		if err := checkBucketBound(all, limiter.Per(total, time.Second), burst); err != nil {
			t.Fatalf("all conns: %v", err)
		}
		for _, d := range all {
			if d.at <= end {
				got += d.n
			}
		}
		if want := int64(burst + total*4); 100*got < 99*want {
			t.Fatalf("%d bytes in %v over %d conns, less than 99%% of the total's %d", got, end, conns, want)
		}
	})
}

// TestConnHalfClose: a Conn keeps the underlying connection's CloseWrite
// (the peer reads io.EOF and can still answer) and CloseRead, and says
// errors.ErrUnsupported where the connection has none.
func TestConnHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	lim := newBucket(t, limiter.Per(MiB, time.Second), MiB)
	var c net.Conn = NewConn(raw, lim, lim)
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a Conn around a *net.TCPConn hides CloseWrite")
	}
	if _, err := c.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(peer)
	if err != nil || string(got) != "question" {
		t.Fatalf("peer read %q, %v; want the question then io.EOF", got, err)
	}
	peer.Write([]byte("answer"))
	peer.Close()
	if got, err := io.ReadAll(c); err != nil || string(got) != "answer" {
		t.Errorf("read %q, %v after CloseWrite; want the answer", got, err)
	}
	if _, ok := c.(interface{ CloseRead() error }); !ok {
		t.Error("a Conn around a *net.TCPConn hides CloseRead")
	}

	a, b := net.Pipe()
	defer b.Close()
	pc := NewConn(a, lim, lim)
	defer pc.Close()
	if err := pc.CloseWrite(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CloseWrite on a net.Pipe: %v, want errors.ErrUnsupported", err)
	}
	if err := pc.CloseRead(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CloseRead on a net.Pipe: %v, want errors.ErrUnsupported", err)
	}
	if pc.NetConn() != a {
		t.Error("NetConn is not the underlying connection")
	}
}

// TestConnConcurrentWrites: net.Conn lets several goroutines write at once,
// and each Write reaches the peer whole, as on a *net.TCPConn. A shaped
// Write is cut into pieces that wait for permits; the pieces of two Writes
// must not interleave.
func TestConnConcurrentWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		lim := newBucket(t, limiter.Per(KiB, time.Second), KiB) // pieces of 102 bytes
		c := NewConn(a, nil, lim)
		defer c.Close()
		const size = 2 * KiB
		for _, ch := range []byte("ab") {
			go c.Write(bytes.Repeat([]byte{ch}, size))
		}
		got := make([]byte, 2*size)
		if _, err := io.ReadFull(b, got); err != nil {
			t.Fatal(err)
		}
		for _, half := range [][]byte{got[:size], got[size:]} {
			if n := bytes.Count(half, half[:1]); n != size {
				t.Fatalf("the two Writes interleaved: a half holds %d of %q and %d of the other byte", n, half[:1], size-n)
			}
		}
	})
}

// A nil net.Listener is the one thing NewListener refuses, with the
// package's nil-stream error.
func TestNewListenerNil(t *testing.T) {
	ln, err := NewListener(nil, ListenerOptions{})
	if ln != nil || !errors.Is(err, ErrNilStream) {
		t.Fatalf("NewListener(nil) = %v, %v; want nil and an error wrapping ErrNilStream", ln, err)
	}
}
