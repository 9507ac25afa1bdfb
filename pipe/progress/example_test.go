package progress_test

import (
	"fmt"
	"io"
	"log"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
	"github.com/rategate/rategate/pipe/progress"
)

// A Monitor counts what a shaped stream delivers and drives a progress line.
func ExampleMonitor() {
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(256<<10, time.Second), Burst: 16 << 10})
	if err != nil {
		log.Fatal(err)
	}
	const size = 80 << 10
	mon := progress.NewMonitor(size)
	w := pipe.NewWriter(io.Discard, lim, pipe.WithCounter(mon))
	if _, err := w.Write(make([]byte, size)); err != nil {
		log.Fatal(err)
	}
	p := mon.Progress()
	fmt.Println(pipe.FormatBytes(p.Bytes), p.Done(), p.ETA)
	// Output: 80.0 KiB true 0s
}
