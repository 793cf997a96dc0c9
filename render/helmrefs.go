package render

import (
	"maps"
	"path"
	"slices"
	"strings"
	"text/template/parse"

	"gopkg.in/yaml.v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// A chart often reads a values key that no values file sets and its defaults
// leave out ({{- with .Values.ingress.annotations }}): nothing holds what it
// renders there, so matching leaves finds no key, yet a person adds one to the
// app's last values file. The keys a chart's templates read are found by
// parsing them as Helm's engine does (text/template), then tried as new keys
// after every other candidate; rendering decides which one is right.

// Bounds of the template reading: a chart's files are bounded already (see
// loadChart), but a hostile one can still hold many large templates whose
// parse the plan does not need whole.
const (
	// maxRefTemplateBytes is how much template text one plan parses.
	maxRefTemplateBytes = 4 << 20
	// maxValuesRefs is how many distinct .Values paths are collected.
	maxValuesRefs = 512
	// maxRefSegments is the longest .Values path kept.
	maxRefSegments = 16
	// maxRefNesting bounds the nesting of the parse tree walked, and of the
	// subcharts.
	maxRefNesting = 64
	// maxUnreadKeyGuesses is how many such keys one change tries.
	maxUnreadKeyGuesses = 8
	// maxTemplateActions is how many actions ({{ }}) one template parsed may
	// hold: text/template's parse looks a variable up among all those in
	// scope, and recurses once per nesting, so a template's parse costs as
	// many variables as it declares times as many as it uses, and a stack as
	// deep as it nests.
	maxTemplateActions = 4096
	// maxRefActions is how many actions the templates one plan parses hold
	// together.
	maxRefActions = 1 << 16
)

// valuesRef is a .Values path a chart's templates read, from the top of the
// app's values (a subchart's under the key its parent gives it).
type valuesRef struct {
	path []string
	// rank orders the refs: 0 in a template that writes the target's kind, 1
	// elsewhere in the chart of such a template, 2 in another chart. The
	// render does not say which file wrote an object; a kind: line does.
	rank int
}

// refBudget is what is left of the bounds of one plan's template reading.
type refBudget struct {
	bytes   int
	refs    int
	actions int
}

func newRefBudget() refBudget {
	return refBudget{bytes: maxRefTemplateBytes, refs: maxValuesRefs, actions: maxRefActions}
}

// refValue is what dot or a variable holds at a place of a template, or what
// a pipeline yields: the top of the template's data (.Values.x reads x), a values path
// (.Values.ingress, dot inside a with of it), or not known (an item of a
// range, what a function returns).
type refValue struct {
	known  bool
	values bool
	path   []string
}

var rootDot = refValue{known: true}

// field is what v.f.g reads: a values path from the top of the data through
// Values, or under a values path; not known past maxRefSegments.
func (v refValue) field(idents ...string) refValue {
	switch {
	case !v.known || len(idents) == 0:
		return v
	case !v.values:
		if idents[0] != "Values" {
			return refValue{}
		}
		return refValue{known: true, values: true}.field(idents[1:]...)
	case len(v.path)+len(idents) > maxRefSegments:
		return refValue{}
	}
	return refValue{known: true, values: true, path: append(slices.Clone(v.path), idents...)}
}

// chartValuesRefs collects the .Values paths the templates of ch and of its
// subcharts subs (those it vendors, and those fetched for it) read, in template
// order, each once. prefix is ch's key in the app's values (nil for the app's
// chart); kind is the target's.
func chartValuesRefs(ch *chart.Chart, subs []*chart.Chart, prefix []string, kind string, budget *refBudget, depth int) []valuesRef {
	if ch == nil || depth > maxRefNesting {
		return nil
	}
	var out []valuesRef
	writesKind := false
	var files []templateText
	var ranks []int
	for _, f := range ch.Templates {
		if f == nil || !strings.HasPrefix(f.Name, "templates/") {
			continue
		}
		if budget.bytes -= len(f.Data); budget.bytes < 0 {
			// Out of budget: the refs read so far keep their rank (below),
			// and no subchart is read.
			break
		}
		rank := 1
		if writesKindLine(f.Data, kind) {
			rank, writesKind = 0, true
		}
		files = append(files, templateText{name: path.Join(ch.ChartFullPath(), f.Name), text: string(f.Data)})
		ranks = append(ranks, rank)
	}
	for i, paths := range templatesValuesPaths(files, budget) {
		for _, p := range paths {
			out = append(out, valuesRef{path: scopedPath(prefix, p), rank: ranks[i]})
		}
	}
	if !writesKind {
		for i := range out {
			out[i].rank = 2
		}
	}
	if budget.bytes < 0 {
		return out
	}
	keys := subchartKeys(ch.Metadata.Dependencies)
	walked := map[string]bool{}
	for _, sub := range subs {
		// A chart the parent depends on under two aliases is one chart,
		// read under each of its keys.
		if sub == nil || walked[sub.Name()] {
			continue
		}
		walked[sub.Name()] = true
		for _, key := range keys(sub.Name()) {
			out = append(out, chartValuesRefs(sub, sub.Dependencies(), append(slices.Clone(prefix), key), kind, budget, depth+1)...)
		}
	}
	return out
}

// scopedPath is where a subchart's .Values path p is in the app's values: under
// the subchart's key, but for globals, which Helm copies down from the top.
func scopedPath(prefix, p []string) []string {
	if len(prefix) > 0 && p[0] == "global" {
		return p
	}
	return append(slices.Clone(prefix), p...)
}

// writesKindLine reports whether a template writes objects of kind: a line
// "kind: Ingress", quoted or not.
func writesKindLine(data []byte, kind string) bool {
	if kind == "" {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "kind:")
		if ok && strings.Trim(strings.TrimSpace(v), `"'`) == kind {
			return true
		}
	}
	return false
}

