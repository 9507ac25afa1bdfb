package pipe

import "fmt"

// FormatBytes formats n bytes with a binary unit: "512 B", "1.5 KiB",
// "3.0 MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= unit
		if f < unit && f > -unit || u == "PiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return "" // unreachable
}
