package bench

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// The keyed benchmarks hold 1,000,000 keys, strings shaped like IPv4
// addresses ("10.x.y.z"), each with a bucket that has spent a permit and
// refills slowly (1 an hour, burst 100,000), so no key is ever full (full
// buckets are dropped when a shard grows) and every TryAcquire is granted.

const keyedKeys = 1_000_000

var keyedMemFlag = flag.Bool("keyedmem", false, "run TestKeyedMemory: bytes per idle key at 1,000,000 keys")

func keyedOptions() limiter.TokenBucketOptions {
	return limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 100_000}
}

func ipKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	return keys
}

// keyedFixture is built once per test binary and shared by every run of the
// keyed benchmarks: building a million keys takes longer than a benchmark.
var keyedFixture = sync.OnceValue(func() (f struct {
	keys  []string
	order []uint32 // random key indices, walked in a loop
	kb    *limiter.KeyedTokenBucket[string]
	m     map[string]int64
}) {
	f.keys = ipKeys(keyedKeys)
	kb, err := limiter.NewKeyedTokenBucket[string](keyedOptions())
	if err != nil {
		panic(err)
	}
	f.kb = kb
	f.m = make(map[string]int64)
	for i, k := range f.keys {
		if !kb.TryAcquire(k, 1).Granted() {
			panic("keyed fixture: first permit refused")
		}
		f.m[k] = int64(i)
	}
	if kb.Len() != keyedKeys {
		panic(fmt.Sprintf("keyed fixture holds %d keys, want %d", kb.Len(), keyedKeys))
	}
	r := rand.New(rand.NewPCG(1, 2))
	f.order = make([]uint32, 1<<20)
	for i := range f.order {
		f.order[i] = uint32(r.IntN(keyedKeys))
	}
	return f
})

// BenchmarkKeyed: TryAcquire on a random existing key out of a million,
// against a lookup of the same key in a plain map[string]int64. Both walk
// the same random sequence of keys, so both pay the same cache misses.
func BenchmarkKeyed(b *testing.B) {
	b.Run("rategate-keyed-1M", func(b *testing.B) {
		f := keyedFixture()
		mask := len(f.order) - 1
		b.ReportAllocs()
		var refused, i int64
		for b.Loop() {
			if !f.kb.TryAcquire(f.keys[f.order[int(i)&mask]], 1).Granted() {
				refused++
			}
			i++
		}
		checkAll(b, "refused", refused, i)
	})
	b.Run("map-mutex-1M", func(b *testing.B) {
		// What a KeyedTokenBucket does per call, written plainly: a lock and
		// a read and write of the key's word in a map.
		f := keyedFixture()
		var mu sync.Mutex
		mask := len(f.order) - 1
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			k := f.keys[f.order[int(i)&mask]]
			mu.Lock()
			f.m[k]++
			mu.Unlock()
			i++
		}
	})
	b.Run("map-mutex-clock-1M", func(b *testing.B) {
		// The floor of any keyed limiter that decides at the instant of the
		// call: map-mutex-1M with a read of the monotonic clock per call,
		// whose fence keeps one call's cache misses from overlapping the
		// next call's, as they do in the loops without one.
		f := keyedFixture()
		var mu sync.Mutex
		origin := time.Now()
		mask := len(f.order) - 1
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			k := f.keys[f.order[int(i)&mask]]
			now := int64(time.Since(origin))
			mu.Lock()
			f.m[k] = max(f.m[k], now)
			mu.Unlock()
			i++
		}
	})
	b.Run("map-lookup-1M", func(b *testing.B) {
		f := keyedFixture()
		mask := len(f.order) - 1
		b.ReportAllocs()
		var sum, i int64
		for b.Loop() {
			sum += f.m[f.keys[f.order[int(i)&mask]]]
			i++
		}
		sinkDur = time.Duration(sum)
	})
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestKeyedMemory prints the heap bytes per idle key of a KeyedTokenBucket
// holding 1,000,000 keys, next to a map[K]int64 holding the same keys.
// The key strings are made before the first measurement and kept alive
// after the last, so their bytes are counted in neither: what is measured
// is what the structure itself costs per key (for a string key, its 16-byte
// header is part of that). Run with: go test -run TestKeyedMemory -keyedmem .
func TestKeyedMemory(t *testing.T) {
	if !*keyedMemFlag {
		t.Skip("run with -keyedmem")
	}
	strKeys := ipKeys(keyedKeys)
	u64Keys := make([]uint64, keyedKeys)
	for i := range u64Keys {
		u64Keys[i] = uint64(10)<<24 | uint64(i) // the same addresses as integers
	}

	measure := func(build func() any) float64 { return measureN(keyedKeys, build) }
	keyedStr := measure(func() any {
		kb, err := limiter.NewKeyedTokenBucket[string](keyedOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range strKeys {
			kb.TryAcquire(k, 1)
		}
		if kb.Len() != keyedKeys {
			t.Fatalf("Len() = %d, want %d", kb.Len(), keyedKeys)
		}
		return kb
	})
	mapStr := measure(func() any {
		m := make(map[string]int64)
		for i, k := range strKeys {
			m[k] = int64(i)
		}
		return m
	})
	keyedU64 := measure(func() any {
		kb, err := limiter.NewKeyedTokenBucket[uint64](keyedOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range u64Keys {
			kb.TryAcquire(k, 1)
		}
		if kb.Len() != keyedKeys {
			t.Fatalf("Len() = %d, want %d", kb.Len(), keyedKeys)
		}
		return kb
	})
	mapU64 := measure(func() any {
		m := make(map[uint64]int64)
		for i, k := range u64Keys {
			m[k] = int64(i)
		}
		return m
	})
	runtime.KeepAlive(strKeys)
	runtime.KeepAlive(u64Keys)

	fmt.Printf("| key type | KeyedTokenBucket B/key | map[K]int64 B/key | ratio |\n| --- | ---: | ---: | ---: |\n")
	fmt.Printf("| string (\"10.x.y.z\", 16 B header; string bytes excluded) | %.1f | %.1f | %.2f |\n", keyedStr, mapStr, keyedStr/mapStr)
	fmt.Printf("| uint64 | %.1f | %.1f | %.2f |\n", keyedU64, mapU64, keyedU64/mapU64)

	// The cost per key moves with the maps' load: from just after they
	// grew (the most per key) to just before. The range over key counts:
	lo, hi := math.Inf(1), 0.0
	for n := 100_000; n <= keyedKeys; n += 50_000 {
		b := measureN(n, func() any {
			kb, err := limiter.NewKeyedTokenBucket[string](keyedOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range strKeys[:min(n, len(strKeys))] {
				kb.TryAcquire(k, 1)
			}
			return kb
		})
		lo, hi = min(lo, b), max(hi, b)
	}
	fmt.Printf("| string, 100,000 to 1,000,000 keys (every 50,000) | %.1f to %.1f | | |\n", lo, hi)
}

// measureN returns the heap bytes per key that build's result holds, for n
// keys.
func measureN(n int, build func() any) float64 {
	before := heapAlloc()
	v := build()
	after := heapAlloc()
	runtime.KeepAlive(v)
	return float64(int64(after)-int64(before)) / float64(n)
}