// templateText is a template file of a chart: its name and its text.
type templateText struct{ name, text string }

// templateValuesPaths is templatesValuesPaths of one file.
func templateValuesPaths(name, text string, budget *refBudget) [][]string {
	return templatesValuesPaths([]templateText{{name: name, text: text}}, budget)[0]
}

// templatesValuesPaths parses the template files of a chart as Helm's engine does
// (its functions are not checked: Helm's are not known here) and returns the
// .Values paths each reads, in order; none for a file that does not parse, which
// the render reports, or holds more actions than the bounds leave. A define of
// any of them is read where a file includes it, with the dot it is given.
func templatesValuesPaths(files []templateText, budget *refBudget) [][][]string {
	parsed := make([]map[string]*parse.Tree, len(files))
	defines := map[string]*parse.Tree{}
	for i, f := range files {
		// Every action opens with "{{" (Helm keeps text/template's delimiters),
		// so their count bounds the actions whatever strings and comments hide.
		actions := strings.Count(f.text, "{{")
		if actions > maxTemplateActions || actions > budget.actions {
			continue
		}
		budget.actions -= actions
		trees := map[string]*parse.Tree{}
		t := parse.New(f.name)
		t.Mode = parse.SkipFuncCheck
		if _, err := t.Parse(f.text, "", "", trees); err != nil {
			continue
		}
		parsed[i] = trees
		for n, tree := range trees {
			if n != f.name && tree != nil && tree.Root != nil {
				defines[n] = tree
			}
		}
	}
	out := make([][][]string, len(files))
	for i, trees := range parsed {
		if trees == nil {
			continue
		}
		w := refWalker{budget: budget, seen: map[string]bool{}, defines: defines, called: map[string]bool{}}
		// A define's body most often runs with the top of the data as dot
		// (include "x" .): read as the file's own body is. Given a values path
		// (include "x" .Values.ingress), it is read again where it is included.
		for _, n := range slices.Sorted(maps.Keys(trees)) {
			if tree := trees[n]; tree != nil && tree.Root != nil {
				w.vars = []refVariable{{name: "$", value: rootDot}}
				w.walk(tree.Root, rootDot, 0)
			}
		}
		out[i] = w.out
	}
	return out
}

