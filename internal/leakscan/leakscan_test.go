package leakscan

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

// recorder collects the failures a scan reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}

func TestScannerFindsValuesOneEncodingDeep(t *testing.T) {
	dir := t.TempDir()
	secret := "kkAbCdEf123456"
	other := "kkZyXwVu987654"
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte("data:\n  a: "+base64.StdEncoding.EncodeToString([]byte(other))+"\nb: "+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, s := Planted(t, dir, 2)
	if len(files) != 1 || len(s.values) != 2 {
		t.Fatalf("planted %v from %v", s.values, files)
	}
	payload := `{"edits":[{"new":"` + base64.StdEncoding.EncodeToString([]byte("x:"+secret)) + `"}]}`
	for name, tc := range map[string]struct {
		doc   string
		found bool
	}{
		"clean":                     {`{"diff":"b: [redacted]"}`, false},
		"clear":                     {`{"diff":"b: ` + secret + `"}`, true},
		"base64 of the value":       {`{"data":"` + base64.StdEncoding.EncodeToString([]byte(other)) + `"}`, true},
		"base64 of a file with it":  {payload, true},
		"a JSON column holding one": {`{"payload":` + quote(payload) + `}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			s.CheckJSON(r, name, []byte(tc.doc))
			if found := len(r.errors) > 0; found != tc.found {
				t.Errorf("found a planted value in %s: %v, want %v", tc.doc, found, tc.found)
			}
		})
	}
}

func quote(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}
