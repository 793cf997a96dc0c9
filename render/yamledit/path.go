package yamledit

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// hop is one node reached while walking a path.
type hop struct {
	raw      *yaml.Node // the node as written (may be an alias)
	res      *yaml.Node // the node an alias points to, or raw
	parent   *yaml.Node // collection holding raw; nil at the root
	key      *yaml.Node // mapping key of raw, when parent is a mapping
	pos      int        // index of raw in parent.Content
	indent   int        // parent's block indentation; -1 at the root or in flow
	inFlow   bool       // parent is a flow collection
	viaMerge bool       // found through a merge key (<<), not in the mapping itself
}

func isImplicitNull(n *yaml.Node) bool {
	return n.Kind == scalarNode && n.Tag == "!!null" && n.Value == "" && n.Style == 0
}

func isNull(n *yaml.Node) bool { return n.Kind == scalarNode && n.ShortTag() == "!!null" }

func isMerge(k *yaml.Node) bool {
	return k.Kind == scalarNode && k.Value == mergeKey && k.Style == 0 && k.ShortTag() == "!!merge"
}

// walk follows the path as far as it exists. missing is the index of the first
// step that does not exist, or -1.
func (p *planner) walk(path Path) (hops []hop, missing int, err error) {
	hops = []hop{{raw: p.root, res: resolveAlias(p.root), indent: -1}}
	for i, s := range path {
		cur := hops[len(hops)-1].res
		where := func() string { return Path(path[:i]).String() }
		next := hop{parent: cur, indent: -1, inFlow: cur.Style&yaml.FlowStyle != 0}
		switch s.kind() {
		case stepKey:
			if cur.Kind != mappingNode {
				if isNull(cur) {
					return hops, i, nil
				}
				return nil, 0, fmt.Errorf("%s is a %s, not a mapping: %w", where(), kindName(cur), ErrNotMapping)
			}
			if err := plainKeys(cur); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", where(), err)
			}
			owner, pos, merged, err := mappingGet(cur, s.Key, 0)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", where(), err)
			}
			if owner == nil {
				return hops, i, nil
			}
			next.parent, next.key, next.pos, next.viaMerge = owner, owner.Content[pos-1], pos, merged
			next.inFlow = owner.Style&yaml.FlowStyle != 0
		case stepIndex, stepMatch:
			if cur.Kind != sequenceNode {
				if isNull(cur) {
					return hops, i, nil
				}
				return nil, 0, fmt.Errorf("%s is a %s, not a sequence: %w", where(), kindName(cur), ErrNotMapping)
			}
			if s.kind() == stepIndex {
				switch {
				case s.Index < len(cur.Content):
					next.pos = s.Index
				case s.Index == len(cur.Content):
					return hops, i, nil
				default:
					return nil, 0, fmt.Errorf("%s has %d items, no index %d: %w", where(), len(cur.Content), s.Index, ErrNotFound)
				}
			} else {
				at, err := matchItems(cur, s.Match)
				if err != nil {
					return nil, 0, fmt.Errorf("%s: %w", where(), err)
				}
				switch len(at) {
				case 0:
					return hops, i, nil
				case 1:
					next.pos = at[0]
				default:
					return nil, 0, fmt.Errorf("%s: %d items match %s: %w", where(), len(at), s, ErrAmbiguous)
				}
			}
		}
		next.raw = next.parent.Content[next.pos]
		next.res = resolveAlias(next.raw)
		if !next.inFlow {
			ind, err := p.t.childIndent(next.parent)
			if err != nil {
				return nil, 0, err
			}
			next.indent = ind
		}
		hops = append(hops, next)
	}
	return hops, -1, nil
}

