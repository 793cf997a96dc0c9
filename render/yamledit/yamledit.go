// Package yamledit edits YAML and JSON files by changing bytes, not trees.
//
// It parses with gopkg.in/yaml.v3 only to find where nodes are, then splices the
// bytes of the one scalar it changes, or inserts lines indented like their
// neighbours. Comments, key order, quoting style, blank lines, document separators,
// CRLF line endings and a missing final newline survive. Every edit is checked
// before it is returned: the result must parse, and every document must read back
// exactly as the requested change says, or Edit fails instead of returning bytes.
package yamledit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Errors a caller can test with errors.Is.
var (
	// ErrNotFound: Delete of a path that does not exist, or a document index past
	// the end of the file.
	ErrNotFound = errors.New("path not found")
	// ErrAliasBomb: expanding the document's aliases would produce too many nodes.
	ErrAliasBomb = errors.New("alias expansion exceeds limit")
	// ErrNotMapping: the path crosses a value that cannot hold the next step (a
	// scalar, or a sequence addressed by key, or a mapping addressed by index).
	ErrNotMapping = errors.New("path crosses a value of the wrong kind")
	// ErrAmbiguous: a Match step selects more than one sequence item, or a mapping
	// has the same key twice.
	ErrAmbiguous = errors.New("path is ambiguous")
	// ErrUnsupported: the file or the value uses something the editor does not
	// change safely (UTF-16, unusual line breaks, keys that are not scalars...).
	ErrUnsupported = errors.New("unsupported input")
)

// errSelfCheck marks an edit whose result did not read back as requested; it is
// never expected and is reported instead of returning damaged bytes.
var errSelfCheck = errors.New("edit check failed")

// Path addresses a node inside one document, from the document root.
type Path []Step

// Step is one hop: a mapping key, or a sequence item chosen by index or by a field value.
type Step struct {
	Key   string            // mapping key (when Index < 0 and Match == nil)
	Index int               // sequence index; -1 when not used
	Match map[string]string // sequence item whose scalar fields equal these (e.g. {"name": "api"})
}

// K is a mapping key step.
func K(key string) Step { return Step{Key: key, Index: -1} }

// I is a sequence index step. An index equal to the sequence length appends.
func I(i int) Step { return Step{Index: i} }

// M is a sequence item step: the item whose field has this scalar value.
func M(field, value string) Step {
	return Step{Index: -1, Match: map[string]string{field: value}}
}

type stepKind int

const (
	stepKey stepKind = iota
	stepIndex
	stepMatch
)

// kind reads a Step leniently: a literal Step{Key: "x"} (Index left at zero) is a
// key step, since an index step never carries a key.
func (s Step) kind() stepKind {
	switch {
	case s.Match != nil:
		return stepMatch
	case s.Index >= 0 && s.Key == "":
		return stepIndex
	default:
		return stepKey
	}
}

// String renders a step as in spec.containers[name=api].
func (s Step) String() string {
	switch s.kind() {
	case stepIndex:
		return "[" + strconv.Itoa(s.Index) + "]"
	case stepMatch:
		keys := slices.Sorted(maps.Keys(s.Match))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + s.Match[k]
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return s.Key
	}
}

// String renders a path as in spec.template.spec.containers[name=api].image.
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && s.kind() == stepKey {
			b.WriteByte('.')
		}
		b.WriteString(s.String())
	}
	if b.Len() == 0 {
		return "(document root)"
	}
	return b.String()
}

// OpKind says what an Op does.
type OpKind int

const (
	// OpSet replaces the value at Path, creating missing keys and matched items.
	OpSet OpKind = iota
	// OpDelete removes the key or sequence item at Path with its whole block.
	OpDelete
)

