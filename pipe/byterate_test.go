package pipe_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{
		"1500": 1500, "1B": 1, "10 B": 10, " 7b ": 7,
		"64KiB": 64 << 10, "64kib": 64 << 10, "64KIB": 64 << 10,
		"500kB": 500_000, "500KB": 500_000, "500kb": 500_000,
		"2.5MB": 2_500_000, "2.5 mb": 2_500_000, "1.5KiB": 1536, "0.5KiB": 512, "3.0 MiB": 3 << 20,
		"1GiB": 1 << 30, "1GB": 1e9, "2TiB": 2 << 40, "1TB": 1e12,
		"1024TiB": 1 << 50, "000012": 12, "5.": 5,
		"0.000001MB": 1, "1.00000000000000000000000kB": 1000,
	} {
		if got, err := pipe.ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for s, why := range map[string]string{
		"":                      "empty size",
		"  ":                    "empty size",
		"x":                     `"x" does not start with a number`,
		"KiB":                   `"KiB" does not start with a number`,
		".5KiB":                 `".5KiB" does not start with a number`,
		"0":                     "must be positive",
		"0KiB":                  "must be positive",
		"-1":                    "must be positive",
		"-1KB":                  "must be positive",
		"0.1B":                  "0.1 of its unit is not a whole number of bytes",
		"1.3KiB":                "not a whole number of bytes",
		"2PB":                   `unknown unit "PB": want B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)`,
		"3 bits":                `unknown unit "bits"`,
		"1.2.3MB":               `unknown unit ".3MB"`,
		"1 k":                   `ambiguous unit "k": write kB (powers of 1000) or KiB (powers of 1024)`,
		"1M":                    `ambiguous unit "M": write MB (powers of 1000) or MiB (powers of 1024)`,
		"1gi":                   `ambiguous unit "gi": write GB (powers of 1000) or GiB (powers of 1024)`,
		"1025TiB":               "over the largest size, 1125899906842624 bytes (1.0 PiB)",
		"99999999999999TB":      "over the largest size",
		strings.Repeat("9", 31): "too many digits",
	} {
		_, err := pipe.ParseBytes(s)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), fmt.Sprintf("pipe: parse size %q: ", s)) {
			t.Errorf("ParseBytes(%q) = %v; want an error that quotes it and says %q", s, err, why)
		}
	}
}

