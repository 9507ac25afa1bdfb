package exact

import (
	"math"
	"math/big"
	"testing"
)

func FuzzMulDiv(f *testing.F) {
	f.Add(int64(3), int64(1_000_000_007), int64(7))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(1))
	f.Add(int64(math.MaxInt64), int64(2), int64(3))
	f.Fuzz(func(t *testing.T, a, b, c int64) {
		if a < 0 || b < 0 || c <= 0 {
			return
		}
		p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		floor, rem := new(big.Int).QuoRem(p, big.NewInt(c), new(big.Int))
		ceil := new(big.Int).Set(floor)
		if rem.Sign() != 0 {
			ceil.Add(ceil, big.NewInt(1))
		}
		for _, tc := range []struct {
			name string
			f    func(a, b, c int64) (int64, bool)
			want *big.Int
		}{{"MulDiv", MulDiv, floor}, {"MulDivCeil", MulDivCeil, ceil}} {
			got, ok := tc.f(a, b, c)
			if fits := tc.want.IsInt64(); ok != fits || ok && got != tc.want.Int64() {
				t.Fatalf("%s(%d, %d, %d) = %d, %v; want %v (fits %v)", tc.name, a, b, c, got, ok, tc.want, fits)
			}
		}
	})
}

func TestCeilDiv(t *testing.T) {
	for _, tc := range [][3]int64{{0, 3, 0}, {1, 3, 1}, {3, 3, 1}, {4, 3, 2}, {math.MaxInt64, 1, math.MaxInt64}} {
		if got := CeilDiv(tc[0], tc[1]); got != tc[2] {
			t.Errorf("CeilDiv(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}
