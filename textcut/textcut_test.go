package textcut_test

import (
	"testing"
	"unicode/utf8"

	"github.com/kukie/kukie-gitops/textcut"
)

func TestCutEndsAtAWholeCharacter(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"},  // é is two bytes: not split
		{"日本語", 4, "日…"}, // three-byte characters
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	} {
		got := textcut.Cut(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
