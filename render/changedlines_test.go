package render

import (
	"math/rand"
	"testing"
)

// TestChangedLinesIsAShortestDiff: changedLines counts the lines of a shortest
// line diff (those of two lists less twice their longest common subsequence), and
// says when that is more than its bound.
func TestChangedLinesIsAShortestDiff(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	lines := func() []string {
		out := make([]string, r.Intn(9))
		for i := range out {
			out[i] = string(rune('a' + r.Intn(3)))
		}
		return out
	}
	for range 20000 {
		a, b := lines(), lines()
		lcs := make([][]int, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		want := len(a) + len(b) - 2*lcs[0][0]
		if n, ok := changedLines(a, b, -1); !ok || n != want {
			t.Fatalf("changedLines(%q, %q) = %d, %v; want %d", a, b, n, ok, want)
		}
		if n, ok := changedLines(a, b, want); !ok || n != want {
			t.Fatalf("changedLines(%q, %q, %d) = %d, %v; want %d", a, b, want, n, ok, want)
		}
		if want > 0 {
			if _, ok := changedLines(a, b, want-1); ok {
				t.Fatalf("changedLines(%q, %q, %d) is within the bound; it takes %d", a, b, want-1, want)
			}
		}
	}
}
