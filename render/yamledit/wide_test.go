package yamledit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func wideMapping(keys int) string {
	var b strings.Builder
	for i := range keys {
		fmt.Fprintf(&b, "key%03d: v%d\n", i, i)
	}
	return b.String()
}

// TestWideMappings checks the keyed lookups of large mappings: duplicates are
// still found, merged keys still lose to the mapping's own, and an edit that
// removes one key and adds another reads back as requested.
func TestWideMappings(t *testing.T) {
	if _, err := Documents([]byte(wideMapping(100) + "key050: again\n")); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("duplicate key in a wide mapping: %v, want ErrAmbiguous", err)
	}

	var merged strings.Builder
	merged.WriteString("base: &b\n")
	for i := range 40 {
		fmt.Fprintf(&merged, "  k%02d: base\n", i)
	}
	merged.WriteString("m:\n  <<: *b\n  k05: own\n")
	docs, err := Documents([]byte(merged.String()))
	if err != nil {
		t.Fatal(err)
	}
	m := docs[0].Object["m"].(map[string]any)
	if len(m) != 40 || m["k05"] != "own" || m["k39"] != "base" {
		t.Fatalf("merged wide mapping: %d keys, k05=%v k39=%v", len(m), m["k05"], m["k39"])
	}

	src := []byte(wideMapping(40))
	out, _, err := Edit(src, 0, Delete(Path{K("key010")}), Set(Path{K("added")}, "x"), Set(Path{K("key020")}, "changed"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err = Documents(out)
	if err != nil {
		t.Fatal(err)
	}
	got := docs[0].Object
	if _, ok := got["key010"]; ok || got["added"] != "x" || got["key020"] != "changed" || got["key039"] != "v39" || len(got) != 40 {
		t.Fatalf("edited wide mapping reads back as %v", got)
	}
}
