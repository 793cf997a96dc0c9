package yamledit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

const (
	scalarNode   = yaml.ScalarNode
	mappingNode  = yaml.MappingNode
	sequenceNode = yaml.SequenceNode
	aliasNode    = yaml.AliasNode
	documentNode = yaml.DocumentNode
)

// aliasBudget bounds how many nodes alias expansion may produce in one document.
// Real manifests reuse a few small anchors; a billion-laughs document needs far more.
const aliasBudget = 10_000

// mergeTag is the key that merges mappings (<<: *defaults).
const mergeKey = "<<"

// parseDocuments decodes the documents of a stream into nodes, stopping after
// document upTo when upTo >= 0. Node lines count from the start of the stream.
func parseDocuments(b []byte, upTo int) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*yaml.Node
	for upTo < 0 || len(docs) <= upTo {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse document %d: %w%s", len(docs)+1, err, tabHint(b, err))
		}
		docs = append(docs, &n)
	}
	return docs, nil
}

// yamlErrorLine finds the line a yaml.v3 error names.
var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+):`)

// tabHint names the line indented with a tab when yaml.v3 fails on one (its
// "found character that cannot start any token", or a tab that "violates
// indentation", sometimes counted on the line before): an editor that inserts
// tabs is the usual cause, and the parser's words do not say which line.
func tabHint(b []byte, err error) string {
	msg := err.Error()
	m := yamlErrorLine.FindStringSubmatch(msg)
	if m == nil || !(strings.Contains(msg, "cannot start any token") || strings.Contains(msg, "tab character")) {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	lines := bytes.SplitN(b, []byte("\n"), n+2)
	for i := n; i <= n+1 && i >= 1 && i <= len(lines); i++ {
		line := lines[i-1]
		indent := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			return fmt.Sprintf(" (line %d is indented with a tab; YAML indents with spaces only)", i)
		}
	}
	return ""
}

// documentAt decodes the stream up to document i and returns it.
func documentAt(b []byte, i int) (*yaml.Node, error) {
	if i < 0 {
		return nil, fmt.Errorf("document %d: %w", i, ErrNotFound)
	}
	docs, err := parseDocuments(b, i)
	if err != nil {
		return nil, err
	}
	if i >= len(docs) {
		return nil, fmt.Errorf("document %d: file has %d documents: %w", i, len(docs), ErrNotFound)
	}
	return docs[i], nil
}

func isEmptyDocument(d *yaml.Node) bool {
	if len(d.Content) == 0 {
		return true
	}
	r := d.Content[0]
	return r.Kind == scalarNode && r.Tag == "!!null" && r.Value == "" && r.Style == 0
}

// tree is a document's meaning, with aliases and merge keys expanded: what a
// Kubernetes client would read. Edits are checked by comparing trees.
type tree struct {
	kind   yaml.Kind
	tag    string // scalars: resolved tag such as !!str or !!int
	value  string // scalars: the value; empty for null
	quoted bool   // scalars: always written quoted
	keys   []string
	vals   []*tree
	items  []*tree
	// index maps the keys of a large mapping to their position; it is rebuilt
	// whenever the number of keys no longer matches (see get).
	index   map[string]int
	indexed int
}

// indexedKeys is the number of keys above which a mapping's lookups use a map:
// a file may hold mappings of many thousand keys, and comparing or checking them
// key by key would cost time quadratic in their size.
const indexedKeys = 16

func (t *tree) get(key string) (*tree, int) {
	if len(t.keys) > indexedKeys {
		// Keys are only ever appended or removed, never renamed, so an index
		// built for the current number of keys is current. Trees copied by value
		// share the map; a rebuild replaces it rather than changing it.
		if t.index == nil || t.indexed != len(t.keys) {
			index := make(map[string]int, len(t.keys))
			for i, k := range t.keys {
				if _, dup := index[k]; !dup {
					index[k] = i
				}
			}
			t.index, t.indexed = index, len(t.keys)
		}
		if i, ok := t.index[key]; ok {
			return t.vals[i], i
		}
		return nil, -1
	}
	for i, k := range t.keys {
		if k == key {
			return t.vals[i], i
		}
	}
	return nil, -1
}

func (t *tree) set(key string, v *tree) {
	if _, i := t.get(key); i >= 0 {
		t.vals[i] = v
		return
	}
	t.keys = append(t.keys, key)
	t.vals = append(t.vals, v)
}

func (t *tree) isNull() bool { return t.kind == scalarNode && t.tag == "!!null" }

// converter turns nodes into trees, counting nodes produced under aliases.
type converter struct {
	budget   int
	expanded int
	depth    int
}

// toTree converts a document (or any node) into its meaning.
func toTree(n *yaml.Node, budget int) (*tree, error) {
	c := &converter{budget: budget}
	return c.convert(n, false)
}

func (c *converter) convert(n *yaml.Node, underAlias bool) (*tree, error) {
	if underAlias {
		c.expanded++
		if c.expanded > c.budget {
			return nil, fmt.Errorf("more than %d nodes from aliases: %w", c.budget, ErrAliasBomb)
		}
	}
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 10_000 {
		return nil, fmt.Errorf("nesting deeper than 10000 levels: %w", ErrUnsupported)
	}
	switch n.Kind {
	case documentNode:
		if len(n.Content) == 0 {
			return &tree{kind: scalarNode, tag: "!!null"}, nil
		}
		return c.convert(n.Content[0], underAlias)
	case aliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: alias *%s has no anchor: %w", n.Line, n.Value, ErrUnsupported)
		}
		return c.convert(n.Alias, true)
	case scalarNode:
		t := &tree{kind: scalarNode, tag: n.ShortTag(), value: n.Value}
		if t.tag == "!!null" {
			t.value = ""
		}
		return t, nil
	case sequenceNode:
		t := &tree{kind: sequenceNode, items: make([]*tree, 0, len(n.Content))}
		for _, item := range n.Content {
			v, err := c.convert(item, underAlias)
			if err != nil {
				return nil, err
			}
			t.items = append(t.items, v)
		}
		return t, nil
	case mappingNode:
		return c.mapping(n, underAlias)
	}
	return nil, fmt.Errorf("line %d: unknown node kind %d: %w", n.Line, n.Kind, ErrUnsupported)
}

func (c *converter) mapping(n *yaml.Node, underAlias bool) (*tree, error) {
	t := &tree{kind: mappingNode}
	// seen answers "is this key there yet" in constant time while the mapping is
	// built: asking t.get after every append would rebuild its index each time.
	var seen map[string]bool
	if len(n.Content)/2 > indexedKeys {
		seen = make(map[string]bool, len(n.Content)/2)
	}
	has := func(key string) bool {
		if seen != nil {
			return seen[key]
		}
		_, at := t.get(key)
		return at >= 0
	}
	add := func(key string, val *tree) {
		t.keys = append(t.keys, key)
		t.vals = append(t.vals, val)
		if seen != nil {
			seen[key] = true
		}
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, err := keyString(k)
		if err != nil {
			return nil, err
		}
		if key == mergeKey && k.Style == 0 && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if has(key) {
			return nil, fmt.Errorf("line %d: key %q appears twice: %w", k.Line, key, ErrAmbiguous)
		}
		val, err := c.convert(v, underAlias)
		if err != nil {
			return nil, err
		}
		add(key, val)
	}
	// Merged keys never override the mapping's own keys; earlier merges win.
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if resolveAlias(m).Kind == sequenceNode {
			sources = resolveAlias(m).Content
		}
		for _, s := range sources {
			mt, err := c.convert(s, underAlias)
			if err != nil {
				return nil, err
			}
			if mt.kind != mappingNode {
				return nil, fmt.Errorf("line %d: merge key value is not a mapping: %w", s.Line, ErrUnsupported)
			}
			if seen == nil && len(t.keys)+len(mt.keys) > indexedKeys {
				seen = make(map[string]bool, len(t.keys)+len(mt.keys))
				for _, k := range t.keys {
					seen[k] = true
				}
			}
			for i, k := range mt.keys {
				if !has(k) {
					add(k, mt.vals[i])
				}
			}
		}
	}
	return t, nil
}

func keyString(k *yaml.Node) (string, error) {
	k = resolveAlias(k)
	if k.Kind != scalarNode {
		return "", fmt.Errorf("line %d: mapping key is not a scalar: %w", k.Line, ErrUnsupported)
	}
	return k.Value, nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == aliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// plain converts a tree into the Go values yaml.v3 would decode it to.
func (t *tree) plain() any {
	switch t.kind {
	case mappingNode:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			m[k] = t.vals[i].plain()
		}
		return m
	case sequenceNode:
		s := make([]any, len(t.items))
		for i, item := range t.items {
			s[i] = item.plain()
		}
		return s
	}
	switch t.tag {
	case "!!str":
		return t.value
	case "!!null":
		return nil
	}
	var v any
	n := yaml.Node{Kind: scalarNode, Tag: t.tag, Value: t.value}
	if err := n.Decode(&v); err != nil {
		return t.value
	}
	return v
}

// diff returns the first path where two trees differ, or "" when equal.
func diff(a, b *tree, at string) string {
	if a.kind != b.kind {
		return at
	}
	switch a.kind {
	case scalarNode:
		if a.tag != b.tag || a.value != b.value {
			return at
		}
	case sequenceNode:
		if len(a.items) != len(b.items) {
			return at
		}
		for i := range a.items {
			if d := diff(a.items[i], b.items[i], fmt.Sprintf("%s[%d]", at, i)); d != "" {
				return d
			}
		}
	case mappingNode:
		if len(a.keys) != len(b.keys) {
			return at
		}
		for i, k := range a.keys {
			bv, j := b.get(k)
			if j < 0 {
				return at + "." + k
			}
			if d := diff(a.vals[i], bv, at+"."+k); d != "" {
				return d
			}
		}
	}
	return ""
}

// applyTree applies an op to a document's meaning: what the edited file must
// read back as. It is written independently of the byte editing on purpose.
func applyTree(doc *tree, op Op) error {
	if op.Kind == OpDelete {
		if len(op.Path) == 0 {
			return errors.New("cannot delete the document root")
		}
		parent := doc
		for _, s := range op.Path[:len(op.Path)-1] {
			next, err := treeStep(parent, s, false)
			if err != nil {
				return err
			}
			if next == nil {
				return ErrNotFound
			}
			parent = next
		}
		return treeRemove(parent, op.Path[len(op.Path)-1])
	}
	cur := doc
	for _, s := range op.Path {
		next, err := treeStep(cur, s, true)
		if err != nil {
			return err
		}
		if next == nil {
			return ErrNotFound
		}
		cur = next
	}
	*cur = *op.Value.(*tree)
	return nil
}

// treeStep goes one step down, creating the step's node when create is set.
func treeStep(cur *tree, s Step, create bool) (*tree, error) {
	if cur.isNull() && create {
		*cur = tree{kind: mappingNode}
		if s.kind() != stepKey {
			*cur = tree{kind: sequenceNode}
		}
	}
	switch s.kind() {
	case stepKey:
		if cur.kind != mappingNode {
			return nil, ErrNotMapping
		}
		if v, _ := cur.get(s.Key); v != nil || !create {
			return v, nil
		}
		v := &tree{kind: scalarNode, tag: "!!null"}
		cur.set(s.Key, v)
		return v, nil
	case stepIndex:
		if cur.kind != sequenceNode {
			return nil, ErrNotMapping
		}
		if s.Index < len(cur.items) {
			return cur.items[s.Index], nil
		}
		if s.Index == len(cur.items) && create {
			v := &tree{kind: scalarNode, tag: "!!null"}
			cur.items = append(cur.items, v)
			return v, nil
		}
		return nil, nil
	default:
		if cur.kind != sequenceNode {
			return nil, ErrNotMapping
		}
		at := treeMatch(cur, s.Match)
		switch {
		case len(at) == 1:
			return cur.items[at[0]], nil
		case len(at) > 1:
			return nil, ErrAmbiguous
		case !create:
			return nil, nil
		}
		item, err := itemFor(s, &tree{kind: mappingNode})
		if err != nil {
			return nil, err
		}
		cur.items = append(cur.items, item)
		return item, nil
	}
}

func treeMatch(seq *tree, match map[string]string) []int {
	var at []int
	for i, item := range seq.items {
		if item.kind != mappingNode {
			continue
		}
		ok := true
		for f, want := range match {
			if v, _ := item.get(f); v == nil || v.kind != scalarNode || v.value != want {
				ok = false
			}
		}
		if ok {
			at = append(at, i)
		}
	}
	return at
}

func treeRemove(parent *tree, s Step) error {
	switch s.kind() {
	case stepKey:
		if parent.kind != mappingNode {
			return ErrNotMapping
		}
		_, i := parent.get(s.Key)
		if i < 0 {
			return ErrNotFound
		}
		parent.keys = append(parent.keys[:i:i], parent.keys[i+1:]...)
		parent.vals = append(parent.vals[:i:i], parent.vals[i+1:]...)
		parent.index = nil // positions after i moved
		return nil
	}
	if parent.kind != sequenceNode {
		return ErrNotMapping
	}
	i := s.Index
	if s.kind() == stepMatch {
		at := treeMatch(parent, s.Match)
		if len(at) != 1 {
			return ErrNotFound
		}
		i = at[0]
	}
	if i >= len(parent.items) {
		return ErrNotFound
	}
	parent.items = append(parent.items[:i:i], parent.items[i+1:]...)
	return nil
}
