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
// environment; its stderr goes to stderr; each line it writes to stdout is
// passed to line(i, text) as it comes, from one goroutine per copy, so line
// must be safe for concurrent use. Ending ctx kills the copies still
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
				line(i, sc.Text())
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("process %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
