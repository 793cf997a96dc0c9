package yamledit

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// maxSplices bounds the restructuring steps one op may take (each alias copied,
// each flow collection rewritten, each key of a structure set is one step).
const maxSplices = 512

// span is a byte range of the file being edited, kept up to date as later
// splices move it.
type span struct {
	start, end int
	msg        string
}

// result is an edit with what tests need to check it: the regions that changed.
type result struct {
	out      []byte
	t        *text
	warnings []span
	regions  []span
}

func (r *result) publicWarnings() []Warning {
	out := make([]Warning, 0, len(r.warnings))
	for _, w := range r.warnings {
		first, last := r.lines(w)
		msg := fmt.Sprintf("line %d changed shape: %s", first, w.msg)
		if last > first {
			msg = fmt.Sprintf("lines %d-%d changed shape: %s", first, last, w.msg)
		}
		out = append(out, Warning{Line: first, Message: msg})
	}
	return out
}

// lines is the 1-based line range of the result that a span covers.
func (r *result) lines(s span) (first, last int) {
	first = r.t.lineOf(s.start)
	last = first
	if s.end > s.start {
		last = r.t.lineOf(s.end - 1)
	}
	return first, last
}

type editor struct {
	t        *text
	doc      int
	parsed   *yaml.Node // the document as parsed before the first splice
	splices  int
	warnings []span
	regions  []span
}

func edit(src []byte, docIndex int, ops []Op) (*result, error) {
	t, err := newText(src)
	if err != nil {
		return nil, err
	}
	docs, err := parseDocuments(t.b, -1)
	if err != nil {
		return nil, err
	}
	if docIndex < 0 || docIndex >= len(docs) {
		return nil, fmt.Errorf("document %d: file has %d documents: %w", docIndex, len(docs), ErrNotFound)
	}
	before := make([]*tree, len(docs))
	for i, d := range docs {
		if before[i], err = toTree(d, aliasBudget); err != nil {
			return nil, fmt.Errorf("document %d (line %d): %w", i, d.Line, err)
		}
	}
	expected, err := toTree(docs[docIndex], aliasBudget)
	if err != nil {
		return nil, err
	}
	e := &editor{t: t, doc: docIndex, parsed: docs[docIndex]}
	for _, op := range ops {
		norm, err := normalizeOp(op)
		if err != nil {
			return nil, err
		}
		if err := e.apply(norm, 0); err != nil {
			return nil, fmt.Errorf("%s %s: %w", opVerb(op), op.Path, err)
		}
		if err := applyTree(expected, norm); err != nil {
			return nil, fmt.Errorf("%s %s: the file changed but the change did not apply to its meaning: %v: %w", opVerb(op), op.Path, err, errSelfCheck)
		}
	}
	if err := e.check(before, expected); err != nil {
		return nil, err
	}
	return &result{out: e.t.b, t: e.t, warnings: e.warnings, regions: e.regions}, nil
}

func opVerb(op Op) string {
	if op.Kind == OpDelete {
		return "delete"
	}
	return "set"
}

// normalizeOp turns the value into a tree; a mapping set on a matched item keeps
// the fields it was matched by.
func normalizeOp(op Op) (Op, error) {
	if op.Kind != OpSet && op.Kind != OpDelete {
		return op, fmt.Errorf("op kind %d: %w", op.Kind, ErrUnsupported)
	}
	for _, s := range op.Path {
		valid := utf8.ValidString(s.Key)
		for f, v := range s.Match {
			valid = valid && utf8.ValidString(f) && utf8.ValidString(v)
		}
		if !valid {
			return op, fmt.Errorf("%s %s: path is not valid UTF-8: %w", opVerb(op), op.Path, ErrUnsupported)
		}
	}
	if op.Kind == OpDelete {
		return op, nil
	}
	v, err := valueTree(op.Value)
	if err != nil {
		return op, fmt.Errorf("set %s: %w", op.Path, err)
	}
	if n := len(op.Path); n > 0 && op.Path[n-1].kind() == stepMatch {
		if v, err = itemFor(op.Path[n-1], v); err != nil {
			return op, fmt.Errorf("set %s: %w", op.Path, err)
		}
	}
	op.Value = v
	return op, nil
}

// check re-reads the result: it must parse into as many documents as before,
// the edited one must mean exactly what the ops asked for, the others must be
// unchanged.
func (e *editor) check(before []*tree, expected *tree) error {
	docs, err := parseDocuments(e.t.b, -1)
	if err != nil {
		return fmt.Errorf("edited file does not parse: %v: %w", err, errSelfCheck)
	}
	if len(docs) != len(before) {
		return fmt.Errorf("edited file has %d documents instead of %d: %w", len(docs), len(before), errSelfCheck)
	}
	for i, d := range docs {
		got, err := toTree(d, aliasBudget)
		if err != nil {
			return fmt.Errorf("edited document %d: %v: %w", i, err, errSelfCheck)
		}
		want := before[i]
		if i == e.doc {
			want = expected
		}
		if at := diff(want, got, "$"); at != "" {
			return fmt.Errorf("edited document %d differs from the requested change at %s: %w", i, at, errSelfCheck)
		}
	}
	return nil
}

// action is what one planning round decided.
type action struct {
	splice *splice
	warn   string
	again  bool // the splice restructured the file; plan the op again
	subOps []Op
}

