package selfexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// Run starts n copies of the running program and waits until they have all
// exited. Copy i (from 0 to n-1) runs with key=value(i) added to its
// environment; what it writes to its stderr goes to stderr (nil: discarded);
// each line it writes to its stdout is passed to line(i, text) as it comes.
// Run serializes them: no two calls of line, and no call of line and write
// to stderr, happen at once, so line needs no lock of its own, even to
// write to the same writer as stderr. Ending ctx kills the copies still
// running.
//
// Run returns nil when every copy exited with status 0, else the failures
// joined, each naming its process from 1 ("process 2: exit status 1"). If
// a copy cannot be started, Run stops those already started and returns
// why.
func Run(ctx context.Context, n int, key string, value func(i int) string, stderr io.Writer, line func(i int, text string)) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	var mu sync.Mutex // held by line and by writes to stderr
	if stderr != nil {
		stderr = lockedWriter{&mu, stderr}
	}
	for i := range n {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), key+"="+value(i))
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			cancel() // the copies already started stop
			wg.Wait()
			return fmt.Errorf("start process %d: %w", i+1, err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				line(i, sc.Text())
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("process %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lockedWriter serializes the writes of the copies' stderr with each other
// and with line.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