// Op is one change.
type Op struct {
	Path Path
	// Set: replace the scalar at Path (keeping quote style when the new value allows),
	// or create the missing keys / matched sequence item along Path. Value is a string
	// (scalar, written as a YAML plain scalar when safe, quoted otherwise — callers may
	// pass Quoted("...") to force quoting), an int/bool/float, nil, a map[string]any,
	// a Mapping (ordered), or []any; structures are written in block style with the
	// indentation and sequence style ("- " indented or not) of their neighbours.
	// Setting a structure on an existing structure changes only what differs.
	// Delete: remove the key (or matched sequence item) with its whole block.
	Kind  OpKind
	Value any
	// Sorted: a key Set adds to a block mapping of two keys or more that are
	// in sorted order (by bytes, or ignoring case) goes to its place in that
	// order, above the comment lines of the key it comes before, instead of
	// after the last key; a mapping whose keys are in no order keeps the
	// order its author gave it, and the key is appended.
	Sorted bool
}

// Set is shorthand for an OpSet.
func Set(p Path, value any) Op { return Op{Path: p, Kind: OpSet, Value: value} }

// SetSorted is an OpSet whose new keys go to their sorted place (Op.Sorted).
func SetSorted(p Path, value any) Op { return Op{Path: p, Kind: OpSet, Value: value, Sorted: true} }

// Delete is shorthand for an OpDelete.
func Delete(p Path) Op { return Op{Path: p, Kind: OpDelete} }

// Quoted is a string value that is always written quoted.
type Quoted string

// Field is one entry of a Mapping.
type Field struct {
	Key   string
	Value any
}

// Mapping is a mapping value whose keys are written in this order. A plain
// map[string]any is written with "name" first and the other keys sorted.
type Mapping []Field

// Warning says which lines of the result changed shape because the file had to
// be restructured (a flow collection or an alias on the path, a multi-line scalar
// replaced). Line is 1-based in the returned bytes.
type Warning struct {
	Line    int
	Message string
}

func (w Warning) String() string { return fmt.Sprintf("line %d: %s", w.Line, w.Message) }

// Document is one document of a file.
type Document struct {
	Index  int            // 0-based position in the file, counting empty documents
	Line   int            // 1-based line where the document starts
	Object map[string]any // the document decoded, nil when it is not a mapping
	Empty  bool           // the document holds no content (only comments, or nothing)
}

// Edit applies ops, in order, to document docIndex (0-based, counting `---`-separated
// documents of a multi-document file) and returns the new file bytes. Warnings say
// which lines changed shape when a file had to be restructured (flow-style collection
// on the path, anchors/aliases on the path, a multi-line scalar replaced); every other
// line is untouched. A scalar added to or removed from a flow collection written on
// one line ("resources: [a.yaml, b.yaml]") is spliced in place, quoted like the
// member before it; a structure added to one rewrites it in block style.
func Edit(src []byte, docIndex int, ops ...Op) (out []byte, warnings []Warning, err error) {
	res, err := edit(src, docIndex, ops)
	if err != nil {
		return nil, nil, err
	}
	return res.out, res.publicWarnings(), nil
}

// Documents returns the documents of a file, each with its index, decoded into a
// generic map (for matching apiVersion/kind/metadata), and the 1-based line where it
// starts. Alias expansion is bounded (alias bombs are refused with an error).
func Documents(src []byte) ([]Document, error) {
	t, err := newText(src)
	if err != nil {
		return nil, err
	}
	docs, err := parseDocuments(t.b, -1)
	if err != nil {
		return nil, err
	}
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = Document{Index: i, Line: d.Line, Empty: isEmptyDocument(d)}
		v, err := toTree(d, aliasBudget)
		if err != nil {
			return nil, fmt.Errorf("document %d (line %d): %w", i, d.Line, err)
		}
		if obj, ok := v.plain().(map[string]any); ok {
			out[i].Object = obj
		}
	}
	return out, nil
}

// Lookup reads the scalar value at Path in document docIndex (for tests and callers).
// Aliases and merge keys are followed. A path ending at a collection is an error.
func Lookup(src []byte, docIndex int, p Path) (value string, found bool, err error) {
	t, err := newText(src)
	if err != nil {
		return "", false, err
	}
	doc, err := documentAt(t.b, docIndex)
	if err != nil {
		return "", false, err
	}
	n, err := lookupNode(doc, p)
	if err != nil || n == nil {
		return "", false, err
	}
	if n.Kind != scalarNode {
		return "", false, fmt.Errorf("lookup %s: value is a collection, not a scalar: %w", p, ErrNotMapping)
	}
	return n.Value, true, nil
}