type splice struct {
	start, end int
	text       string // uses "\n"; converted to the file's line break
}

func (e *editor) apply(op Op, depth int) error {
	if depth > 100 {
		return fmt.Errorf("value nested too deeply: %w", ErrUnsupported)
	}
	var err error
	for {
		if e.splices > maxSplices {
			return fmt.Errorf("edit needs more than %d steps: %w", maxSplices, ErrUnsupported)
		}
		doc := e.parsed
		if e.splices > 0 {
			if doc, err = documentAt(e.t.b, e.doc); err != nil {
				return err
			}
		}
		if len(doc.Content) == 0 || isEmptyDocument(doc) {
			return fmt.Errorf("document %d is empty: %w", e.doc, ErrNotMapping)
		}
		p := &planner{t: e.t, root: doc.Content[0]}
		p.json = resolveAlias(p.root).Style&yaml.FlowStyle != 0
		p.lay = detectLayout(e.t, p.root)
		if p.json {
			p.lay.unit = p.jsonUnit()
		}
		act, err := p.plan(op)
		if err != nil {
			return err
		}
		for _, sub := range act.subOps {
			if err := e.apply(sub, depth+1); err != nil {
				return fmt.Errorf("%s %s: %w", opVerb(sub), sub.Path, err)
			}
		}
		if act.splice == nil {
			return nil
		}
		e.apply1(*act.splice, act.warn)
		if !act.again {
			return nil
		}
	}
}

// apply1 splices the bytes and moves the recorded regions along.
func (e *editor) apply1(s splice, warn string) {
	e.splices++
	eol := e.t.eolAt(s.start)
	txt := s.text
	if eol != "\n" {
		txt = strings.ReplaceAll(txt, "\n", eol)
	}
	b := e.t.b
	nb := make([]byte, 0, len(b)-(s.end-s.start)+len(txt))
	nb = append(nb, b[:s.start]...)
	nb = append(nb, txt...)
	nb = append(nb, b[s.end:]...)
	delta := len(txt) - (s.end - s.start)
	newEnd := s.start + len(txt)
	move := func(sp *span) {
		switch {
		case sp.end < s.start || (sp.end == s.start && sp.start < s.start):
		case sp.start >= s.end && !(sp.start == s.start && s.end == s.start):
			sp.start += delta
			sp.end += delta
		default:
			sp.start = min(sp.start, s.start)
			sp.end = max(sp.end+delta, newEnd)
		}
	}
	for i := range e.warnings {
		move(&e.warnings[i])
	}
	for i := range e.regions {
		move(&e.regions[i])
	}
	e.regions = append(e.regions, span{start: s.start, end: newEnd})
	if warn != "" {
		e.warnings = append(e.warnings, span{start: s.start, end: newEnd, msg: warn})
	}
	t, err := newText(nb)
	if err != nil {
		// Inserted text never holds the characters newText refuses.
		panic(fmt.Sprintf("yamledit: spliced text unreadable: %v", err))
	}
	e.t = t
}

type planner struct {
	t    *text
	root *yaml.Node
	json bool
	lay  layout
}

func (p *planner) plan(op Op) (action, error) {
	hops, missing, err := p.walk(op.Path)
	if err != nil {
		return action{}, err
	}
	last := len(hops) - 1
	found := missing < 0
	var v *tree
	if op.Kind == OpSet {
		v = op.Value.(*tree)
	}
	// Edits go to the bytes that define a value: aliases and merged keys on the
	// way are first replaced by copies so no other place changes meaning.
	for i, h := range hops {
		target := found && i == last
		editsInside := target && v != nil && h.res.Kind == v.kind && v.kind != scalarNode
		if h.raw.Kind == aliasNode && (!target || editsInside) {
			return p.materialize(h, fmt.Sprintf("alias *%s replaced by a copy of its value so the edit does not change other places that use it", h.raw.Value))
		}
		if h.viaMerge && (!target || editsInside) {
			return p.copyMerged(hops[i-1].res, h)
		}
		if h.viaMerge && op.Kind == OpDelete {
			return action{}, fmt.Errorf("key %q comes from a merge key (<<) and cannot be deleted here: %w", h.key.Value, ErrUnsupported)
		}
	}
	protect, protectFound := hops, found
	if found && hops[last].viaMerge {
		// The key is added to the mapping itself; the merged value stays as is.
		protect, protectFound = hops[:last], false
	}
	if act, ok, err := p.protectAnchors(protect, protectFound); ok || err != nil {
		return act, err
	}
	if op.Kind == OpDelete {
		if !found {
			return action{}, fmt.Errorf("%s: %w", Path(op.Path[:missing+1]), ErrNotFound)
		}
		if last == 0 {
			return action{}, fmt.Errorf("cannot delete the document root: %w", ErrUnsupported)
		}
		return p.remove(hops)
	}
	if !found {
		return p.create(hops, op.Path[missing:], v, op.Sorted)
	}
	h := hops[last]
	if h.viaMerge {
		return p.insertEntry(hops[last-1].res, h.key.Value, v, hops, false)
	}
	if v.kind == scalarNode {
		if h.res.Kind == scalarNode || h.raw.Kind == aliasNode {
			return p.replaceScalar(h, v)
		}
		return p.replaceValue(hops, last, v, "collection replaced by a scalar")
	}
	if h.res.Kind == v.kind {
		return action{subOps: p.decompose(hops, op.Path, v, op.Sorted)}, nil
	}
	if isImplicitNull(h.res) {
		return p.replaceValue(hops, last, v, "")
	}
	return p.replaceValue(hops, last, v, "value replaced by a value of another kind")
}

