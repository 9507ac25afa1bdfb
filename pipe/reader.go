package pipe

import (
	"io"

	"github.com/rategate/rategate/limiter"
)

// Reader is an io.Reader whose Read returns bytes no faster than its
// limiter grants them: one permit per byte. It also implements io.WriterTo
// and io.Closer. A Reader is not safe for concurrent Reads (no io.Reader
// is), but Close may be called while a Read waits.
type Reader struct {
	src io.Reader
	s   shaper
	sr  shapedReader // reads src through s
	buf []byte
	sw  shapedWriter
}

// NewReader returns a Reader that reads from r no faster than lim allows.
// A nil lim means no limit (the Reader still counts and can be closed); a
// nil r makes every call fail with ErrNilStream.
func NewReader(r io.Reader, lim limiter.Limiter, opts ...Option) *Reader {
	rd := &Reader{src: r}
	rd.sr = shapedReader{src: r, s: &rd.s}
	rd.s.init(lim, nil, configure(opts))
	if r == nil {
		rd.s.bad = ErrNilStream
	}
	return rd
}

// Read reads up to len(p) bytes (fewer when the limiter's burst is smaller)
// from the underlying reader, then waits until the limiter grants as many
// permits as bytes were read, and returns them. So the bytes Read returns
// in any interval never exceed what the limiter granted in it, and a short
// read never costs permits for bytes it did not return. The underlying
// reader's error, io.EOF included, is returned as it is.
//
// When the wait fails (the context ended, the Reader was closed, the
// limiter was closed), Read returns 0 and the error, and keeps the bytes
// already read: a later Read delivers them first, so none is lost (a Conn
// whose read deadline passed delivers them once the deadline is moved).
// After Close they are dropped with the stream.
func (r *Reader) Read(p []byte) (int, error) {
	if err := r.s.check(); err != nil {
		return 0, err
	}
	return r.sr.Read(p)
}

// Read is Reader.Read without the check.
func (r *shapedReader) Read(p []byte) (int, error) {
	if len(r.pend) > 0 {
		return r.readPending(p)
	}
	if r.pendErr != nil {
		err := r.pendErr
		r.pendErr = nil
		return 0, err
	}
	if len(p) == 0 {
		return r.src.Read(p)
	}
	n, err := r.src.Read(p[:min(len(p), r.s.chunkSize())])
	if n <= 0 {
		return n, err
	}
	l, k, werr := r.s.acquire(n)
	if werr != nil {
		r.stash(p[:n], err)
		return 0, werr
	}
	l.Release()
	r.s.counted(k)
	if k < n {
		// The limiter grants at most k at once: deliver k now, the rest
		// (already read) later, so that no instant gets more than a grant.
		r.stash(p[k:n], err)
		return k, nil
	}
	return n, err
}

func (r *shapedReader) stash(b []byte, err error) {
	r.pendBuf = append(r.pendBuf[:0], b...)
	r.pend = r.pendBuf
	r.pendErr = err
}

// readPending delivers bytes kept after a failed or partial wait.
func (r *shapedReader) readPending(p []byte) (int, error) {
	n := min(len(p), len(r.pend), r.s.chunkSize())
	if n == 0 {
		return 0, nil
	}
	l, k, err := r.s.acquire(n)
	if err != nil {
		return 0, err
	}
	l.Release()
	copy(p, r.pend[:k])
	r.pend = r.pend[k:]
	r.s.counted(k)
	if len(r.pend) == 0 && r.pendErr != nil {
		err, r.pendErr = r.pendErr, nil
		return k, err
	}
	return k, nil
}

// WriteTo writes the Reader's bytes to w until EOF or an error, no faster
// than the limiter allows; it implements io.WriterTo, so io.Copy uses it.
// Bytes kept from a failed wait go first. It then keeps the fast paths where
// the limit allows: when the underlying reader is an io.WriterTo (a
// bytes.Reader, a strings.Reader, …) it writes through a shaped writer,
// which acquires the permits of each piece before passing it to w; else
// when w is an io.ReaderFrom (a bytes.Buffer, …) it lets w read from the
// Reader; else it copies through a buffer of one chunk, allocated once per
// Reader. It returns nil at EOF, like io.Copy.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	if err := r.s.check(); err != nil {
		return 0, err
	}
	var total int64
	if len(r.sr.pend) > 0 {
		n, err := r.s.write(w, r.sr.pend)
		r.sr.pend = r.sr.pend[n:]
		total = int64(n)
		if err != nil {
			return total, err
		}
	}
	if err := r.sr.pendErr; err != nil {
		r.sr.pendErr = nil
		if err == io.EOF {
			err = nil
		}
		return total, err
	}
	n, err := r.copyTo(w)
	return total + n, err
}

// copyTo is WriteTo once no kept bytes remain.
func (r *Reader) copyTo(w io.Writer) (int64, error) {
	if wt, ok := r.src.(io.WriterTo); ok {
		r.sw = shapedWriter{dst: w, s: &r.s}
		n, err := wt.WriteTo(&r.sw)
		r.sw.dst = nil
		return n, err
	}
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(readerOnly{r})
	}
	if r.buf == nil {
		r.buf = make([]byte, min(r.s.chunkSize(), 32<<10))
	}
	return io.CopyBuffer(writerOnly{w}, readerOnly{r}, r.buf)
}

// Close closes the underlying reader if it is an io.Closer and returns its
// error. A Read waiting for permits returns ErrClosed, and so does every
// later call.
func (r *Reader) Close() error {
	r.s.close()
	if c, ok := r.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// readerOnly hides a Reader's WriteTo from an io.ReaderFrom, which could
// otherwise call it back.
type readerOnly struct{ io.Reader }

// writerOnly hides a Writer's ReadFrom from an io.WriterTo.
type writerOnly struct{ io.Writer }
