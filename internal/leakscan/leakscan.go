// Package leakscan finds planted secret values in what a test collected from the
// service: outputs, request bodies, stored rows, log lines. A fixture repository
// plants values of one recognisable form ("kk" and twelve letters or digits) in every
// shape that must be masked; Planted reads them back, so a fixture that grows needs
// no list kept beside it.
package leakscan

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// planted matches a planted value.
var planted = regexp.MustCompile(`kk[A-Za-z0-9]{12}`)

// Planted reads the repository in dir: its files by slash path, and the planted
// values in them, whether in clear or base64-encoded (as a Secret's data holds
// them). It fails the test when fewer than want values are planted: a fixture that
// lost a shape would make every scan pass.
func Planted(t testing.TB, dir string, want int) (map[string]string, *Scanner) {
	t.Helper()
	files := map[string]string{}
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(data)
		texts := []string{string(data)}
		for _, field := range strings.Fields(string(data)) {
			if raw, err := base64.StdEncoding.DecodeString(field); err == nil {
				texts = append(texts, string(raw))
			}
		}
		for _, text := range texts {
			for _, v := range planted.FindAllString(text, -1) {
				seen[v] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < want {
		t.Fatalf("%s plants %d secret values, want %d", dir, len(seen), want)
	}
	s := &Scanner{}
	for v := range seen {
		s.values = append(s.values, v)
	}
	return files, s
}

// Matches reports whether text holds anything of the planted form, for a test
// that must see the real values somewhere (a commit is not masked).
func Matches(text string) bool { return planted.MatchString(text) }

// Scanner reports planted values.
type Scanner struct {
	values []string
}

// Check fails t for every planted value text shows, clear or base64-encoded.
func (s *Scanner) Check(t testing.TB, where, text string) {
	t.Helper()
	for _, v := range s.values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if i := strings.Index(text, form); i >= 0 {
				t.Errorf("%s shows planted secret %s: …%s…", where, v, text[max(0, i-120):min(len(text), i+len(form)+40)])
			}
		}
	}
}

// CheckJSON checks a JSON document as text, and also every string in it that is
// itself a JSON document (a stored payload column) or decodes as base64 (how JSON
// carries a []byte field): a value hidden one encoding deep still counts.
func (s *Scanner) CheckJSON(t testing.TB, where string, doc []byte) {
	t.Helper()
	s.Check(t, where, string(doc))
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		case string:
			var nested any
			if text := strings.TrimSpace(x); (strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[")) && json.Unmarshal([]byte(text), &nested) == nil {
				walk(nested)
				return
			}
			if raw, err := base64.StdEncoding.DecodeString(x); err == nil && len(raw) > 0 {
				s.Check(t, where+" (a base64 string in it)", string(raw))
			}
		}
	}
	walk(v)
}