// protectAnchors copies, in place of each alias, the value of any anchored node
// the edit would change (a node on the path, or inside what is replaced), so the
// aliases keep meaning what they meant.
func (p *planner) protectAnchors(hops []hop, found bool) (action, bool, error) {
	changed := map[*yaml.Node]bool{}
	for _, h := range hops {
		if h.res.Anchor != "" {
			changed[h.res] = true
		}
	}
	target := hops[len(hops)-1]
	replaced := map[*yaml.Node]bool{}
	if found {
		walkNodes(target.raw, func(n *yaml.Node) {
			replaced[n] = true
			if n.Anchor != "" {
				changed[n] = true
			}
		})
	}
	if len(changed) == 0 {
		return action{}, false, nil
	}
	var alias *yaml.Node
	walkNodes(p.root, func(n *yaml.Node) {
		if alias == nil && n.Kind == aliasNode && changed[n.Alias] && !replaced[n] && n != target.raw {
			alias = n
		}
	})
	if alias == nil {
		return action{}, false, nil
	}
	h, ok := p.locate(alias)
	if !ok {
		return action{}, false, fmt.Errorf("line %d: alias *%s is used where it cannot be copied: %w", alias.Line, alias.Value, ErrUnsupported)
	}
	act, err := p.materialize(h, fmt.Sprintf("alias *%s replaced by a copy of its value because the edit changes the anchored value", alias.Value))
	return act, true, err
}

// walkNodes visits n and its descendants without following aliases.
func walkNodes(n *yaml.Node, fn func(*yaml.Node)) {
	fn(n)
	for _, c := range n.Content {
		walkNodes(c, fn)
	}
}

// locate finds where a node sits (its parent and key) for edits outside the path.
func (p *planner) locate(target *yaml.Node) (hop, bool) {
	var out hop
	found := false
	var visit func(n *yaml.Node)
	visit = func(n *yaml.Node) {
		if found {
			return
		}
		flow := n.Style&yaml.FlowStyle != 0
		for i, c := range n.Content {
			if c == target {
				h := hop{raw: c, res: resolveAlias(c), parent: n, pos: i, indent: -1, inFlow: flow}
				if n.Kind == mappingNode {
					if i%2 == 0 {
						return // keys are not copied
					}
					h.key = n.Content[i-1]
				}
				if !flow {
					ind, err := p.t.childIndent(n)
					if err != nil {
						return
					}
					h.indent = ind
				}
				out, found = h, true
				return
			}
			visit(c)
		}
	}
	visit(p.root)
	return out, found
}

// materialize replaces a node (an alias, or a flow collection) by its value
// written out in the style of its surroundings.
func (p *planner) materialize(h hop, why string) (action, error) {
	v, err := toTree(h.raw, aliasBudget)
	if err != nil {
		return action{}, err
	}
	act, err := p.replaceAt(h, v, why)
	act.again = true
	return act, err
}

// copyMerged writes a key that a merge key provides into the mapping itself.
func (p *planner) copyMerged(m *yaml.Node, h hop) (action, error) {
	v, err := toTree(h.raw, aliasBudget)
	if err != nil {
		return action{}, err
	}
	act, err := p.insertEntry(m, h.key.Value, v, nil, false)
	act.warn = fmt.Sprintf("key %s copied out of the merge key (<<) so it can be changed here", h.key.Value)
	act.again = true
	return act, err
}

// outermostFlow returns the first flow collection on the path, when the file is
// YAML: structural edits inside it rewrite it in block style first.
func (p *planner) outermostFlow(hops []hop) (hop, bool) {
	if p.json {
		return hop{}, false
	}
	for _, h := range hops {
		if h.res.Kind != scalarNode && h.res.Style&yaml.FlowStyle != 0 {
			return h, true
		}
	}
	return hop{}, false
}

// inlineFlow reports whether n is a YAML flow collection written on one line
// (so without comments inside) that holds something, and v (nil for a
// removal) is a scalar: such a member is added to or removed from it in place,
// as in JSON ("[a.yaml, b.yaml]"), rather than the collection rewritten in
// block style. A structure added to one is written in block style, which
// keeps the line readable.
func (p *planner) inlineFlow(n *yaml.Node, v *tree) bool {
	if p.json || n.Kind == scalarNode || n.Style&yaml.FlowStyle == 0 || len(n.Content) == 0 || (v != nil && v.kind != scalarNode) {
		return false
	}
	open, end, err := p.t.bounds(n, -1)
	return err == nil && p.t.lineOf(open) == p.t.lineOf(end-1)
}

func (p *planner) toBlock(h hop) (action, error) {
	if len(h.res.Content) == 0 {
		return action{}, fmt.Errorf("line %d: empty flow collection cannot be rewritten in block style: %w", h.raw.Line, ErrUnsupported)
	}
	return p.materialize(h, "flow-style collection rewritten in block style so it can be edited (comments inside it are not kept)")
}

