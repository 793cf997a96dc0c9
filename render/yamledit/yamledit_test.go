package yamledit

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
)

var update = flag.Bool("update", false, "rewrite testdata/*/expected.yaml from the current output")

var (
	container = Path{K("spec"), K("template"), K("spec"), K("containers")}
)

func containerPath(name string, rest ...Step) Path {
	p := append(append(Path{}, container...), M("name", name))
	return append(p, rest...)
}

// goldenCases: testdata/<name>/input.yaml edited by ops must equal expected.yaml.
var goldenCases = []struct {
	name string
	doc  int
	ops  []Op
	// warnLines are the first lines of the expected warnings, in order.
	warnLines []int
	// changedLines, when set, is how many lines of the input may differ.
	changedLines int
	err          error
}{
	{
		name:         "replicas",
		ops:          []Op{Set(Path{K("spec"), K("replicas")}, 4)},
		changedLines: 1,
	},
	{
		name: "quoted-image-tag",
		ops: []Op{
			Set(containerPath("api", K("image")), "registry.example.com/api:1.5.0"),
			Set(Path{K("spec"), K("template"), K("spec"), K("initContainers"), M("name", "migrate"), K("image")}, "registry.example.com/api-migrate:1.5.0"),
			Set(containerPath("api", K("env"), M("name", "VERSION"), K("value")), "1.5"),
		},
		changedLines: 3,
	},
	{
		name: "crlf",
		ops: []Op{
			Set(Path{K("spec"), K("replicas")}, 2),
			Set(containerPath("web", K("env"), M("name", "LOG_LEVEL"), K("value")), "debug"),
			Set(Path{K("metadata"), K("labels"), K("app")}, "web"),
		},
	},
	{
		name: "comments-blank-lines",
		ops: []Op{
			Set(Path{K("spec"), K("replicas")}, 3),
			Set(containerPath("web", K("image")), "nginx:1.27"),
			Delete(containerPath("web", K("env"), M("name", "OLD_FLAG"))),
			Set(containerPath("web", K("env"), M("name", "TZ"), K("value")), "Europe/Paris"),
			Set(Path{K("metadata"), K("labels"), K("tier")}, "frontend"),
		},
	},
	{
		name:         "multi-doc",
		doc:          3,
		ops:          []Op{Set(Path{K("spec"), K("replicas")}, 5)},
		changedLines: 1,
	},
	{
		name: "env-add-update-delete",
		ops: []Op{
			Set(containerPath("api", K("env"), M("name", "LOG_LEVEL"), K("value")), "debug"),
			Set(containerPath("api", K("env"), M("name", "FEATURE_X")), map[string]any{"value": "true"}),
			Set(containerPath("api", K("env"), M("name", "PORT"), K("value")), "8080"),
			Delete(containerPath("api", K("env"), M("name", "DEPRECATED"))),
			Delete(containerPath("api", K("env"), M("name", "DB_PASSWORD"))),
		},
	},
	{
		name: "resources-add-remove",
		ops: []Op{
			Set(containerPath("db", K("resources"), K("limits"), K("memory")), "1Gi"),
			Set(containerPath("db", K("resources"), K("requests"), K("memory")), "768Mi"),
			Delete(containerPath("db", K("resources"), K("requests"), K("cpu"))),
		},
	},
	{
		name: "insert-missing-mapping",
		ops: []Op{
			Set(Path{K("spec"), K("jobTemplate"), K("spec"), K("template"), K("spec"), K("containers"), M("name", "report"), K("resources"), K("requests"), K("cpu")}, "100m"),
			Set(Path{K("spec"), K("jobTemplate"), K("spec"), K("template"), K("spec"), K("containers"), M("name", "report"), K("env"), M("name", "TZ"), K("value")}, "UTC"),
			Set(Path{K("metadata"), K("labels"), K("team")}, "data"),
		},
	},
	{
		name: "sequence-not-indented",
		ops: []Op{
			Set(containerPath("agent", K("env"), M("name", "NODE"), K("valueFrom"), K("fieldRef"), K("fieldPath")), "spec.nodeName"),
			Set(containerPath("exporter", K("args"), I(1)), "--verbose"),
		},
	},
	{
		name: "sequence-indented",
		ops: []Op{
			Set(containerPath("web", K("env"), M("name", "MODE"), K("value")), "prod"),
			Set(containerPath("web", K("ports"), M("containerPort", "443")), Mapping{{"containerPort", 443}, {"name", "https"}}),
		},
	},
	{
		name: "flow-mapping",
		ops: []Op{
			Set(containerPath("web", K("resources"), K("limits"), K("cpu")), 2),
			Set(containerPath("web", K("resources"), K("requests"), K("cpu")), "500m"),
			Set(Path{K("metadata"), K("labels"), K("app")}, "web2"),
		},
		warnLines: []int{10},
	},
	{
		// A key after a block scalar that ends the file: the scalar strips its
		// trailing breaks so that the new line break is not its own.
		name:      "block-scalar-at-eof",
		ops:       []Op{Set(Path{K("image"), K("tag")}, "1.2.3")},
		warnLines: []int{3},
	},
	{
		// Scalars join and leave one-line flow collections in place; no warning.
		name: "flow-members-in-place",
		ops: []Op{
			Delete(Path{K("resources"), I(2)}),
			Set(Path{K("resources"), I(2)}, "hpa.yaml"),
			Set(Path{K("spec"), K("containers"), M("name", "web"), K("args"), I(2)}, "--verbose"),
			Set(Path{K("spec"), K("containers"), M("name", "web"), K("resources"), K("requests"), K("memory")}, "64Mi"),
			Delete(Path{K("spec"), K("containers"), M("name", "web"), K("resources"), K("limits")}),
			Set(Path{K("images"), M("name", "web"), K("newName")}, "ghcr.io/example/web"),
		},
		changedLines: 4,
	},
	{
		name: "empty-flow-mapping",
		ops: []Op{
			Set(containerPath("web", K("resources"), K("limits"), K("memory")), "256Mi"),
			Set(containerPath("web", K("env"), M("name", "A"), K("value")), "b"),
		},
		warnLines: []int{11, 14},
	},
	{
		name:      "anchor-on-path",
		ops:       []Op{Set(containerPath("web", K("resources"), K("limits"), K("cpu")), "2")},
		warnLines: []int{17},
	},
	{
		name:      "merge-key",
		ops:       []Op{Set(Path{K("containers"), M("name", "job"), K("resources"), K("limits"), K("cpu")}, "4")},
		warnLines: []int{11},
	},
	{
		name: "json-manifest",
		ops: []Op{
			Set(Path{K("spec"), K("replicas")}, 3),
			Set(containerPath("web", K("image")), "web:1.1"),
			Set(containerPath("web", K("env"), M("name", "TZ"), K("value")), "UTC"),
			Delete(containerPath("web", K("env"), M("name", "OLD"))),
			Set(containerPath("web", K("resources"), K("limits"), K("cpu")), "1"),
			Set(Path{K("metadata"), K("labels"), K("app")}, "web"),
		},
		warnLines: []int{6},
	},
	{
		// A member added after members written each on one line is written so.
		name: "json-compact-members",
		ops: []Op{Set(Path{I(2)}, Mapping{
			{Key: "op", Value: "add"},
			{Key: "path", Value: "/metadata/labels/team"},
			{Key: "value", Value: Mapping{{Key: "name", Value: "shop"}}},
		})},
	},
	{
		name: "no-final-newline",
		ops: []Op{
			Set(Path{K("data"), K("retries")}, "5"),
			Set(Path{K("data"), K("timeout")}, "30s"),
		},
	},
	{
		name: "block-scalar",
		ops: []Op{
			Set(Path{K("data"), K("nginx.conf")}, "server {\n  listen 8080;\n}\n"),
			Set(Path{K("data"), K("motd")}, "Hello."),
		},
		warnLines: []int{6, 10},
	},
	{
		name: "delete-not-found",
		ops:  []Op{Delete(Path{K("spec"), K("template"), K("spec")})},
		err:  ErrNotFound,
	},
}

func TestEditGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			input, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := edit(input, tc.doc, tc.ops)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("edit: %v", err)
			}
			expectedPath := filepath.Join(dir, "expected.yaml")
			if *update {
				if err := os.WriteFile(expectedPath, res.out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(expectedPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.out, want) {
				t.Errorf("output differs from %s:\n%s", expectedPath, unifiedDiff(want, res.out))
			}
			var gotLines []int
			for _, w := range res.publicWarnings() {
				gotLines = append(gotLines, w.Line)
				if !strings.Contains(w.Message, "changed shape") {
					t.Errorf("warning %q does not say what changed", w.Message)
				}
			}
			if !equalInts(gotLines, tc.warnLines) {
				t.Errorf("warning lines = %v (%v), want %v", gotLines, res.publicWarnings(), tc.warnLines)
			}
			if tc.changedLines > 0 {
				removed, added := changedLineCounts(input, res.out)
				if removed != tc.changedLines || added != tc.changedLines {
					t.Errorf("diff removes %d and adds %d lines, want %d each:\n%s", removed, added, tc.changedLines, unifiedDiff(input, res.out))
				}
			}
			checkLineEndings(t, input, res.out)
		})
	}
}

// checkLineEndings: a CRLF file stays CRLF everywhere, an LF file gets no CR, and
// the final newline is present exactly when it was.
func checkLineEndings(t *testing.T, before, after []byte) {
	t.Helper()
	crlf := bytes.Count(before, []byte("\r\n"))
	if crlf > 0 && crlf != bytes.Count(before, []byte("\n")) {
		return // mixed line endings: no single style to keep
	}
	for i, line := range bytes.SplitAfter(after, []byte("\n")) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			continue
		}
		if (crlf > 0) != bytes.HasSuffix(line, []byte("\r\n")) {
			t.Errorf("line %d: line ending changed: %q", i+1, line)
		}
	}
	if bytes.HasSuffix(before, []byte("\n")) != bytes.HasSuffix(after, []byte("\n")) {
		t.Errorf("final newline changed")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// splitLines splits after each line feed, keeping the line endings so that a
// changed line ending shows as a changed line.
func splitLines(b []byte) []string {
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// changedLineCounts counts the lines a line diff removes from a and adds in b.
func changedLineCounts(a, b []byte) (removed, added int) {
	m := difflib.NewMatcher(splitLines(a), splitLines(b))
	for _, op := range m.GetOpCodes() {
		if op.Tag != 'e' {
			removed += op.I2 - op.I1
			added += op.J2 - op.J1
		}
	}
	return removed, added
}

func unifiedDiff(a, b []byte) string {
	s, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(a), B: splitLines(b), FromFile: "want", ToFile: "got", Context: 2,
	})
	return s
}

