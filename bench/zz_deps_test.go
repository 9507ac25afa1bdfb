package bench

// Peers that the channel, pipe and pool benchmarks compare with. Imported
// here so their go.mod entries exist before those benchmarks land; remove
// this file once each is imported by a benchmark.
import (
)
