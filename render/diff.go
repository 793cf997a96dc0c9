package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	sigsyaml "sigs.k8s.io/yaml"
)

const diffContext = 3

// unifiedHunks writes the hunks of a unified diff between two line lists (each line
// keeping its ending), marking a last line without a newline as git does.
func unifiedHunks(b *strings.Builder, a, c []string) { shownHunks(b, a, c, a, c) }

// shownHunks writes the hunks of the diff between the line lists a and c as the
// lines shownA and shownC show them, line for line: a masked file's hunks are
// those of its real lines, so a change of a secret value alone shows its line
// changed, its value replaced on both sides, instead of no hunk at all.
func shownHunks(b *strings.Builder, a, c, shownA, shownC []string) {
	m := difflib.NewMatcher(a, c)
	for _, group := range m.GetGroupedOpCodes(diffContext) {
		first, last := group[0], group[len(group)-1]
		fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(first.I1, last.I2), hunkRange(first.J1, last.J2))
		for _, op := range group {
			switch op.Tag {
			case 'e':
				writeLines(b, " ", shownA, op.I1, op.I2)
			case 'r', 'd', 'i':
				writeLines(b, "-", shownA, op.I1, op.I2)
				writeLines(b, "+", shownC, op.J1, op.J2)
			}
		}
	}
}

func writeLines(b *strings.Builder, prefix string, lines []string, from, to int) {
	for i := from; i < to; i++ {
		b.WriteString(prefix)
		b.WriteString(lines[i])
		if !strings.HasSuffix(lines[i], "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, stop int) string {
	n := stop - start
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	default:
		return fmt.Sprintf("%d,%d", start+1, n)
	}
}

// gitDiff renders the edits as one git-style unified diff, secret values masked.
// roles says which edited files kustomize generators read (see generatorRoles).
func gitDiff(edits []FileEdit, roles map[string]sourceRole) string {
	var b strings.Builder
	for _, e := range edits {
		role := roles[e.Path]
		fmt.Fprintf(&b, "diff --git a/%s b/%s\n", e.Path, e.Path)
		switch {
		case e.Created:
			b.WriteString("new file mode 100644\n--- /dev/null\n")
		case e.New == nil:
			b.WriteString("deleted file mode 100644\n")
			fmt.Fprintf(&b, "--- a/%s\n", e.Path)
		default:
			fmt.Fprintf(&b, "--- a/%s\n", e.Path)
		}
		if e.New == nil && !e.Created {
			b.WriteString("+++ /dev/null\n")
		} else {
			fmt.Fprintf(&b, "+++ b/%s\n", e.Path)
		}
		shownA, shownC := maskFileLines(e.Old, role), maskFileLines(e.New, role)
		if a, c := splitLines(e.Old), splitLines(e.New); len(a) == len(shownA) && len(c) == len(shownC) {
			shownHunks(&b, a, c, shownA, shownC)
		} else {
			// Masking keeps line counts; were it ever not to, the masked lines'
			// own diff is the one that cannot show a value.
			unifiedHunks(&b, shownA, shownC)
		}
	}
	return b.String()
}

// objectDiff describes how one object (k, as Argo CD applies it) changes between
// two renders, masked.
func objectDiff(app string, k objKey, before, after *object) ObjectDiff {
	ref := after
	if ref == nil {
		ref = before
	}
	d := ObjectDiff{App: app, APIVersion: ref.apiVersion, Kind: ref.kind, Namespace: k.Namespace, Name: ref.name}
	group := groupOf(ref.apiVersion)
	var a, c map[string]any
	switch {
	case before == nil:
		d.Action = "added"
		c = maskBody(group, ref.kind, after.body)
	case after == nil:
		d.Action = "removed"
		a = maskBody(group, ref.kind, before.body)
	default:
		d.Action = "modified"
		a = maskBody(group, ref.kind, before.body)
		c = maskBody(group, ref.kind, after.body)
	}
	if d.Action == "modified" {
		// The changes are those of the objects themselves, each shown masked: a
		// change of a masked value alone (a Secret's data, a custom resource's
		// password) is listed with its value replaced on both sides, where the
		// masked objects do not differ there at all.
		var diffs []difference
		compareValues(nil, before.body, after.body, &diffs, 50)
		for _, df := range diffs {
			d.Changes = append(d.Changes, FieldChange{Path: df.path(),
				Before: changeText(maskValueAt(group, ref.kind, df.segs, df.want)), After: changeText(maskValueAt(group, ref.kind, df.segs, df.got))})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s (live after the current commit)\n+++ %s (after this change)\n", ref.kind+"/"+ref.name, ref.kind+"/"+ref.name)
	unifiedHunks(&b, yamlLines(a), yamlLines(c))
	d.Diff = b.String()
	return d
}

func yamlLines(m map[string]any) []string {
	if m == nil {
		return nil
	}
	out, err := sigsyaml.Marshal(m)
	if err != nil {
		return []string{fmt.Sprintf("# cannot show object: %v\n", err)}
	}
	return splitLines(out)
}

// changeText is a field change's value (masked already) on one line: a string of
// several lines (a config file, an Application's helm values) quoted, its line
// breaks escaped. Free text keeps flowText, whose values the scrubbing of secret
// values finds line by line.
func changeText(v any) string {
	if s, ok := v.(string); ok && strings.ContainsAny(s, "\n\r") {
		return strconv.Quote(s)
	}
	return flowText(v)
}

// flowText shows a value on one line.
func flowText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case absent:
		return ""
	case string:
		return x
	case map[string]any, []any:
		out, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(out)
	}
	return fmt.Sprint(v)
}

// typedText is a value with its type, for values whose text alone is ambiguous
// (the string "false" and the boolean false).
func typedText(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x) + " (a string)"
	case bool:
		return fmt.Sprintf("%v (a boolean)", x)
	case int64, float64:
		return fmt.Sprintf("%v (a number)", x)
	case nil:
		return "null"
	}
	return flowText(v)
}

