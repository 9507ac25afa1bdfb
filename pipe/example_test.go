package pipe_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

// A bandwidth-capped copy: 96 KiB at 128 KiB/s, with a 32 KiB burst, takes
// (96 - 32) / 128 s = half a second.
func ExampleNewReader() {
	start := time.Now() // before the bucket: its first 32 KiB are free from here
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{
		Rate:  limiter.Per(128<<10, time.Second), // 128 KiB/s
		Burst: 32 << 10,
	})
	if err != nil {
		log.Fatal(err)
	}
	src := bytes.NewReader(make([]byte, 96<<10))
	var dst bytes.Buffer

	n, err := io.Copy(&dst, pipe.NewReader(src, lim))
	if err != nil {
		log.Fatal(err)
	}
	// 32 KiB at once, then 64 KiB at 128 KiB/s: never sooner than 0.5 s.
	fmt.Printf("copied %d bytes in %v\n", n, time.Since(start).Truncate(100*time.Millisecond))
	// Output: copied 98304 bytes in 500ms
}