func TestEditErrors(t *testing.T) {
	deployment := []byte("spec:\n  replicas: 1\n  containers:\n  - name: a\n  - name: a\n")
	cases := map[string]struct {
		src  []byte
		doc  int
		op   Op
		want error
	}{
		"delete missing key":      {deployment, 0, Delete(Path{K("spec"), K("paused")}), ErrNotFound},
		"delete through a null":   {[]byte("a:\n"), 0, Delete(Path{K("a"), K("b")}), ErrNotFound},
		"document out of range":   {deployment, 1, Set(Path{K("a")}, 1), ErrNotFound},
		"negative document":       {deployment, -1, Set(Path{K("a")}, 1), ErrNotFound},
		"path crosses a scalar":   {deployment, 0, Set(Path{K("spec"), K("replicas"), K("x")}, 1), ErrNotMapping},
		"key step on a sequence":  {deployment, 0, Set(Path{K("spec"), K("containers"), K("x")}, 1), ErrNotMapping},
		"ambiguous match":         {deployment, 0, Set(Path{K("spec"), K("containers"), M("name", "a"), K("image")}, "x"), ErrAmbiguous},
		"index past the end":      {deployment, 0, Set(Path{K("spec"), K("containers"), I(5)}, "x"), ErrNotFound},
		"matched item not a map":  {deployment, 0, Set(Path{K("spec"), K("containers"), M("name", "b")}, "x"), ErrNotMapping},
		"empty document":          {[]byte("# nothing\n"), 0, Set(Path{K("a")}, 1), ErrNotFound},
		"utf-16 file":             {[]byte{0xFF, 0xFE, 'a', 0}, 0, Set(Path{K("a")}, 1), ErrUnsupported},
		"lone carriage return":    {[]byte("a: 1\rb: 2\n"), 0, Set(Path{K("a")}, 2), ErrUnsupported},
		"invalid utf-8 value":     {deployment, 0, Set(Path{K("spec"), K("x")}, "\xff"), ErrUnsupported},
		"unsupported value type":  {deployment, 0, Set(Path{K("spec"), K("x")}, struct{}{}), ErrUnsupported},
		"duplicate key":           {[]byte("a: 1\na: 2\n"), 0, Set(Path{K("a")}, 3), ErrAmbiguous},
		"delete a merged key":     {[]byte("d: &d\n  x: 1\ne:\n  <<: *d\n"), 0, Delete(Path{K("e"), K("x")}), ErrUnsupported},
		"empty document in a set": {[]byte("---\n---\na: 1\n"), 0, Set(Path{K("a")}, 1), ErrNotMapping},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, _, err := Edit(tc.src, tc.doc, tc.op)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if out != nil {
				t.Errorf("output returned with an error: %q", out)
			}
		})
	}
}