// refWalker collects the .Values paths of a parse tree.
type refWalker struct {
	budget *refBudget
	seen   map[string]bool
	out    [][]string
	// vars are the variables in scope, innermost last: $ and those declared
	// since, as text/template scopes them.
	vars []refVariable
	// defines are the chart's defines by name; called the define and values
	// path pairs read where included, each read once.
	defines map[string]*parse.Tree
	called  map[string]bool
}

// include reads the define named with dot v where a template includes it
// (template "x" v, include "x" v): its fields are then under v's path. The top of
// the data is read already (see templatesValuesPaths), and an unknown dot names
// no path.
func (w *refWalker) include(name string, v refValue, depth int) {
	if !v.values || depth > maxRefNesting {
		return
	}
	tree := w.defines[name]
	key := name + "\x00" + strings.Join(v.path, "\x00")
	if tree == nil || w.called[key] {
		return
	}
	w.called[key] = true
	// A define runs with $ the dot it is given, and none of the caller's
	// variables.
	vars := w.vars
	w.vars = []refVariable{{name: "$", value: v}}
	w.walk(tree.Root, v, depth)
	w.vars = vars
}

// refVariable is a variable of a template and what it holds.
type refVariable struct {
	name  string
	value refValue
}

// variable is what the variable named holds; not known of one out of scope,
// which the parse refuses.
func (w *refWalker) variable(name string) refValue {
	for i := len(w.vars) - 1; i >= 0; i-- {
		if w.vars[i].name == name {
			return w.vars[i].value
		}
	}
	return refValue{}
}

// declare gives the variables a pipeline declares ($x := ...) or assigns
// ($x = ...) the value v.
func (w *refWalker) declare(p *parse.PipeNode, v refValue) {
	for _, d := range p.Decl {
		name := d.Ident[0]
		if !p.IsAssign {
			w.vars = append(w.vars, refVariable{name: name, value: v})
			continue
		}
		for i := len(w.vars) - 1; i >= 0; i-- {
			if w.vars[i].name == name {
				w.vars[i].value = v
				break
			}
		}
	}
}

func (w *refWalker) add(p []string) {
	if len(p) == 0 || len(p) > maxRefSegments || w.budget.refs <= 0 {
		return
	}
	k := strings.Join(p, "\x00")
	if w.seen[k] {
		return
	}
	w.seen[k] = true
	w.budget.refs--
	w.out = append(w.out, slices.Clone(p))
}

// read adds v when it is a values path: what a template reads.
func (w *refWalker) read(v refValue) {
	if v.values {
		w.add(v.path)
	}
}

func (w *refWalker) walk(n parse.Node, dot refValue, depth int) {
	if depth > maxRefNesting || w.budget.refs <= 0 {
		return
	}
	depth++
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			w.walk(c, dot, depth)
		}
	case *parse.ActionNode:
		w.read(w.pipe(x.Pipe, dot, depth))
	case *parse.TemplateNode:
		v := w.pipe(x.Pipe, dot, depth)
		w.read(v)
		w.include(x.Name, v, depth)
	case *parse.IfNode:
		w.branch(&x.BranchNode, dot, func(v refValue) (refValue, refValue) { return dot, v }, depth)
	case *parse.RangeNode:
		// Inside, dot and the variables declared are an item of what is
		// ranged over (and its key or index), which no values path names.
		w.branch(&x.BranchNode, dot, func(refValue) (refValue, refValue) { return refValue{}, refValue{} }, depth)
	case *parse.WithNode:
		w.branch(&x.BranchNode, dot, func(v refValue) (refValue, refValue) { return v, v }, depth)
	}
}

// branch walks an if, range or with: its pipeline and else with the outer dot,
// its body with the dot inner makes of the pipeline's value. The variables its
// pipeline declares hold the item inner makes of it, seen in its body and
// else; those its body declares are seen in its body alone.
func (w *refWalker) branch(b *parse.BranchNode, outer refValue, inner func(refValue) (dot, item refValue), depth int) {
	scope := len(w.vars)
	v := w.pipeValue(b.Pipe, outer, depth)
	w.read(v)
	dot, item := inner(v)
	w.declare(b.Pipe, item)
	body := len(w.vars)
	w.walk(b.List, dot, depth)
	w.vars = w.vars[:body]
	if b.ElseList != nil {
		w.walk(b.ElseList, outer, depth)
	}
	w.vars = w.vars[:scope]
}

