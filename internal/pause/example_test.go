package pause_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rategate/rategate/internal/pause"
)

// A wait that a cancelled context ends at once.
func ExampleFor() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(pause.For(ctx, time.Hour))
	// Output: context canceled
}
