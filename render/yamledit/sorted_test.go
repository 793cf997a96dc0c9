package yamledit

import "testing"

// TestSetSortedPlacesNewKeys: a key SetSorted adds goes to its place in a
// mapping whose keys are sorted, above the comments of the key after it, and
// is appended to a mapping in no order, of one key, or where it sorts last.
func TestSetSortedPlacesNewKeys(t *testing.T) {
	cases := []struct {
		name, in, want string
		op             Op
	}{
		{
			name: "between two keys, above the comment of the next",
			in:   "env:\n  API_URL: https://a\n  # launched in March\n  FEATURE: \"on\"   # flag\n  LOG_LEVEL: info\n",
			op:   SetSorted(Path{K("env"), K("DB_HOST")}, "db"),
			want: "env:\n  API_URL: https://a\n  DB_HOST: db\n  # launched in March\n  FEATURE: \"on\"   # flag\n  LOG_LEVEL: info\n",
		},
		{
			name: "first of a nested mapping",
			in:   "env:\n  FEATURE: \"on\"\n  LOG_LEVEL: info\nimage: {tag: \"1\"}\n",
			op:   SetSorted(Path{K("env"), K("API_URL")}, "https://a"),
			want: "env:\n  API_URL: https://a\n  FEATURE: \"on\"\n  LOG_LEVEL: info\nimage: {tag: \"1\"}\n",
		},
		{
			name: "sorts last",
			in:   "env:\n  A: \"1\"\n  B: \"2\"\n",
			op:   SetSorted(Path{K("env"), K("C")}, "3"),
			want: "env:\n  A: \"1\"\n  B: \"2\"\n  C: \"3\"\n",
		},
		{
			name: "keys in no order",
			in:   "env:\n  LOG_LEVEL: info\n  FEATURE: \"on\"\n",
			op:   SetSorted(Path{K("env"), K("API_URL")}, "https://a"),
			want: "env:\n  LOG_LEVEL: info\n  FEATURE: \"on\"\n  API_URL: https://a\n",
		},
		{
			name: "one key says no order",
			in:   "image:\n  tag: \"1\"\n",
			op:   SetSorted(Path{K("affinity")}, map[string]any{}),
			want: "image:\n  tag: \"1\"\naffinity: {}\n",
		},
		{
			name: "without Sorted the key is appended",
			in:   "env:\n  FEATURE: \"on\"\n  LOG_LEVEL: info\n",
			op:   Set(Path{K("env"), K("API_URL")}, "https://a"),
			want: "env:\n  FEATURE: \"on\"\n  LOG_LEVEL: info\n  API_URL: https://a\n",
		},
		{
			name: "the file's opening comment stays first",
			in:   "# Production settings.\nimage:\n  tag: \"1\"\nreplicaCount: 2\n",
			op:   SetSorted(Path{K("affinity")}, "x"),
			want: "# Production settings.\naffinity: x\nimage:\n  tag: \"1\"\nreplicaCount: 2\n",
		},
		{
			name: "a comment after a blank line is the first key's",
			in:   "# Production settings.\n\n# the image\nimage:\n  tag: \"1\"\nreplicaCount: 2\n",
			op:   SetSorted(Path{K("affinity")}, "x"),
			want: "# Production settings.\n\naffinity: x\n\n# the image\nimage:\n  tag: \"1\"\nreplicaCount: 2\n",
		},
		{
			name: "a key's comment inside the root",
			in:   "image:\n  tag: \"1\"\n# how many\nreplicaCount: 2\n",
			op:   SetSorted(Path{K("podLabels"), K("team")}, "shop"),
			want: "image:\n  tag: \"1\"\npodLabels:\n  team: shop\n# how many\nreplicaCount: 2\n",
		},
		{
			name: "ignoring case",
			in:   "env:\n  apple: \"1\"\n  Cherry: \"3\"\n",
			op:   SetSorted(Path{K("env"), K("banana")}, "2"),
			want: "env:\n  apple: \"1\"\n  banana: \"2\"\n  Cherry: \"3\"\n",
		},
		{
			name: "a structure set on a structure",
			in:   "env:\n  FEATURE: \"on\"\n  LOG_LEVEL: info\n",
			op:   SetSorted(Path{K("env")}, map[string]any{"API_URL": "https://a", "FEATURE": "on", "LOG_LEVEL": "debug"}),
			want: "env:\n  API_URL: https://a\n  FEATURE: \"on\"\n  LOG_LEVEL: debug\n",
		},
		{
			name: "crlf",
			in:   "env:\r\n  B: \"2\"\r\n  C: \"3\"\r\n",
			op:   SetSorted(Path{K("env"), K("A")}, "1"),
			want: "env:\r\n  A: \"1\"\r\n  B: \"2\"\r\n  C: \"3\"\r\n",
		},
		{
			name: "the next key opens a sequence item",
			in:   "items:\n  - b: \"2\"\n    c: \"3\"\n",
			op:   SetSorted(Path{K("items"), I(0), K("a")}, "1"),
			want: "items:\n  - b: \"2\"\n    c: \"3\"\n    a: \"1\"\n",
		},
		{
			name: "after a document marker",
			in:   "---\n# values\nb: \"2\"\nc: \"3\"\n",
			op:   SetSorted(Path{K("a")}, "1"),
			want: "---\n# values\na: \"1\"\nb: \"2\"\nc: \"3\"\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Edit([]byte(tc.in), 0, tc.op)
			if err != nil {
				t.Fatalf("edit: %v", err)
			}
			if string(out) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tc.want)
			}
		})
	}
}