// create adds the missing steps of a path with the value at their end.
func (p *planner) create(hops []hop, rest Path, v *tree, sorted bool) (action, error) {
	c := hops[len(hops)-1]
	s := rest[0]
	inline := len(rest) == 1 && p.inlineFlow(c.res, v) &&
		((c.res.Kind == mappingNode && s.kind() == stepKey) || (c.res.Kind == sequenceNode && s.kind() == stepIndex))
	if f, ok := p.outermostFlow(hops); ok && !inline {
		if f.res != c.res || len(c.res.Content) > 0 {
			return p.toBlock(f)
		}
		// An empty flow collection ({} or []) is written in block style with
		// the new content at once.
		if (c.res.Kind == mappingNode) != (s.kind() == stepKey) {
			return action{}, fmt.Errorf("cannot add %s to a %s: %w", s, kindName(c.res), ErrNotMapping)
		}
		val, err := build(rest, v)
		if err != nil {
			return action{}, err
		}
		return p.replaceAt(c, val, "empty flow-style collection rewritten in block style")
	}
	if isNull(c.res) {
		val, err := build(rest, v)
		if err != nil {
			return action{}, err
		}
		warn := ""
		if !isImplicitNull(c.res) {
			warn = "null replaced by a collection"
		}
		return p.replaceValue(hops, len(hops)-1, val, warn)
	}
	inner, err := build(rest[1:], v)
	if err != nil {
		return action{}, err
	}
	switch {
	case c.res.Kind == mappingNode && s.kind() == stepKey:
		if p.json || inline {
			return p.flowInsert(c.res, s.Key, inner)
		}
		return p.insertEntry(c.res, s.Key, inner, hops, sorted)
	case c.res.Kind == sequenceNode && s.kind() != stepKey:
		item := inner
		if s.kind() == stepMatch {
			if item, err = itemFor(s, inner); err != nil {
				return action{}, err
			}
		}
		if p.json || inline {
			return p.flowInsert(c.res, "", item)
		}
		return p.appendItem(c.res, item)
	}
	return action{}, fmt.Errorf("cannot add %s to a %s: %w", s, kindName(c.res), ErrNotMapping)
}

// build makes the value that the missing steps of a path and the value form.
func build(steps Path, v *tree) (*tree, error) {
	if len(steps) == 0 {
		return v, nil
	}
	inner, err := build(steps[1:], v)
	if err != nil {
		return nil, err
	}
	switch s := steps[0]; s.kind() {
	case stepKey:
		return &tree{kind: mappingNode, keys: []string{s.Key}, vals: []*tree{inner}}, nil
	case stepMatch:
		item, err := itemFor(s, inner)
		if err != nil {
			return nil, err
		}
		return &tree{kind: sequenceNode, items: []*tree{item}}, nil
	default:
		if s.Index != 0 {
			return nil, fmt.Errorf("index %d of a new sequence: %w", s.Index, ErrNotFound)
		}
		return &tree{kind: sequenceNode, items: []*tree{inner}}, nil
	}
}

// itemFor is the sequence item a Match step creates: the matched fields, then
// the fields of the value.
func itemFor(s Step, inner *tree) (*tree, error) {
	if inner.kind != mappingNode && !inner.isNull() {
		return nil, fmt.Errorf("item matched by %s must be a mapping: %w", s, ErrNotMapping)
	}
	item := &tree{kind: mappingNode}
	for _, f := range kubernetesKeyOrder(slices.Sorted(maps.Keys(s.Match))) {
		item.set(f, &tree{kind: scalarNode, tag: "!!str", value: s.Match[f]})
	}
	if inner.kind == mappingNode {
		for i, k := range inner.keys {
			item.set(k, inner.vals[i])
		}
	}
	return item, nil
}

// decompose turns "set this structure onto the existing one" into the smallest
// edits: set each entry, delete entries the value does not have.
func (p *planner) decompose(hops []hop, path Path, v *tree, sorted bool) []Op {
	base := make(Path, 0, len(path)+1)
	for i, s := range path {
		if s.kind() == stepMatch {
			// The match fields may be among what changes.
			s = I(hops[i+1].pos)
		}
		base = append(base, s)
	}
	at := func(s Step) Path { return append(append(Path{}, base...), s) }
	cur := hops[len(hops)-1].res
	var ops []Op
	if v.kind == mappingNode {
		for i, k := range v.keys {
			ops = append(ops, Op{Path: at(K(k)), Kind: OpSet, Value: v.vals[i], Sorted: sorted})
		}
		for i := 0; i+1 < len(cur.Content); i += 2 {
			k := resolveAlias(cur.Content[i])
			if _, keep := v.get(k.Value); keep < 0 || isMerge(cur.Content[i]) {
				ops = append(ops, Op{Path: at(K(k.Value)), Kind: OpDelete})
			}
		}
		return ops
	}
	n := len(cur.Content)
	for i, item := range v.items {
		ops = append(ops, Op{Path: at(I(i)), Kind: OpSet, Value: item, Sorted: sorted})
	}
	for i := n - 1; i >= len(v.items); i-- {
		ops = append(ops, Op{Path: at(I(i)), Kind: OpDelete})
	}
	return ops
}

