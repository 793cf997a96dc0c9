package policy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/render"
)

// step is one step of a path into a manifest: a mapping key, or the item of a
// list whose "name" is name (containers are found by name, not position: a patch
// may have added one before it in the render), or, for items without a name, the
// item at index.
type step struct {
	key   string
	name  string
	item  bool
	index int
	// positional: the item at index, not by name.
	positional bool
}

func key(k string) step      { return step{key: k} }
func named(name string) step { return step{name: name, item: true} }
func pathOf(keys ...string) []step {
	out := make([]step, len(keys))
	for i, k := range keys {
		out[i] = key(k)
	}
	return out
}

// sources finds the manifest lines rendered objects come from, in the tree an
// Application was rendered from. Files are parsed once and kept for the app.
type sources struct {
	fsys  fs.FS
	files map[string][]*yaml.Node // nil: unreadable
}

func newSources(fsys fs.FS) *sources {
	return &sources{fsys: fsys, files: map[string][]*yaml.Node{}}
}

// file of an object: a Directory app's document or the file kustomize read it
// from (a generated object's is the kustomization that generates it). A Helm
// object's template is not known.
func fileOf(o render.Object) string {
	if o.File != "" {
		return o.File
	}
	if !o.Remote {
		return o.Origin
	}
	return ""
}

// locate is the file and line of path in o's source document: the line of the
// deepest step the document has (a field a transformer set is marked where its
// object is), or line 0 when the source is not known.
func (s *sources) locate(o render.Object, path []step) (string, int) {
	file := fileOf(o)
	if file == "" || s.fsys == nil {
		return "", 0
	}
	docs := s.parse(file)
	if len(docs) == 0 {
		return file, 1
	}
	doc := s.document(docs, o)
	if doc == nil {
		return file, 1
	}
	if o.GeneratedBy != "" {
		// A generator's object is the kustomization's entry for it.
		return file, generatorLine(doc, o)
	}
	line := doc.Line
	n := doc
	for _, st := range path {
		k, v := child(n, st)
		if v == nil {
			break
		}
		if k != nil {
			line = k.Line
		} else {
			line = v.Line
		}
		n = v
	}
	return file, line
}

func (s *sources) parse(file string) []*yaml.Node {
	if docs, ok := s.files[file]; ok {
		return docs
	}
	s.files[file] = nil
	f, err := s.fsys.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	// The render read this file within render's bounds already; the limit keeps a
	// file swapped since from costing more.
	data, err := io.ReadAll(io.LimitReader(f, render.MaxFileSize+1))
	if err != nil || len(data) > render.MaxFileSize {
		return nil
	}
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil
		}
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			docs = append(docs, n.Content[0])
		} else {
			docs = append(docs, &n)
		}
	}
	s.files[file] = docs
	return docs
}

// document picks o's document in its file: a Directory app's by position when it
// still names the object, else the one of o's kind whose name is o's, or is in
// o's (kustomize prefixes and suffixes names), the longest such.
func (s *sources) document(docs []*yaml.Node, o render.Object) *yaml.Node {
	kind, name := manifestKind(o.Manifest), manifestName(o.Manifest)
	if o.GeneratedBy != "" {
		return docs[0]
	}
	if o.File != "" && o.Doc >= 0 && o.Doc < len(docs) && scalarAt(docs[o.Doc], "kind") == kind && scalarAt(docs[o.Doc], "metadata", "name") == name {
		return docs[o.Doc]
	}
	var best *yaml.Node
	bestLen := -1
	for _, d := range docs {
		if scalarAt(d, "kind") != kind {
			continue
		}
		n := scalarAt(d, "metadata", "name")
		if n == name {
			return d
		}
		if strings.Contains(name, n) && len(n) > bestLen {
			best, bestLen = d, len(n)
		}
	}
	if best == nil && len(docs) == 1 {
		return docs[0]
	}
	return best
}

// generatorLine is the line of the secretGenerator (or configMapGenerator) entry
// that makes o, found by the generated name's stem.
func generatorLine(kustomization *yaml.Node, o render.Object) int {
	field := "secretGenerator"
	if o.GeneratedBy == "ConfigMapGenerator" {
		field = "configMapGenerator"
	}
	k, list := valueAt(kustomization, field)
	if list == nil {
		return kustomization.Line
	}
	name := manifestName(o.Manifest)
	best, bestLen := k.Line, -1
	for _, entry := range list.Content {
		n := scalarAt(entry, "name")
		if n != "" && strings.Contains(name, n) && len(n) > bestLen {
			best, bestLen = entry.Line, len(n)
			for _, values := range []string{"literals", "envs", "env", "files"} {
				if vk, _ := valueAt(entry, values); vk != nil {
					best = vk.Line
					break
				}
			}
		}
	}
	return best
}

// child follows one step from n.
func child(n *yaml.Node, st step) (k, v *yaml.Node) {
	if !st.item {
		return valueAt(n, st.key)
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil
	}
	if st.positional {
		if st.index < len(n.Content) {
			return nil, n.Content[st.index]
		}
		return nil, nil
	}
	for _, item := range n.Content {
		if scalarAt(item, "name") == st.name {
			return nil, item
		}
	}
	return nil, nil
}

func scalarAt(n *yaml.Node, path ...string) string {
	_, v := valueAt(n, path...)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

func manifestKind(m map[string]any) string {
	k, _ := m["kind"].(string)
	return k
}

func manifestName(m map[string]any) string {
	meta, _ := m["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	return n
}
