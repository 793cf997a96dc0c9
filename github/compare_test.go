package github

import (
	"reflect"
	"testing"
)

func TestAddedLines(t *testing.T) {
	cases := map[string]struct {
		patch string
		want  [][2]int
	}{
		"one replaced line":               {"@@ -9,3 +9,3 @@ spec:\n   a\n-  b: 1\n+  b: 2\n   c", [][2]int{{10, 10}}},
		"two hunks, a run of added lines": {"@@ -1,2 +1,4 @@\n x\n+y\n+z\n w\n@@ -20,2 +22,3 @@\n p\n+q\n r", [][2]int{{2, 3}, {23, 23}}},
		"only removed lines":              {"@@ -3,2 +3,1 @@\n a\n-b", nil},
		"no newline marker":               {"@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file", [][2]int{{1, 1}}},
		"new file":                        {"@@ -0,0 +1,2 @@\n+a\n+b", [][2]int{{1, 2}}},
		"no patch":                        {"", nil},
		"garbage header":                  {"@@ nonsense @@\n+a", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := AddedLines(tc.patch); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("AddedLines = %v, want %v", got, tc.want)
			}
		})
	}
}