// replaceScalar changes a scalar's bytes in place, keeping its quoting style when
// the new value can be written in it.
func (p *planner) replaceScalar(h hop, v *tree) (action, error) {
	t := p.t
	valStart, end, err := t.bounds(h.raw, h.indent)
	if err != nil {
		return action{}, err
	}
	ctx := inBlock
	switch {
	case p.json:
		ctx = inJSON
	case h.inFlow:
		ctx = inFlow
	}
	old := string(t.b[valStart:end])
	var txt, warn string
	if h.raw.Kind == scalarNode && h.raw.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		warn = "multi-line block scalar replaced"
		if v.tag == "!!str" && strings.Contains(v.value, "\n") {
			indent := max(h.indent, 0) + p.lay.unit
			if first := t.nextLine(valStart); first < end {
				indent = t.indentAt(first)
			}
			if header, lines, ok := literalLines(v.value, indent); ok {
				txt = header + "\n" + strings.Join(lines, "\n")
			}
		}
	} else if t.lineOf(valStart) != t.lineOf(end) {
		warn = "multi-line scalar replaced"
	}
	if txt == "" {
		prefer := yaml.Style(0)
		if h.raw.Kind == scalarNode {
			prefer = h.raw.Style & (yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle)
		}
		if txt, err = p.lay.scalarText(v, ctx, prefer); err != nil {
			return action{}, err
		}
	}
	if txt == old {
		return action{}, nil
	}
	if valStart == end && valStart > 0 && (t.b[valStart-1] == ':' || t.b[valStart-1] == '-') {
		txt = " " + txt
	}
	return action{splice: &splice{start: valStart, end: end, text: txt}, warn: warn}, nil
}

// replaceValue rewrites the value of hops[i] (which may change kind).
func (p *planner) replaceValue(hops []hop, i int, v *tree, warn string) (action, error) {
	if f, ok := p.outermostFlow(hops[:i]); ok {
		return p.toBlock(f)
	}
	return p.replaceAt(hops[i], v, warn)
}

// replaceAt writes v in place of the node at h: after its ":" or "-", in its
// flow collection, or as the document.
func (p *planner) replaceAt(h hop, v *tree, warn string) (action, error) {
	t := p.t
	start := t.start(h.raw)
	end, err := t.end(h.raw, h.indent)
	if err != nil {
		return action{}, err
	}
	switch {
	case h.parent == nil:
		var txt string
		if p.json || v.kind == scalarNode {
			txt, err = p.lay.flowText(v, p.ctx(), p.json, t.indentAt(start))
		} else {
			var lines []string
			lines, err = p.lay.blockLines(v, 0)
			txt = strings.Join(lines, "\n")
		}
		if err != nil {
			return action{}, err
		}
		return action{splice: &splice{start: start, end: end, text: txt}, warn: warn}, nil
	case h.inFlow:
		pretty := p.json && p.multiline()
		txt, err := p.lay.flowText(v, p.ctx(), pretty, t.indentAt(start))
		if err != nil {
			return action{}, err
		}
		return action{splice: &splice{start: start, end: end, text: txt}, warn: warn}, nil
	}
	var ind, col, childCol int
	var inline string
	var lines []string
	if h.key != nil {
		if ind, err = t.colonAfter(h.key, h.indent); err != nil {
			return action{}, err
		}
		col = h.indent
		childCol = col + p.lay.unit
		if v.kind == sequenceNode {
			childCol = col + p.lay.seqIndent
		}
		if isBlockCollection(v) {
			if lines, err = p.lay.blockLines(v, childCol); err != nil {
				return action{}, err
			}
			lines[0] = pad(childCol) + lines[0]
		}
	} else {
		dash, ok := t.dashBefore(start)
		if !ok {
			return action{}, errPosition(h.raw, "sequence dash")
		}
		ind, col = dash+1, h.indent
		if isBlockCollection(v) {
			off := p.lay.itemOff
			if v.kind == sequenceNode || off < 2 {
				off = 2
			}
			sub, err := p.lay.blockLines(v, col+off)
			if err != nil {
				return action{}, err
			}
			inline, lines = pad(off-1)+sub[0], sub[1:]
		}
	}
	if !isBlockCollection(v) {
		s, err := p.lay.flatText(v, inBlock)
		if err != nil {
			return action{}, err
		}
		inline = " " + s
	}
	lineEnd := t.contentEnd(end)
	txt := inline + string(t.b[end:lineEnd])
	if len(lines) > 0 {
		txt += "\n" + strings.Join(lines, "\n")
	}
	return action{splice: &splice{start: ind, end: lineEnd, text: txt}, warn: warn}, nil
}

func (p *planner) ctx() scalarContext {
	if p.json {
		return inJSON
	}
	return inFlow
}

// insertLinesAfter adds whole lines after the line holding off.
func (p *planner) insertLinesAfter(off int, lines []string) action {
	txt := strings.Join(lines, "\n")
	if p.t.hasBreak(off) {
		at := p.t.nextLine(off)
		return action{splice: &splice{start: at, end: at, text: txt + "\n"}}
	}
	// The file has no final newline; keep it that way.
	if h, hEnd, ok := p.blockScalarAtEOF(); ok {
		// A block scalar that ends the file holds no final line break; the
		// break before the new lines would become its own. Stripping its
		// trailing breaks ("|-") keeps its value as it was.
		header := strings.NewReplacer("+", "", "-", "").Replace(string(p.t.b[h:hEnd]))
		header = header[:1] + "-" + header[1:]
		return action{
			splice: &splice{start: h, end: len(p.t.b), text: header + string(p.t.b[hEnd:]) + "\n" + txt},
			warn:   fmt.Sprintf("the block scalar that ended the file marked %s so its value keeps no final line break", header),
		}
	}
	return action{splice: &splice{start: len(p.t.b), end: len(p.t.b), text: "\n" + txt}}
}