// pipe walks a pipeline, declares its variables, and returns its value, which
// it leaves to the caller to read.
func (w *refWalker) pipe(p *parse.PipeNode, dot refValue, depth int) refValue {
	v := w.pipeValue(p, dot, depth)
	if p != nil {
		w.declare(p, v)
	}
	return v
}

// pipeValue walks a pipeline and returns its value: the value of its one
// command, not known of several (what the last returns is up to its
// function: default, toYaml).
func (w *refWalker) pipeValue(p *parse.PipeNode, dot refValue, depth int) refValue {
	if p == nil || depth > maxRefNesting {
		return refValue{}
	}
	if len(p.Cmds) == 1 {
		return w.command(p.Cmds[0], dot, depth+1)
	}
	for _, c := range p.Cmds {
		w.read(w.command(c, dot, depth+1))
	}
	return refValue{}
}

// command walks a command and returns its value: that of its one argument,
// or of an index of string keys (index .Values "ingress" "annotations", as
// Helm's engine runs it: the item each key names, in turn); not known of
// another function's call, whose arguments it reads.
func (w *refWalker) command(c *parse.CommandNode, dot refValue, depth int) refValue {
	if len(c.Args) == 1 {
		return w.operand(c.Args[0], dot, depth)
	}
	args := c.Args
	id, _ := args[0].(*parse.IdentifierNode)
	if id != nil && id.Ident == "include" && len(args) == 3 {
		if s, ok := args[1].(*parse.StringNode); ok {
			v := w.operand(args[2], dot, depth)
			w.read(v)
			w.include(s.Text, v, depth)
			return refValue{}
		}
	}
	if id != nil && id.Ident == "get" && len(args) == 3 {
		// sprig's get .Values.ingress "annotations" reads the key named.
		if s, ok := args[2].(*parse.StringNode); ok {
			if v := w.operand(args[1], dot, depth); v.known {
				return v.field(s.Text)
			}
		}
	}
	if id != nil && id.Ident == "dig" && len(args) > 3 {
		// sprig's dig "ingress" "annotations" (dict) .Values reads the keys
		// named in turn from its last argument, its default before it.
		keys := args[1 : len(args)-2]
		v := w.operand(args[len(args)-1], dot, depth)
		for _, k := range keys {
			s, ok := k.(*parse.StringNode)
			if !ok || !v.known {
				v = refValue{}
				break
			}
			v = v.field(s.Text)
		}
		if v.known {
			w.read(w.operand(args[len(args)-2], dot, depth))
			return v
		}
	}
	if id != nil && id.Ident == "index" && len(args) > 1 {
		v := w.operand(args[1], dot, depth)
		rest := args[2:]
		for len(rest) > 0 {
			s, ok := rest[0].(*parse.StringNode)
			if !ok || !v.known {
				break
			}
			v, rest = v.field(s.Text), rest[1:]
		}
		if len(rest) == 0 {
			return v
		}
		// A key not written out (an item's number, a variable) ends the
		// path: what is indexed is read, whatever the key.
		w.read(v)
		args = rest
	}
	for _, a := range args {
		w.read(w.operand(a, dot, depth))
	}
	return refValue{}
}

// operand is the value of an argument of a command, which it leaves to the
// caller to read: a field, a variable, dot, a field of a parenthesized
// pipeline (whose own value is the chain's base, read as part of it).
func (w *refWalker) operand(n parse.Node, dot refValue, depth int) refValue {
	if depth > maxRefNesting {
		return refValue{}
	}
	switch x := n.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return dot.field(x.Ident...)
	case *parse.VariableNode:
		return w.variable(x.Ident[0]).field(x.Ident[1:]...)
	case *parse.ChainNode:
		return w.operand(x.Node, dot, depth+1).field(x.Field...)
	case *parse.PipeNode:
		return w.pipe(x, dot, depth+1)
	}
	return refValue{}
}

