package pipe

import (
	"io"

	"github.com/rategate/rategate/limiter"
)

// Writer is an io.Writer that passes bytes to the underlying writer no
// faster than its limiter grants them: one permit per byte, acquired before
// the bytes are written. It also implements io.ReaderFrom and io.Closer.
// A Writer is not safe for concurrent Writes, but Close may be called while
// a Write waits.
type Writer struct {
	dst io.Writer
	s   shaper
	buf []byte
	sr  shapedReader
}

// NewWriter returns a Writer that writes to w no faster than lim allows.
// A nil lim means no limit (the Writer still counts and can be closed); a
// nil w makes every call fail with ErrNilStream.
func NewWriter(w io.Writer, lim limiter.Limiter, opts ...Option) *Writer {
	wr := &Writer{dst: w}
	wr.s.init(lim, nil, configure(opts))
	if w == nil {
		wr.s.bad = ErrNilStream
	}
	return wr
}

// Write writes p in pieces of at most one chunk, each passed to the
// underlying writer once the limiter has granted its permits. It returns
// the bytes written and the first error: the underlying writer's, the
// wait's (context, Close, limiter), or io.ErrShortWrite when the underlying
// writer wrote less than it was given without saying why. Permits of a
// piece that was not fully written are spent.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.s.check(); err != nil {
		return 0, err
	}
	return w.s.write(w.dst, p)
}

// write is Write to dst through s.
func (s *shaper) write(dst io.Writer, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		l, k, err := s.acquire(min(len(p)-written, s.chunkSize()))
		if err != nil {
			return written, err
		}
		n, err := dst.Write(p[written : written+k])
		l.Release()
		s.counted(n)
		written += n
		if err == nil && n < k {
			err = io.ErrShortWrite
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// ReadFrom reads from r until EOF or an error and writes what it reads, no
// faster than the limiter allows; it implements io.ReaderFrom, so io.Copy
// uses it. It keeps the fast paths where the limit allows: when the
// underlying writer is an io.ReaderFrom (a bytes.Buffer, an *os.File, a
// *net.TCPConn, …) it gives it r through a shaped reader, which delivers
// each piece once its permits are granted; else when r is an io.WriterTo it
// lets r write to the Writer; else it copies through a buffer of one
// chunk, allocated once per Writer. Bytes read from r whose permits could
// not be granted (the wait failed) are lost, as io.Copy loses what it read
// when a write fails.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if err := w.s.check(); err != nil {
		return 0, err
	}
	if rf, ok := w.dst.(io.ReaderFrom); ok {
		w.sr = shapedReader{src: r, s: &w.s, pendBuf: w.sr.pendBuf}
		n, err := rf.ReadFrom(checked{&w.sr})
		w.sr.src = nil
		return n, err
	}
	if wt, ok := r.(io.WriterTo); ok {
		return wt.WriteTo(writerOnly{w})
	}
	if w.buf == nil {
		w.buf = make([]byte, min(w.s.chunkSize(), 32<<10))
	}
	return io.CopyBuffer(writerOnly{w}, readerOnly{r}, w.buf)
}

// Close closes the underlying writer if it is an io.Closer and returns its
// error. A Write waiting for permits returns ErrClosed, and so does every
// later call.
func (w *Writer) Close() error {
	w.s.close()
	if c, ok := w.dst.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// shapedWriter writes to dst through a shaper: Reader.WriteTo gives it to
// the underlying reader's WriteTo.
type shapedWriter struct {
	dst io.Writer
	s   *shaper
}

func (w *shapedWriter) Write(p []byte) (int, error) {
	if err := w.s.check(); err != nil {
		return 0, err
	}
	return w.s.write(w.dst, p)
}

// shapedReader reads from src through a shaper: a Reader reads through
// one, and Writer.ReadFrom gives one to the underlying writer's ReadFrom.
// It keeps bytes read but not yet delivered (a failed or partial wait).
type shapedReader struct {
	src     io.Reader
	s       *shaper
	pend    []byte
	pendBuf []byte
	pendErr error // src's error that came with pend
}

// checked is a shapedReader that checks its shaper's state first, for
// Writer.ReadFrom.
type checked struct{ *shapedReader }

func (c checked) Read(p []byte) (int, error) {
	if err := c.s.check(); err != nil {
		return 0, err
	}
	return c.shapedReader.Read(p)
}