// billionLaughs nests ten aliases ten deep: 10^10 nodes when expanded.
func billionLaughs() []byte {
	var b strings.Builder
	b.WriteString("l00: &l00 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 10; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%02d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "l%02d: &l%02d [%s]\n", i, i, refs)
	}
	b.WriteString("kind: ConfigMap\n")
	return []byte(b.String())
}

func TestAliasBomb(t *testing.T) {
	src := billionLaughs()
	start := time.Now()
	if _, err := Documents(src); !errors.Is(err, ErrAliasBomb) {
		t.Errorf("Documents error = %v, want ErrAliasBomb", err)
	}
	if _, _, err := Edit(src, 0, Set(Path{K("kind")}, "Secret")); !errors.Is(err, ErrAliasBomb) {
		t.Errorf("Edit error = %v, want ErrAliasBomb", err)
	}
	// Lookup does not expand aliases, so it answers without the bound.
	if v, ok, err := Lookup(src, 0, Path{K("kind")}); err != nil || !ok || v != "ConfigMap" {
		t.Errorf("Lookup = %q %v %v", v, ok, err)
	}
	t.Logf("refused in %s", time.Since(start))
}

func TestDocuments(t *testing.T) {
	src, err := os.ReadFile("testdata/multi-doc/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Documents(src)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		line  int
		empty bool
		kind  any
		name  any
	}
	want := []summary{
		{2, false, "Service", "web"},
		{11, false, "Deployment", "web"},
		{19, true, nil, nil},
		{20, false, "Deployment", "worker"},
	}
	if len(docs) != len(want) {
		t.Fatalf("got %d documents, want %d: %+v", len(docs), len(want), docs)
	}
	for i, d := range docs {
		got := summary{line: d.Line, empty: d.Empty}
		if d.Object != nil {
			got.kind = d.Object["kind"]
			got.name = d.Object["metadata"].(map[string]any)["name"]
		}
		if d.Index != i || got != want[i] {
			t.Errorf("document %d = %+v (index %d), want %+v", i, got, d.Index, want[i])
		}
	}
	if replicas := docs[3].Object["spec"].(map[string]any)["replicas"]; replicas != 1 {
		t.Errorf("replicas decoded as %#v, want int 1", replicas)
	}
}

func TestLookup(t *testing.T) {
	src := []byte("a: &x\n  b: \"1.27\"\n  c: [1, 2]\nd:\n  <<: *x\ne: *x\n")
	cases := map[string]struct {
		path  Path
		want  string
		found bool
		err   error
	}{
		"quoted scalar":      {Path{K("a"), K("b")}, "1.27", true, nil},
		"flow item":          {Path{K("a"), K("c"), I(1)}, "2", true, nil},
		"through merge":      {Path{K("d"), K("b")}, "1.27", true, nil},
		"through alias":      {Path{K("e"), K("b")}, "1.27", true, nil},
		"missing":            {Path{K("a"), K("z")}, "", false, nil},
		"index past the end": {Path{K("a"), K("c"), I(2)}, "", false, nil},
		"collection":         {Path{K("a")}, "", false, ErrNotMapping},
		"through a scalar":   {Path{K("a"), K("b"), K("c")}, "", false, ErrNotMapping},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, found, err := Lookup(src, 0, tc.path)
			if !errors.Is(err, tc.err) || got != tc.want || found != tc.found {
				t.Errorf("Lookup = %q %v %v, want %q %v %v", got, found, err, tc.want, tc.found, tc.err)
			}
		})
	}
}