// blockScalarAtEOF finds a literal or folded scalar of the document whose
// content runs to the end of a file without a final line break, and does not
// strip its trailing breaks already: the offsets of its header ("|", ">" and
// their indicators).
func (p *planner) blockScalarAtEOF() (h, hEnd int, ok bool) {
	var last *yaml.Node
	walkNodes(p.root, func(n *yaml.Node) {
		if n.Kind == scalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 && (last == nil || p.t.start(n) > p.t.start(last)) {
			last = n
		}
	})
	if last == nil {
		return 0, 0, false
	}
	h = p.t.start(last)
	end, err := p.t.blockScalarEnd(last, h, p.t.indentAt(h))
	if err != nil || end != len(p.t.b) {
		return 0, 0, false
	}
	hEnd = h + 1
	for hEnd < len(p.t.b) && strings.IndexByte("+-0123456789", p.t.b[hEnd]) >= 0 {
		hEnd++
	}
	if bytes.IndexByte(p.t.b[h:hEnd], '-') >= 0 {
		return 0, 0, false
	}
	return h, hEnd, true
}

// insertEntry appends key: v to a block mapping, at the column of its keys;
// sorted, it goes to its place in the order of the mapping's keys instead
// when they are sorted (see sortedPlace).
func (p *planner) insertEntry(m *yaml.Node, key string, v *tree, hops []hop, sorted bool) (action, error) {
	if m.Style&yaml.FlowStyle != 0 {
		if p.json {
			return p.flowInsert(m, key, v)
		}
		if f, ok := p.outermostFlow(hops); ok {
			return p.toBlock(f)
		}
		return action{}, fmt.Errorf("line %d: flow mapping not on the path: %w", m.Line, ErrUnsupported)
	}
	col, err := p.t.childIndent(m)
	if err != nil {
		return action{}, err
	}
	lines, err := p.lay.blockLines(&tree{kind: mappingNode, keys: []string{key}, vals: []*tree{v}}, col)
	if err != nil {
		return action{}, err
	}
	lines[0] = pad(col) + lines[0]
	if sorted {
		if at, ok := p.sortedPlace(m, key); ok {
			txt := strings.Join(lines, "\n") + "\n"
			if at > 0 && p.t.blankLine(at-1) {
				// Keys set apart by blank lines: so is the new one.
				txt += "\n"
			}
			return action{splice: &splice{start: at, end: at, text: txt}}, nil
		}
	}
	end, err := p.t.end(m.Content[len(m.Content)-1], col)
	if err != nil {
		return action{}, err
	}
	return p.insertLinesAfter(end, lines), nil
}

// sortedPlace is the offset where the new key goes in the block mapping m to
// keep its keys sorted (followed by a blank line when a blank line sets the
// key after it apart): the start of the block of the first key it sorts
// before, the comment lines directly above that key at its column included
// (they say something about it), except the comments that open the document
// above its first key, which are the file's. False when the new key sorts
// last, when m has fewer than two keys (no order to follow) or its keys are
// in no order, and when the key it precedes shares its line with something
// before it ("- name: x"), where no line can be inserted.
func (p *planner) sortedPlace(m *yaml.Node, key string) (int, bool) {
	var keys []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind != scalarNode || isMerge(k) {
			return 0, false
		}
		keys = append(keys, k.Value)
	}
	if len(keys) < 2 {
		return 0, false
	}
	order := strings.Compare
	if !slices.IsSortedFunc(keys, order) {
		order = func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) }
		if !slices.IsSortedFunc(keys, order) {
			return 0, false
		}
	}
	next := -1
	for i, k := range keys {
		if order(key, k) < 0 {
			next = i
			break
		}
	}
	if next < 0 {
		return 0, false
	}
	t := p.t
	first := t.start(m.Content[2*next])
	if !t.onlySpaceBefore(first) {
		return 0, false
	}
	col := t.column(first)
	from := t.lineStart(first)
	for from > 0 {
		prev := t.lineStart(from - 1)
		if t.indentAt(prev) != col || !t.commentLine(prev) {
			break
		}
		from = prev
	}
	if next == 0 && from != t.lineStart(first) && m == resolveAlias(p.root) && p.opensDocument(from) {
		from = t.lineStart(first)
	}
	return from, true
}

// opensDocument reports whether nothing but the document's start comes
// before the line at off: the start of the file, a "---" marker or
// directives.
func (p *planner) opensDocument(off int) bool {
	for off > 0 {
		prev := p.t.lineStart(off - 1)
		line := strings.TrimRight(string(p.t.b[prev:p.t.contentEnd(prev)]), " \t")
		if strings.HasPrefix(line, "---") || strings.HasPrefix(line, "%") {
			return true
		}
		if !p.t.blankLine(prev) {
			return false
		}
		off = prev
	}
	return true
}

