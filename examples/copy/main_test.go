package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCopy copies 256 KiB at 64 KiB/s with a 16 KiB burst on synctest's
// clock: it takes exactly (256 - 16) / 64 s, every byte arrives, and every
// progress line stays within the bound and near it.
func TestCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			size  = 256 << 10
			rate  = 64 << 10
			burst = 16 << 10
		)
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(i * 31 / 7)
		}
		var out, progress bytes.Buffer
		cfg := config{In: bytes.NewReader(in), Size: size, Out: &out, Rate: rate, Burst: burst, Every: 500 * time.Millisecond}
		res, err := run(t.Context(), &progress, cfg)
		t.Log("\n" + progress.String())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in) || res.Bytes != size {
			t.Fatalf("copied %d bytes (%d out), want the %d in", res.Bytes, out.Len(), size)
		}
		if want := 3750 * time.Millisecond; res.Elapsed != want {
			t.Errorf("the copy took %v, want %v", res.Elapsed, want)
		}
		// A line every 500 ms, 0.5 s to 3.5 s, and one at the end.
		if len(res.Lines) != 8 {
			t.Fatalf("%d progress lines, want 8", len(res.Lines))
		}
		// The copy moves in pieces of 100 ms of rate: a line may be one
		// piece short of the bound, never over it.
		for _, p := range res.Lines {
			allowed := min(size, burst+int64(rate*p.Elapsed.Seconds()))
			if p.Bytes > allowed || p.Bytes < allowed-rate/10 {
				t.Errorf("at %v: %d bytes, want at most %d and at most 100 ms of rate fewer", p.Elapsed, p.Bytes, allowed)
			}
			if p.Elapsed >= 2*time.Second && !p.Done() && (p.Rate < 0.95*rate || p.Rate > 1.05*rate) {
				t.Errorf("at %v: current rate %.0f B/s, want about %d", p.Elapsed, p.Rate, rate)
			}
		}
		last := strings.TrimSpace(progress.String()[strings.LastIndex(strings.TrimSpace(progress.String()), "\n")+1:])
		if !strings.HasPrefix(last, "256.0 KiB / 256.0 KiB (100%)") || !strings.Contains(last, "done in 3.75s") {
			t.Errorf("last line %q", last)
		}
	})
}

// TestCopyCancel: ending the context stops a copy that is waiting.
func TestCopyCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var progress bytes.Buffer
		cfg := config{In: bytes.NewReader(make([]byte, 1<<20)), Out: &bytes.Buffer{}, Rate: 1 << 10, Burst: 1 << 10, Every: time.Second}
		res, err := run(ctx, &progress, cfg)
		if !errors.Is(err, context.DeadlineExceeded) || res.Elapsed != 2*time.Second {
			t.Fatalf("run = %v after %v; want context.DeadlineExceeded after 2s", err, res.Elapsed)
		}
	})
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1500": 1500, "64KiB": 64 << 10, "2.5MB": 2_500_000, "1GiB": 1 << 30, "10 B": 10} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "0", "-1KB", "0.1B", "2PB"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("parseBytes(%q) succeeded", s)
		}
	}
	if _, err := run(t.Context(), &bytes.Buffer{}, config{}); err == nil {
		t.Error("run with a zero config succeeded")
	}
}