// unreadRefs are the refs no values leaf defines, each once, ordered by rank
// (template order kept within one): a path that a leaf holds is a key other
// candidates edit, and one under a leaf that is no mapping (a scalar image:,
// a null ingress:) is no key a new one can be.
func unreadRefs(refs []valuesRef, leaves []valuesLeaf) []valuesRef {
	defined := map[string]yaml.Kind{}
	for _, l := range leaves {
		if keysOnly(l.path) {
			defined[keyPathString(l.path)] = l.node.Kind
		}
	}
	seen := map[string]bool{}
	var out []valuesRef
	for _, r := range refs {
		k := strings.Join(r.path, "\x00")
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, ok := defined[k]; ok {
			continue
		}
		blocked := false
		for i := 1; i < len(r.path); i++ {
			if kind, ok := defined[strings.Join(r.path[:i], "\x00")]; ok && kind != yaml.MappingNode {
				blocked = true
				break
			}
		}
		if !blocked {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b valuesRef) int { return a.rank - b.rank })
	return out
}

func keyPathString(p yamledit.Path) string {
	keys := make([]string, len(p))
	for i, s := range p {
		keys[i] = s.Key
	}
	return strings.Join(keys, "\x00")
}

// unreadKeySets are the guesses at a key the chart reads but no values file
// sets, as new keys of last: first each ref whose last segment names a changed
// field of chain (podAnnotations for annotations, replicaCount for replicas),
// set to what that field gains; then, for a field not rendered now, each other
// ref of the chart that writes the target's kind set to all of it (a key of
// another chart's templates is no guess worth a render). At most max.
func unreadKeySets(refs []valuesRef, chain []fieldChange, last string, max int) []helmValueSet {
	var out []helmValueSet
	add := func(r valuesRef, fc fieldChange) bool {
		if v, ok := unreadValue(fc); ok {
			out = append(out, helmValueSet{file: last, path: keys(r.path...), value: v, fresh: true, guess: true})
		}
		return len(out) < max
	}
	for _, r := range refs {
		for _, fc := range chain {
			if namesField(r.path, fc) && !add(r, fc) {
				return out
			}
		}
	}
	if len(chain) == 0 || chain[0].old != nil {
		return out
	}
	for _, r := range refs {
		if r.rank < 2 && !namesField(r.path, chain[0]) && !add(r, chain[0]) {
			return out
		}
	}
	return out
}

// namesField reports whether a ref's last segment names the field fc changes:
// it holds the field's name, a plural's s aside (podAnnotations, nodeSelector,
// extraEnv, replicaCount).
func namesField(ref []string, fc fieldChange) bool {
	if len(fc.path) == 0 || isIndex(fc.path[len(fc.path)-1]) {
		return false
	}
	word := strings.ToLower(strings.TrimSuffix(fc.path[len(fc.path)-1], "s"))
	return word != "" && strings.Contains(strings.ToLower(ref[len(ref)-1]), word)
}

// unreadValue is what a key the chart reads but nothing sets must hold for fc:
// such a key renders nothing now, so it can only add to what is rendered (the
// keys of a mapping, the items at the end of a list), or give a scalar the
// chart renders with a default ({{ .Values.replicaCount | default 1 }}). ok is
// false for a removal, or a change of what the chart renders now.
func unreadValue(fc fieldChange) (any, bool) {
	if fc.new == nil {
		return nil, false
	}
	if fc.old == nil {
		return fc.new, true
	}
	switch old := fc.old.(type) {
	case map[string]any:
		nm, ok := fc.new.(map[string]any)
		if !ok {
			return nil, false
		}
		added := map[string]any{}
		for k, v := range nm {
			ov, was := old[k]
			switch {
			case !was:
				added[k] = v
			case !equalValues(ov, v):
				return nil, false
			}
		}
		return added, len(added) > 0 && len(nm)-len(added) == len(old)
	case []any:
		nl, ok := fc.new.([]any)
		if !ok || len(nl) <= len(old) || !equalValues(old, nl[:len(old)]) {
			return nil, false
		}
		return nl[len(old):], true
	}
	return fc.new, true
}