// TestScalarQuoting: every value reads back as the same string, and is written
// plain only when that is safe (also for YAML 1.1 readers, which Kubernetes uses).
func TestScalarQuoting(t *testing.T) {
	cases := map[string]struct {
		value any
		want  string
	}{
		"plain string":      {"nginx:1.27", "v: nginx:1.27\n"},
		"version number":    {"1.27", "v: \"1.27\"\n"},
		"boolean word":      {"true", "v: \"true\"\n"},
		"yaml 1.1 boolean":  {"yes", "v: \"yes\"\n"},
		"octal looking":     {"0123", "v: \"0123\"\n"},
		"empty":             {"", "v: \"\"\n"},
		"colon space":       {"a: b", "v: \"a: b\"\n"},
		"hash":              {"a #b", "v: \"a #b\"\n"},
		"null word":         {"null", "v: \"null\"\n"},
		"newline":           {"a\nb", "v: \"a\\nb\"\n"},
		"control character": {"a\x7fb", "v: \"a\\u007fb\"\n"},
		"forced quote":      {Quoted("web"), "v: \"web\"\n"},
		"int":               {8080, "v: 8080\n"},
		"bool":              {false, "v: false\n"},
		"float":             {2.0, "v: 2.0\n"},
		"nil":               {nil, "v: null\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, _, err := Edit([]byte("v: x\n"), 0, Set(Path{K("v")}, tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got %q, want %q", out, tc.want)
			}
			if s, ok := tc.value.(string); ok {
				if got, _, err := Lookup(out, 0, Path{K("v")}); err != nil || got != s {
					t.Errorf("reads back as %q (%v), want %q", got, err, s)
				}
			}
		})
	}
}

func TestQuoteStyleKept(t *testing.T) {
	cases := map[string]struct{ src, value, want string }{
		"single stays single":       {"v: 'a'\n", "it's", "v: 'it''s'\n"},
		"double stays double":       {"v: \"a\"\n", "b", "v: \"b\"\n"},
		"plain stays plain":         {"v: a\n", "b", "v: b\n"},
		"single with a newline":     {"v: 'a'\n", "x\ny", "v: \"x\\ny\"\n"},
		"document prefers single":   {"a: 'x'\nb: 'y'\nv: a\n", "true", "a: 'x'\nb: 'y'\nv: 'true'\n"},
		"flow needs quoting commas": {"v: [a, b]\n", "c,d", "v: [a, \"c,d\"]\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Path{K("v")}
			if strings.HasPrefix(tc.src, "v: [") {
				p = Path{K("v"), I(1)}
			}
			out, _, err := Edit([]byte(tc.src), 0, Set(p, tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got %q, want %q", out, tc.want)
			}
		})
	}
}

// TestParseErrorsNameTabs: a line indented with a tab is named, whichever of
// its two errors the parser gives and whichever line it counts; documents count
// from 1, as every other message does.
func TestParseErrorsNameTabs(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"a key":                 {"a: 1\n---\nkind: Deployment\nmetadata:\n\tname: x\n", "parse document 2: yaml: line 5: found character that cannot start any token (line 5 is indented with a tab; YAML indents with spaces only)"},
		"a list item's field":   {"spec:\n  - name: web\n\t  image: nginx\n", "(line 3 is indented with a tab; YAML indents with spaces only)"},
		"a tab inside a scalar": {"a: \"x\ty\"\nb: [\n", "parse document 1: yaml: line 2: did not find expected node content"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Documents([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if name == "a tab inside a scalar" && strings.Contains(err.Error(), "indented with a tab") {
				t.Errorf("error %v blames a tab that indents nothing", err)
			}
		})
	}
}
