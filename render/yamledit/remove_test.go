package yamledit

import (
	"errors"
	"testing"
)

func TestRemoveDocument(t *testing.T) {
	for name, tc := range map[string]struct {
		src  string
		doc  int
		want string
		err  error
	}{
		"the middle one with its separator and comments": {
			src:  "# web\na: 1\n---\n# the service\nb: 2 # inline\n\n---\nc: 3\n",
			doc:  1,
			want: "# web\na: 1\n---\nc: 3\n",
		},
		"the last one, no final newline": {
			src:  "a: 1\n---\nb: 2",
			doc:  1,
			want: "a: 1\n",
		},
		"the first one takes the separator after it": {
			src:  "a: 1\n---\nb: 2\n",
			doc:  0,
			want: "b: 2\n",
		},
		"the first one keeps the file's header": {
			src:  "# Managed by the shop team.\n\n# the deployment\na: 1\n---\nb: 2\n",
			doc:  0,
			want: "# Managed by the shop team.\n\nb: 2\n",
		},
		"a leading separator stays": {
			src:  "---\na: 1\n---\nb: 2\n",
			doc:  0,
			want: "---\nb: 2\n",
		},
		"comments before the leading separator stay": {
			src:  "# top\n---\na: 1\n---\nb: 2\n",
			doc:  1,
			want: "# top\n---\na: 1\n",
		},
		"CRLF line breaks": {
			src:  "a: 1\r\n---\r\nb: 2\r\n---\r\nc: 3\r\n",
			doc:  1,
			want: "a: 1\r\n---\r\nc: 3\r\n",
		},
		"a separator with a comment": {
			src:  "a: 1\n--- # two\nb: 2\n",
			doc:  1,
			want: "a: 1\n",
		},
		"an empty document counts": {
			src:  "a: 1\n---\n---\nb: 2\n",
			doc:  2,
			want: "a: 1\n---\n",
		},
		"a block scalar with dashes inside": {
			src:  "a: |\n  ---x\n  --- not a separator\nb: 1\n---\nc: 2\n",
			doc:  1,
			want: "a: |\n  ---x\n  --- not a separator\nb: 1\n",
		},
		"anchors of the kept document stay": {
			src:  "x: &a 1\ny: *a\n---\nz: 2\n",
			doc:  1,
			want: "x: &a 1\ny: *a\n",
		},
		"the only document": {src: "# c\na: 1\n", doc: 0, err: ErrUnsupported},
		"past the end":      {src: "a: 1\n---\nb: 2\n", doc: 2, err: ErrNotFound},
		"after an end marker": {
			src:  "a: 1\n...\n---\nb: 2\n",
			doc:  1,
			want: "a: 1\n...\n",
		},
		"the first one with its end marker": {
			src:  "a: 1\n...\n---\nb: 2\n",
			doc:  0,
			want: "b: 2\n",
		},
		"the middle one with its end marker and comment": {
			src:  "a: 1\n---\nb: 2\n... # end of b\n# c next\n---\nc: 3\n...\n",
			doc:  1,
			want: "a: 1\n---\nc: 3\n...\n",
		},
		"a directive":                    {src: "%TAG !e! tag:example.com,2000:\n---\na: 1\n---\nb: 2\n", doc: 1, err: ErrUnsupported},
		"content on the separator":       {src: "a: 1\n--- !!map\nb: 2\n", doc: 1, err: ErrUnsupported},
		"negative index":                 {src: "a: 1\n---\nb: 2\n", doc: -1, err: ErrNotFound},
		"a lone carriage return":         {src: "a: 1\r---\nb: 2\n", doc: 1, err: ErrUnsupported},
		"the first, before an empty one": {src: "a: 1\n---", doc: 0, want: "---"},
		"a document that is a list":      {src: "- a\n---\n- b\n", doc: 0, want: "- b\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := RemoveDocument([]byte(tc.src), tc.doc)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// FuzzRemoveDocument: whatever the file, a removal either fails or leaves exactly
// the other documents (RemoveDocument checks that itself; a failure of its check
// is a bug) and only removes bytes.
func FuzzRemoveDocument(f *testing.F) {
	for _, s := range []string{"a: 1\n---\nb: 2\n", "# h\n\na: 1\n---\n# c\nb: [1, 2]\n---\nc: |\n  ---x\n", "---\n---\na: 1\n", "a: 1\n...\n---\nb: 2\n...\n"} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, src []byte, doc uint8) {
		if len(src) > 16<<10 {
			return
		}
		out, err := RemoveDocument(src, int(doc))
		if errors.Is(err, errSelfCheck) {
			t.Fatalf("removal of document %d failed its own check: %v\n%q", doc, err, src)
		}
		if err == nil && len(out) >= len(src) {
			t.Fatalf("removal of document %d removed nothing: %q", doc, src)
		}
	})
}