func TestParseByteRate(t *testing.T) {
	for s, want := range map[string]limiter.Rate{
		"2MiB/s":          limiter.Per(2<<20, time.Second),
		"1mib/s":          limiter.Per(1<<20, time.Second),
		"1MIB/S":          limiter.Per(1<<20, time.Second),
		"500kB/s":         limiter.Per(500_000, time.Second),
		"1GB/min":         limiter.Per(1e9, time.Minute),
		"1gb/MIN":         limiter.Per(1e9, time.Minute),
		"64 KiB / 500ms":  limiter.Per(64<<10, 500*time.Millisecond),
		"10B/second":      limiter.Per(10, time.Second),
		"1.5KiB/h":        limiter.Per(1536, time.Hour),
		"3TB/day":         limiter.Per(3e12, 24*time.Hour),
		"1KiB/1m30s":      limiter.Per(1024, 90*time.Second),
		"100MB/1500MS":    limiter.Per(100e6, 1500*time.Millisecond),
		"1024TiB/ns":      limiter.Per(1<<50, time.Nanosecond),
		"7 b/us":          limiter.Per(7, time.Microsecond),
		"2 MiB / Second ": limiter.Per(2<<20, time.Second),
	} {
		if got, err := pipe.ParseByteRate(s); err != nil || got != want {
			t.Errorf("ParseByteRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	// The messages of issue 18's examples, among others: each says what
	// was wrong and what was expected.
	for s, why := range map[string]string{
		"5/min":        `"5" has no unit: write 5B for bytes, or use a unit such as KiB or MB`,
		"5/fortnight":  `"5" has no unit`,
		"5B/fortnight": `unknown unit of time "fortnight": want s, ms, min, h, d or a duration such as 500ms`,
		"-1":           "want a size per unit of time, such as 2MiB/s: a size must be positive",
		"0":            "a size must be positive, at least 1 byte",
		"0B/s":         "a size must be positive, at least 1 byte",
		"2MiB":         "no unit of time: want a size per unit of time, such as 2MiB/s",
		"2 MiB ":       "such as 2 MiB/s",
		"2MiB/":        `no unit of time after the "/"`,
		"2MiB/0s":      "the period must be positive, got 0s",
		"2MiB/-1s":     "the period must be positive, got -1s",
		"2MiB/s/s":     `unknown unit of time "s/s"`,
		"2Mb/sec!":     `unknown unit of time "sec!"`,
		"2M/s":         `ambiguous unit "M"`,
		"/s":           "empty size",
		"":             "want a size per unit of time, such as 2MiB/s: empty size",
		"fast":         `"fast" does not start with a number`,
		"1025TiB/s":    "over the largest size",
	} {
		_, err := pipe.ParseByteRate(s)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), fmt.Sprintf("pipe: parse byte rate %q: ", s)) {
			t.Errorf("ParseByteRate(%q) = %v; want an error that quotes it and says %q", s, err, why)
		}
	}
}

// checkByteRate checks what ParseByteRate promises for any s: no panic; a
// rate of 1 to MaxBytes bytes per positive period; the same answer in upper
// and lower case; and the rate read back from its plain form.
func checkByteRate(t *testing.T, s string) {
	r, err := pipe.ParseByteRate(s)
	if err != nil {
		if r != (limiter.Rate{}) {
			t.Fatalf("ParseByteRate(%q) = %v with error %v; want the zero Rate", s, r, err)
		}
		return
	}
	if r.Events() < 1 || r.Events() > pipe.MaxBytes || r.Period() <= 0 {
		t.Fatalf("ParseByteRate(%q) = %v bytes per %v; want 1 to %d bytes per positive period", s, r.Events(), r.Period(), int64(pipe.MaxBytes))
	}
	if isASCII(s) {
		for _, c := range []string{strings.ToUpper(s), strings.ToLower(s)} {
			if r2, err := pipe.ParseByteRate(c); err != nil || r2 != r {
				t.Fatalf("ParseByteRate(%q) = %v, %v; but ParseByteRate(%q) = %v", c, r2, err, s, r)
			}
		}
	}
	plain := fmt.Sprintf("%dB/%dns", r.Events(), r.Period().Nanoseconds())
	if r2, err := pipe.ParseByteRate(plain); err != nil || r2 != r {
		t.Fatalf("ParseByteRate(%q) = %v, %v; want %v, as from %q", plain, r2, err, r, s)
	}
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func FuzzParseByteRate(f *testing.F) {
	for _, s := range []string{
		"2MiB/s", "500kB/s", "1GB/min", "1mib/s", "64 KiB / 500ms", "1.5KiB/h", "1KiB/1m30s",
		"5/min", "5/fortnight", "-1", "0", "2MiB", "2M/s", "0.1B/s", "1025TiB/s", "1.2.3MB/s", "9.99999999999999999999TB/µs",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkByteRate(t, s)
		n, err := pipe.ParseBytes(s)
		if err == nil && (n < 1 || n > pipe.MaxBytes) {
			t.Fatalf("ParseBytes(%q) = %d; want 1 to %d", s, n, int64(pipe.MaxBytes))
		}
		if err == nil {
			if n2, err := pipe.ParseBytes(fmt.Sprint(n)); err != nil || n2 != n {
				t.Fatalf("ParseBytes(%q) = %d, %v; want %d, as from %q", fmt.Sprint(n), n2, err, n, s)
			}
		}
	})
}

func ExampleParseByteRate() {
	for _, s := range []string{"2MiB/s", "500kB/s", "1GB/min", "1mib/s", "5/min", "2M/s"} {
		r, err := pipe.ParseByteRate(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %d bytes per %v\n", s, r.Events(), r.Period())
	}
	// Output:
	// 2MiB/s: 2097152 bytes per 1s
	// 500kB/s: 500000 bytes per 1s
	// 1GB/min: 1000000000 bytes per 1m0s
	// 1mib/s: 1048576 bytes per 1s
	// pipe: parse byte rate "5/min": "5" has no unit: write 5B for bytes, or use a unit such as KiB or MB
	// pipe: parse byte rate "2M/s": ambiguous unit "M": write MB (powers of 1000) or MiB (powers of 1024)
}

func ExampleParseBytes() {
	burst, err := pipe.ParseBytes("64KiB")
	if err != nil {
		panic(err)
	}
	fmt.Println(burst)
	// Output: 65536
}