// plainKeys refuses mappings written with explicit "?" keys or keys that are
// not scalars: their bytes do not follow the "key: value" shape edits assume.
func plainKeys(m *yaml.Node) error {
	for i := 0; i < len(m.Content); i += 2 {
		k := resolveAlias(m.Content[i])
		if k.Kind != scalarNode || isImplicitNull(k) {
			return fmt.Errorf("line %d: mapping key is not a plain scalar: %w", m.Content[i].Line, ErrUnsupported)
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case mappingNode:
		return "mapping"
	case sequenceNode:
		return "sequence"
	case aliasNode:
		return "alias"
	}
	return "scalar"
}

// mappingGet finds key in m, then in what m merges. It returns the mapping that
// holds the key and the index of the value in its Content.
func mappingGet(m *yaml.Node, key string, depth int) (owner *yaml.Node, pos int, merged bool, err error) {
	if depth > 20 {
		return nil, 0, false, fmt.Errorf("merge keys nested too deeply: %w", ErrUnsupported)
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMerge(k) {
			merges = append(merges, resolveAlias(m.Content[i+1]))
			continue
		}
		if rk := resolveAlias(k); rk.Kind == scalarNode && rk.Value == key {
			if owner != nil {
				return nil, 0, false, fmt.Errorf("key %q appears twice (lines %d and %d): %w", key, owner.Content[pos-1].Line, k.Line, ErrAmbiguous)
			}
			owner, pos = m, i+1
		}
	}
	if owner != nil {
		return owner, pos, false, nil
	}
	for _, src := range merges {
		sources := []*yaml.Node{src}
		if src.Kind == sequenceNode {
			sources = src.Content
		}
		for _, s := range sources {
			if s = resolveAlias(s); s.Kind != mappingNode {
				continue
			}
			o, at, _, err := mappingGet(s, key, depth+1)
			if err != nil || o != nil {
				return o, at, true, err
			}
		}
	}
	return nil, 0, false, nil
}

// matchItems returns the positions of the mapping items whose fields have the
// given scalar values.
func matchItems(seq *yaml.Node, match map[string]string) ([]int, error) {
	var at []int
	for i, item := range seq.Content {
		it := resolveAlias(item)
		if it.Kind != mappingNode {
			continue
		}
		ok := true
		for field, want := range match {
			owner, pos, _, err := mappingGet(it, field, 0)
			if err != nil {
				return nil, err
			}
			if owner == nil {
				ok = false
				break
			}
			if v := resolveAlias(owner.Content[pos]); v.Kind != scalarNode || v.Value != want {
				ok = false
				break
			}
		}
		if ok {
			at = append(at, i)
		}
	}
	return at, nil
}

// lookupNode follows a path for reading: aliases and merge keys are followed.
// It returns nil when the path does not exist.
func lookupNode(doc *yaml.Node, path Path) (*yaml.Node, error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	p := &planner{root: doc.Content[0]}
	cur := resolveAlias(p.root)
	for i, s := range path {
		where := Path(path[:i]).String()
		switch s.kind() {
		case stepKey:
			if cur.Kind != mappingNode {
				if isNull(cur) {
					return nil, nil
				}
				return nil, fmt.Errorf("%s is a %s, not a mapping: %w", where, kindName(cur), ErrNotMapping)
			}
			owner, pos, _, err := mappingGet(cur, s.Key, 0)
			if err != nil || owner == nil {
				return nil, err
			}
			cur = resolveAlias(owner.Content[pos])
		default:
			if cur.Kind != sequenceNode {
				if isNull(cur) {
					return nil, nil
				}
				return nil, fmt.Errorf("%s is a %s, not a sequence: %w", where, kindName(cur), ErrNotMapping)
			}
			pos := s.Index
			if s.kind() == stepMatch {
				at, err := matchItems(cur, s.Match)
				if err != nil {
					return nil, err
				}
				if len(at) > 1 {
					return nil, fmt.Errorf("%s: %d items match %s: %w", where, len(at), s, ErrAmbiguous)
				}
				if len(at) == 0 {
					return nil, nil
				}
				pos = at[0]
			}
			if pos >= len(cur.Content) {
				return nil, nil
			}
			cur = resolveAlias(cur.Content[pos])
		}
	}
	return cur, nil
}