// jsonTyped is a decoded JSON value after the name of its JSON type ("number 3",
// "boolean false", "object {"a":1}"), for a refusal of a value of the wrong type.
func jsonTyped(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + strconv.Quote(x)
	case bool:
		return "boolean " + flowText(x)
	case int64, float64, json.Number:
		return "number " + flowText(x)
	case []any:
		return "array " + flowText(x)
	case map[string]any:
		return "object " + flowText(x)
	}
	return flowText(v)
}

// notAString refuses v where only a string is taken, naming the field at: a
// number or a boolean with the string that spells it, which is most often what
// was meant ("3", "true").
func notAString(at string, v any) error {
	switch v.(type) {
	case bool, int64, float64, json.Number:
		return fmt.Errorf("%s: must be a string, got %s; give the string %s", at, jsonTyped(v), strconv.Quote(flowText(v)))
	}
	return fmt.Errorf("%s: must be a string, got %s", at, jsonTyped(v))
}

// absent marks a missing field in a difference.
type absent struct{}

// difference is one field where two objects disagree.
type difference struct {
	segs      []string
	want, got any
}

func (d difference) path() string {
	var b strings.Builder
	for i, s := range d.segs {
		if strings.HasPrefix(s, "[") {
			b.WriteString(s)
			continue
		}
		if i > 0 && s != "(order)" {
			b.WriteString(".")
		}
		if s == "(order)" {
			s = " (order)"
		}
		b.WriteString(s)
	}
	if b.Len() == 0 {
		return "(object)"
	}
	return b.String()
}

// compareValues appends the differences between want and got, up to limit.
func compareValues(segs []string, want, got any, out *[]difference, limit int) {
	comparer{limit: limit}.compare(segs, want, got, out)
}

// comparer compares two normalized values field by field. Lists whose items all
// carry a unique name (containers, env, ports, volumes) are compared by name, and
// their order is part of the comparison (env order decides what $(VAR) references
// see).
type comparer struct {
	limit int
}