// appendItem adds an item after the last one of a block sequence, written like
// the existing items ("- name: x" with its fields aligned).
func (p *planner) appendItem(seq *yaml.Node, item *tree) (action, error) {
	t := p.t
	col, err := t.childIndent(seq)
	if err != nil {
		return action{}, err
	}
	off := p.lay.itemOff
	for _, it := range seq.Content {
		if it.Kind == mappingNode && it.Style&yaml.FlowStyle == 0 {
			first := t.start(it.Content[0])
			if dash, ok := t.dashBefore(first); ok && t.lineOf(dash) == t.lineOf(first) {
				off = first - dash
			}
			break
		}
	}
	end, err := t.end(seq.Content[len(seq.Content)-1], col)
	if err != nil {
		return action{}, err
	}
	var lines []string
	if isBlockCollection(item) {
		if item.kind == sequenceNode || off < 2 {
			off = 2
		}
		sub, err := p.lay.blockLines(item, col+off)
		if err != nil {
			return action{}, err
		}
		lines = append([]string{pad(col) + "-" + pad(off-1) + sub[0]}, sub[1:]...)
	} else {
		s, err := p.lay.flatText(item, inBlock)
		if err != nil {
			return action{}, err
		}
		lines = []string{pad(col) + "- " + s}
	}
	return p.insertLinesAfter(end, lines), nil
}

// remove deletes the key or item at the end of hops with its whole block.
func (p *planner) remove(hops []hop) (action, error) {
	t := p.t
	last := len(hops) - 1
	h := hops[last]
	parent := h.parent
	if h.inFlow {
		if p.json || p.inlineFlow(parent, nil) {
			return p.flowRemove(h)
		}
		f, _ := p.outermostFlow(hops)
		return p.toBlock(f)
	}
	count := len(parent.Content)
	if parent.Kind == mappingNode {
		count /= 2
	}
	if count == 1 {
		empty := &tree{kind: parent.Kind, items: []*tree{}}
		return p.replaceValue(hops, last-1, empty, "last entry removed, the collection is now empty")
	}
	end, err := t.end(h.raw, h.indent)
	if err != nil {
		return action{}, err
	}
	var first, next int
	hasNext := h.pos+1 < len(parent.Content)
	if parent.Kind == mappingNode {
		first = t.start(h.key)
		if hasNext {
			next = t.start(parent.Content[h.pos+1])
		}
	} else {
		dash, ok := t.dashBefore(t.start(h.raw))
		if !ok {
			return action{}, errPosition(h.raw, "sequence dash")
		}
		first = dash
		if hasNext {
			if next, ok = t.dashBefore(t.start(parent.Content[h.pos+1])); !ok {
				return action{}, errPosition(parent.Content[h.pos+1], "sequence dash")
			}
		}
	}
	if t.onlySpaceBefore(first) {
		from, to := t.blockLines(first, end)
		return action{splice: &splice{start: from, end: to}}, nil
	}
	if !hasNext {
		return action{}, fmt.Errorf("line %d: entry shares its line with the one before: %w", h.raw.Line, ErrUnsupported)
	}
	// "- name: a" with more keys below: the next key moves up onto the dash line.
	return action{splice: &splice{start: first, end: next}}, nil
}

// blockLines extends the lines of an entry that starts at first (its key or
// dash) and whose value ends at end to the whole block a reader sees as the
// entry: the comment lines directly above it at its column, and comment lines
// below it indented deeper than it. Comments above the next entry stay.
func (t *text) blockLines(first, end int) (from, to int) {
	b := t.b
	col := t.column(first)
	from = t.lineStart(first)
	for from > 0 {
		prev := t.lineStart(from - 1)
		if ind := t.indentAt(prev); ind != col || !t.commentLine(prev) {
			break
		}
		from = prev
	}
	to = t.nextLine(end)
	for p := to; p < len(b); p = t.nextLine(p) {
		if t.blankLine(p) {
			continue
		}
		if !t.commentLine(p) || t.indentAt(p) <= col {
			break
		}
		to = t.nextLine(p)
	}
	if to < len(b) && from > 0 && t.blankLine(from-1) && t.blankLine(to) {
		// Do not leave two blank lines where the entry was.
		to = t.nextLine(to)
	}
	if to == len(b) && from > 0 && b[len(b)-1] != '\n' {
		// Removing the last line of a file without a final newline: take the
		// line break before it instead.
		from--
		if from > 0 && b[from-1] == '\r' {
			from--
		}
	}
	return from, to
}

// commentLine reports whether the line holding off holds only a comment.
func (t *text) commentLine(off int) bool {
	p := t.lineStart(off) + t.indentAt(off)
	return p < len(t.b) && t.b[p] == '#'
}

// blankLine reports whether the line holding off holds only spaces.
func (t *text) blankLine(off int) bool {
	p := t.lineStart(off) + t.indentAt(off)
	return p >= t.contentEnd(off)
}

