package yamledit

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"
)

// FuzzEdit sets a scalar on an existing or new path and checks that the result
// parses, the value reads back, and no line outside the edit changed.
//
// With src empty, the document is generated from seed (nested mappings,
// sequences, comments, blank lines, quoting and block scalars, flow collections,
// anchors, several documents, CRLF, no final newline) and the path is chosen from
// it: then the edit must succeed. With src given (mutated golden inputs), errors
// are allowed but the edit check must never fail and nothing may panic.
func FuzzEdit(f *testing.F) {
	for i, tc := range goldenCases {
		src, err := os.ReadFile(filepath.Join("testdata", tc.name, "input.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, int64(i), "spec.replicas", "4", uint8(tc.doc))
		f.Add(src, int64(i), "spec.template.spec.containers[name=web].image", "web:2", uint8(tc.doc))
		f.Add(src, int64(i), "metadata.labels.new", "1.27", uint8(tc.doc))
		f.Add([]byte{}, int64(i), "", "value #"+strconv.Itoa(i), uint8(0))
	}
	for _, v := range []string{"", "true", "0123", "a: b", "x\ny", "'q'", "\"dq\"", "-", "é ü", "{a}"} {
		f.Add([]byte{}, int64(len(v)*7919), "", v, uint8(0))
	}
	f.Fuzz(func(t *testing.T, src []byte, seed int64, pathSpec, value string, doc uint8) {
		fuzzEdit(t, src, seed, pathSpec, value, int(doc))
	})
}

func fuzzEdit(t *testing.T, src []byte, seed int64, pathSpec, value string, doc int) {
	generated := len(src) == 0
	var path Path
	if generated {
		if !utf8.ValidString(value) {
			value = strings.ToValidUTF8(value, "?")
		}
		var g *generator
		g, src = generate(seed)
		doc, path = g.pick()
	} else {
		if len(src) > 32<<10 {
			return
		}
		path = parsePath(pathSpec)
		if len(path) == 0 {
			return
		}
	}
	_, existed, lookupErr := Lookup(src, doc, path)
	same := false
	if d, err := documentAt(src, doc); err == nil {
		if n, err := lookupNode(d, path); err == nil && n != nil {
			same = n.Kind == scalarNode && n.ShortTag() == "!!str" && n.Value == value
		}
	}
	// An odd seed also places a new key in sorted order (Op.Sorted), which
	// must keep every property an appended key has.
	res, err := edit(src, doc, []Op{{Path: path, Kind: OpSet, Value: value, Sorted: seed&1 == 1}})
	if err != nil {
		if errors.Is(err, errSelfCheck) || generated {
			t.Fatalf("edit %s = %q:\n%s\nerror: %v", path, value, src, err)
		}
		return
	}
	got, found, err := Lookup(res.out, doc, path)
	if err != nil || !found || got != value {
		t.Fatalf("after setting %s to %q it reads %q (found %v, %v):\n%s", path, value, got, found, err, res.out)
	}
	if _, err := Documents(res.out); err != nil {
		t.Fatalf("result does not parse: %v\n%s", err, res.out)
	}
	checkLocality(t, src, res, existed && lookupErr == nil, same, path)
}

// checkLocality compares the lines of the input and the result. Without
// warnings, a value replaced in place is a one-line change and a new value only
// adds lines. With warnings, the lines outside the warned regions and the final
// edit must be the input's lines, in order (copies made by a restructuring can
// make a line diff pair lines ambiguously, so that case checks a subsequence).
func checkLocality(t *testing.T, src []byte, res *result, existed, same bool, path Path) {
	t.Helper()
	checkLineEndings(t, src, res.out)
	before, after := splitLines(src), splitLines(res.out)
	if n := len(before); n > 0 && !strings.HasSuffix(before[n-1], "\n") {
		// Lines added after a last line without a line break give it one; the
		// final newline itself is checked by checkLineEndings.
		eol := "\n"
		if strings.Contains(string(src), "\r\n") {
			eol = "\r\n"
		}
		before[n-1] += eol
		after[len(after)-1] += eol
	}
	m := difflib.NewMatcher(before, after)
	removed, added := 0, 0
	for _, op := range m.GetOpCodes() {
		if op.Tag != 'e' {
			removed += op.I2 - op.I1
			added += op.J2 - op.J1
		}
	}
	fail := func(why string) {
		t.Fatalf("%s (set %s; removed %d, added %d, warnings %v):\n%s", why, path, removed, added, res.publicWarnings(), unifiedDiff(src, res.out))
	}
	if len(res.warnings) == 0 {
		switch {
		case same && (removed != 0 || added != 0):
			fail("setting the same value changed the file")
		case existed && (removed > 1 || added > 1):
			fail("replacing a scalar changed more than one line")
		case !existed && removed > 1:
			// Only a collection written on one line ({} or [a, b]) has its
			// line changed by an addition.
			fail("adding a value removed lines")
		}
		return
	}
	allowed := append([]span{}, res.warnings...)
	allowed = append(allowed, res.regions[len(res.regions)-1])
	next := 0
	for i, line := range after {
		inside := false
		for _, s := range allowed {
			if first, last := res.lines(s); i+1 >= first && i+1 <= last {
				inside = true
				break
			}
		}
		if inside {
			continue
		}
		for next < len(before) && before[next] != line {
			next++
		}
		if next == len(before) {
			fail(fmt.Sprintf("line %d %q changed outside warned regions", i+1, line))
		}
		next++
	}
}

// parsePath reads "a.b[0].c[name=x]".
func parsePath(spec string) Path {
	var p Path
	for _, part := range strings.Split(spec, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			p = append(p, K(key))
		}
		for rest != "" {
			sel, after, ok := strings.Cut(rest, "]")
			if !ok {
				return nil
			}
			if f, v, isMatch := strings.Cut(sel, "="); isMatch {
				p = append(p, M(f, v))
			} else if i, err := strconv.Atoi(sel); err == nil && i >= 0 && i < 1000 {
				p = append(p, I(i))
			} else {
				return nil
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return p
}

// generator writes random YAML the way people write manifests, remembering the
// paths of its scalars and mappings.
type generator struct {
	r         *rand.Rand
	b         strings.Builder
	unit      int
	seqIndent int
	itemOff   int
	doc       int
	anchors   int
	scalars   [][]Path // per document
	mappings  [][]Path // per document, block or flow mappings that can take a key
	items     [][]Path // per document, sequences of named mappings
}

func generate(seed int64) (*generator, []byte) {
	r := rand.New(rand.NewSource(seed))
	g := &generator{r: r, unit: 2 + r.Intn(3), seqIndent: r.Intn(2) * 2, itemOff: 2 + r.Intn(2)*2}
	docs := 1 + r.Intn(3)
	if r.Intn(3) == 0 {
		g.b.WriteString("# stream comment\n---\n")
	}
	for d := 0; d < docs; d++ {
		g.doc = d
		g.scalars = append(g.scalars, nil)
		g.mappings = append(g.mappings, []Path{{}})
		g.items = append(g.items, nil)
		if d > 0 {
			if r.Intn(4) == 0 {
				g.b.WriteString("...\n")
			}
			g.b.WriteString("---\n")
		}
		g.mapping(0, Path{}, 0)
	}
	out := g.b.String()
	if r.Intn(4) == 0 {
		out = strings.TrimRight(out, "\n")
	}
	if r.Intn(4) == 0 {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return g, []byte(out)
}

// pick chooses a document and a path: an existing scalar, a new key in an
// existing mapping, or a new named item in a sequence.
func (g *generator) pick() (int, Path) {
	d := g.r.Intn(len(g.scalars))
	with := func(p Path, s ...Step) Path { return append(append(Path{}, p...), s...) }
	switch n := g.r.Intn(10); {
	case n < 6 && len(g.scalars[d]) > 0:
		return d, g.scalars[d][g.r.Intn(len(g.scalars[d]))]
	case n < 8 && len(g.items[d]) > 0:
		return d, with(g.items[d][g.r.Intn(len(g.items[d]))], M("name", "added"), K("value"))
	default:
		return d, with(g.mappings[d][g.r.Intn(len(g.mappings[d]))], K("added"), K("deeper"))
	}
}

func (g *generator) line(indent int, s string) {
	g.b.WriteString(pad(indent) + s + "\n")
}

func (g *generator) decorate(indent int) {
	switch g.r.Intn(8) {
	case 0:
		g.b.WriteString("\n")
	case 1:
		g.line(indent, "# note")
	case 2:
		g.line(indent+g.r.Intn(3), "# indented note")
	}
}

var words = []string{"web", "api", "nginx:1.25", "true", "1.27", "0123", "", "a b", "x: y", "é", "3", "null", "~", "it's", "say \"hi\""}

// scalar writes a scalar in a random style, or "" when the style needs lines
// after the key (block scalars), in which case more holds them.
func (g *generator) scalar(indent int) (inline string, more []string) {
	w := words[g.r.Intn(len(words))]
	switch g.r.Intn(7) {
	case 0:
		return "'" + strings.ReplaceAll(w, "'", "''") + "'", nil
	case 1:
		return doubleQuote(w), nil
	case 2:
		return "|", []string{pad(indent+g.unit) + "line one", "", pad(indent+g.unit) + "  line two"}
	case 3:
		return ">-", []string{pad(indent+g.unit) + "folded", pad(indent+g.unit) + "text"}
	case 4:
		return strconv.Itoa(g.r.Intn(100)), nil
	}
	if plainSafe(w, inBlock) {
		return w, nil
	}
	return doubleQuote(w), nil
}

func (g *generator) trailing() string {
	if g.r.Intn(5) == 0 {
		return " # trailing"
	}
	return ""
}

func (g *generator) mapping(indent int, path Path, depth int) {
	keys := 1 + g.r.Intn(4)
	for i := 0; i < keys; i++ {
		g.decorate(indent)
		key := fmt.Sprintf("k%d", i)
		p := append(append(Path{}, path...), K(key))
		kind := g.r.Intn(10)
		if depth >= 3 {
			kind = 0
		}
		switch {
		case kind < 5:
			s, more := g.scalar(indent)
			g.line(indent, key+": "+s+g.trailing())
			for _, m := range more {
				g.b.WriteString(m + "\n")
			}
			g.scalars[g.doc] = append(g.scalars[g.doc], p)
		case kind < 7:
			anchor := ""
			if g.r.Intn(5) == 0 {
				g.anchors++
				anchor = fmt.Sprintf(" &m%d", g.anchors)
			}
			g.line(indent, key+":"+anchor)
			g.mappings[g.doc] = append(g.mappings[g.doc], p)
			g.mapping(indent+g.unit, p, depth+1)
			if anchor != "" {
				g.line(indent, "copy"+anchor[2:]+": *"+anchor[2:])
			}
		case kind < 8:
			g.line(indent, key+": {a: 1, b: x}"+g.trailing())
			g.mappings[g.doc] = append(g.mappings[g.doc], p)
			g.scalars[g.doc] = append(g.scalars[g.doc], append(append(Path{}, p...), K("b")))
		case kind < 9:
			g.line(indent, key+":")
			g.items[g.doc] = append(g.items[g.doc], p)
			dash := indent + g.seqIndent
			for j := 0; j < 1+g.r.Intn(3); j++ {
				g.decorate(dash)
				name := fmt.Sprintf("n%d", j)
				item := append(append(Path{}, p...), M("name", name))
				g.line(dash, "-"+pad(g.itemOff-1)+"name: "+name)
				g.mappings[g.doc] = append(g.mappings[g.doc], item)
				if g.r.Intn(2) == 0 {
					s, more := g.scalar(dash + g.itemOff)
					g.line(dash+g.itemOff, "value: "+s+g.trailing())
					for _, m := range more {
						g.b.WriteString(m + "\n")
					}
					g.scalars[g.doc] = append(g.scalars[g.doc], append(append(Path{}, item...), K("value")))
				}
			}
		default:
			g.line(indent, key+": [1, two, \"3\"]")
			g.scalars[g.doc] = append(g.scalars[g.doc], append(append(Path{}, p...), I(1)))
		}
	}
}

// TestGeneratedEdits runs the generated half of the fuzz target over many seeds
// on every test run, so regressions show without fuzzing.
func TestGeneratedEdits(t *testing.T) {
	values := []string{"v", "true", "1.27", "", "a: b", "x\ny", "it's", "#", "-", "é"}
	for seed := int64(0); seed < 400; seed++ {
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
			fuzzEdit(t, nil, seed, "", values[seed%int64(len(values))], 0)
		})
	}
}