// compare walks both values depth first; segs is the path so far, shared between
// calls and copied only into a recorded difference.
func (c comparer) compare(segs []string, want, got any, out *[]difference) {
	if len(*out) >= c.limit || equalValues(want, got) {
		return
	}
	child := func(s string) []string { return append(segs, s) }
	wm, wIsMap := want.(map[string]any)
	gm, gIsMap := got.(map[string]any)
	if wIsMap && gIsMap {
		keys := make(map[string]bool, len(wm)+len(gm))
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			wv, wok := wm[k]
			gv, gok := gm[k]
			switch {
			case !wok:
				*out = append(*out, difference{segs: clonePath(child(k)), want: absent{}, got: gv})
			case !gok:
				*out = append(*out, difference{segs: clonePath(child(k)), want: wv, got: absent{}})
			default:
				c.compare(child(k), wv, gv, out)
			}
			if len(*out) >= c.limit {
				return
			}
		}
		return
	}
	wl, wIsList := want.([]any)
	gl, gIsList := got.([]any)
	if wIsList && gIsList {
		wn, wok := namedItems(wl)
		gn, gok := namedItems(gl)
		if wok && gok {
			c.compareNamed(segs, wl, gl, wn, gn, out)
			return
		}
		if len(wl) == len(gl) {
			for i := range wl {
				c.compare(child(itemLabel(wl[i], i)), wl[i], gl[i], out)
				if len(*out) >= c.limit {
					return
				}
			}
			return
		}
	}
	if !wIsMap && !wIsList && !gIsMap && !gIsList && equalScalar(want, got) {
		return
	}
	*out = append(*out, difference{segs: clonePath(segs), want: want, got: got})
}

// equalValues reports whether two normalized values are equal, without allocating:
// the fast path of every comparison, since most objects do not change.
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		if _, isMap := b.(map[string]any); isMap {
			return false
		}
		if _, isList := b.([]any); isList {
			return false
		}
		return equalScalar(a, b)
	}
}

func clonePath(segs []string) []string {
	return append([]string(nil), segs...)
}

func (c comparer) compareNamed(segs []string, wl, gl []any, wn, gn []string, out *[]difference) {
	child := func(s string) []string { return append(segs, s) }
	gIndex := make(map[string]int, len(gn))
	for i, n := range gn {
		gIndex[n] = i
	}
	wIndex := make(map[string]int, len(wn))
	for i, n := range wn {
		wIndex[n] = i
	}
	for i, n := range wn {
		j, ok := gIndex[n]
		if !ok {
			*out = append(*out, difference{segs: clonePath(child("[name=" + n + "]")), want: wl[i], got: absent{}})
		} else {
			c.compare(child("[name="+n+"]"), wl[i], gl[j], out)
		}
		if len(*out) >= c.limit {
			return
		}
	}
	for j, n := range gn {
		if _, ok := wIndex[n]; !ok {
			*out = append(*out, difference{segs: clonePath(child("[name=" + n + "]")), want: absent{}, got: gl[j]})
		}
	}
	order := func(names []string, other map[string]int) []string {
		var kept []string
		for _, n := range names {
			if _, both := other[n]; both {
				kept = append(kept, n)
			}
		}
		return kept
	}
	wo, gotOrder := order(wn, gIndex), order(gn, wIndex)
	if strings.Join(wo, "\x00") != strings.Join(gotOrder, "\x00") && len(*out) < c.limit {
		*out = append(*out, difference{segs: clonePath(child("(order)")), want: wo, got: gotOrder})
	}
}

// namedItems returns the names of a list whose items are maps with unique names.
func namedItems(l []any) ([]string, bool) {
	if len(l) == 0 {
		return nil, false
	}
	names := make([]string, 0, len(l))
	seen := make(map[string]bool, len(l))
	for _, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return nil, false
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, true
}

func itemLabel(item any, i int) string {
	if m, ok := item.(map[string]any); ok {
		if n, ok := m["name"].(string); ok {
			return fmt.Sprintf("[name=%s]", n)
		}
	}
	return fmt.Sprintf("[%d]", i)
}

func equalScalar(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// describeDifferences turns differences into masked, readable lines.
func describeDifferences(o *object, diffs []difference) []string {
	group := groupOf(o.apiVersion)
	var lines []string
	for _, d := range diffs {
		want, got := d.want, d.got
		want, got = maskValueAt(group, o.kind, d.segs, want), maskValueAt(group, o.kind, d.segs, got)
		var msg string
		switch {
		case isAbsent(want):
			msg = fmt.Sprintf("%s: unexpected field (rendered %s)", d.path(), flowText(got))
		case isAbsent(got):
			msg = fmt.Sprintf("%s: missing (expected %s)", d.path(), flowText(want))
		case flowText(want) == flowText(got):
			// Values that print alike differ in type: say which.
			msg = fmt.Sprintf("%s: expected %s, rendered %s", d.path(), typedText(want), typedText(got))
		default:
			msg = fmt.Sprintf("%s: expected %s, rendered %s", d.path(), flowText(want), flowText(got))
		}
		lines = append(lines, msg)
	}
	return lines
}

func isAbsent(v any) bool {
	_, ok := v.(absent)
	return ok
}