// flowRemove deletes a member of a JSON object or array with its comma.
func (p *planner) flowRemove(h hop) (action, error) {
	t := p.t
	parent := h.parent
	step := 1
	if parent.Kind == mappingNode {
		step = 2
	}
	count := len(parent.Content) / step
	idx := h.pos / step
	memberStart := func(i int) int { return t.start(parent.Content[i*step]) }
	memberEnd := func(i int) (int, error) { return t.end(parent.Content[i*step+step-1], -1) }
	if count == 1 {
		open, end, err := t.bounds(parent, -1)
		if err != nil {
			return action{}, err
		}
		return action{splice: &splice{start: open + 1, end: end - 1}}, nil
	}
	if idx < count-1 {
		return action{splice: &splice{start: memberStart(idx), end: memberStart(idx + 1)}}, nil
	}
	from, err := memberEnd(idx - 1)
	if err != nil {
		return action{}, err
	}
	to, err := memberEnd(idx)
	if err != nil {
		return action{}, err
	}
	return action{splice: &splice{start: from, end: to}}, nil
}

// flowInsert adds a member to a JSON object (key != "") or array, formatted like
// its neighbours: one per line when they are, with the same indentation, and
// on one line when the last of them is.
func (p *planner) flowInsert(c *yaml.Node, key string, v *tree) (action, error) {
	t := p.t
	open, end, err := t.bounds(c, -1)
	if err != nil {
		return action{}, err
	}
	closeAt := end - 1
	step := 1
	if c.Kind == mappingNode {
		step = 2
	}
	count := len(c.Content) / step
	pretty := t.lineOf(open) != t.lineOf(closeAt)
	sep := ": "
	if count > 0 && step == 2 {
		k := c.Content[len(c.Content)-2]
		if _, kEnd, err := t.bounds(k, -1); err == nil {
			if vs := t.start(c.Content[len(c.Content)-1]); vs > kEnd && !bytes.ContainsAny(t.b[kEnd:vs], "\r\n") {
				sep = string(t.b[kEnd:vs])
			}
		}
	}
	member := func(col int, pretty bool) (string, error) {
		s, err := p.lay.flowText(v, p.ctx(), pretty, col)
		if !p.json && v.kind == scalarNode && count > 0 {
			// A YAML string quoted like the member before it.
			s, err = p.lay.scalarText(v, inFlow, c.Content[len(c.Content)-1].Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle))
		}
		if err != nil || step == 1 {
			return s, err
		}
		k, err := p.lay.keyText(key, p.ctx())
		return k + sep + s, err
	}
	if count == 0 {
		col := t.indentAt(open)
		var txt string
		if p.multiline() {
			m, err := member(col+p.lay.unit, true)
			if err != nil {
				return action{}, err
			}
			txt = "\n" + pad(col+p.lay.unit) + m + "\n" + pad(col)
			return action{splice: &splice{start: open + 1, end: closeAt, text: txt}, warn: "empty collection expanded to hold the new member"}, nil
		} else {
			m, err := member(col, false)
			if err != nil {
				return action{}, err
			}
			txt = m
		}
		return action{splice: &splice{start: open + 1, end: closeAt, text: txt}}, nil
	}
	lastStart := t.start(c.Content[len(c.Content)-step])
	lastEnd, err := t.end(c.Content[len(c.Content)-1], -1)
	if err != nil {
		return action{}, err
	}
	q := t.skipBlank(lastEnd)
	trailingComma := q < len(t.b) && t.b[q] == ','
	if pretty && t.lineOf(lastStart) != t.lineOf(open) {
		col := t.column(lastStart)
		if !t.onlySpaceBefore(lastStart) {
			col = t.indentAt(open) + p.lay.unit
		}
		// Laid out over lines when the member before it is, else on its line.
		m, err := member(col, t.lineOf(lastStart) != t.lineOf(lastEnd-1))
		if err != nil {
			return action{}, err
		}
		if trailingComma {
			return action{splice: &splice{start: q + 1, end: q + 1, text: "\n" + pad(col) + m + ","}}, nil
		}
		return action{splice: &splice{start: lastEnd, end: lastEnd, text: ",\n" + pad(col) + m}}, nil
	}
	between := ", "
	if count >= 2 {
		firstEnd, err := t.end(c.Content[step-1], -1)
		if err == nil {
			if g := string(t.b[firstEnd:t.start(c.Content[step])]); strings.TrimSpace(g) == "," && !strings.ContainsAny(g, "\r\n") {
				between = g
			}
		}
	}
	m, err := member(t.indentAt(open), false)
	if err != nil {
		return action{}, err
	}
	if trailingComma {
		return action{splice: &splice{start: q + 1, end: q + 1, text: " " + m + ","}}, nil
	}
	return action{splice: &splice{start: lastEnd, end: lastEnd, text: between + m}}, nil
}

// multiline reports whether the document spans more than one line (pretty JSON).
func (p *planner) multiline() bool {
	return p.t.lineOf(p.t.start(p.root)) != p.t.lineOf(max(len(p.t.b)-1, 0))
}

// jsonUnit is the indentation step of a JSON document's members.
func (p *planner) jsonUnit() int {
	root := resolveAlias(p.root)
	if len(root.Content) == 0 {
		return 2
	}
	first := p.t.start(root.Content[0])
	open := p.t.start(root)
	if p.t.lineOf(first) == p.t.lineOf(open) || !p.t.onlySpaceBefore(first) {
		return 2
	}
	if d := p.t.column(first) - p.t.indentAt(open); d > 0 {
		return d
	}
	return 2
}
