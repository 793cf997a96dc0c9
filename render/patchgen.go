package render

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// node helpers build YAML documents with a fixed key order.
func mapNode(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, strNode(kv[i].(string)), valueNode(kv[i+1]))
	}
	return n
}

func seqNode(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

// strNode is a string scalar, double-quoted when yaml.v3 would quote the Go
// string: a node tagged !!str is written plain whenever YAML 1.2 reads it back as
// a string, but kustomize reads a JSON 6902 patch as YAML 1.1, where a plain yes,
// no, on or off is a bool.
func strNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if !strings.ContainsAny(s, "\n\r") {
		if out, err := yaml.Marshal(s); err == nil && string(out) != s+"\n" {
			n.Style = yaml.DoubleQuotedStyle
		}
	}
	return n
}

func nullNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

func valueNode(v any) *yaml.Node {
	switch x := v.(type) {
	case *yaml.Node:
		return x
	case string:
		return strNode(x)
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(x)}
	case nil:
		return nullNode()
	default:
		panic(fmt.Sprintf("valueNode: unsupported %T", v))
	}
}

func encodeNode(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// newPatchFileName is the name of the patch render adds to an overlay.
func newPatchFileName(kind, name string) string {
	return fmt.Sprintf("kukie-%s-%s.yaml", strings.ToLower(kind), name)
}

// strategicMergePatch writes a new strategic-merge patch that makes change c to the
// target (named as in its source document) and nothing else.
func strategicMergePatch(apiVersion, kind, name string, c Change, rendered, expected map[string]any) ([]byte, error) {
	meta := mapNode("name", name)
	var spec *yaml.Node
	if c.Replicas != nil {
		spec = mapNode("replicas", c.Replicas.Count)
	} else {
		cname := c.containerName()
		rct, ok := findContainer(rendered, kind, cname)
		if !ok {
			return nil, refuse(CodeContainerNotFound, "%s %s has no container %q", kind, name, cname)
		}
		ect, _ := findContainer(expected, kind, cname)
		ct := mapNode("name", cname)
		switch {
		case c.Image != nil:
			img, _ := ect.body["image"].(string)
			ct.Content = append(ct.Content, strNode("image"), strNode(img))
		case c.Env != nil:
			var items []*yaml.Node
			for _, n := range slices.Sorted(maps.Keys(c.Env.Set)) {
				it := mapNode("name", n, "value", c.Env.Set[n])
				if cur, ok := envEntry(rct.body, n); ok && cur["valueFrom"] != nil {
					it.Content = append(it.Content, strNode("valueFrom"), nullNode())
				}
				items = append(items, it)
			}
			for _, n := range c.Env.Unset {
				items = append(items, mapNode("name", n, "$patch", "delete"))
			}
			ct.Content = append(ct.Content, strNode("env"), seqNode(items...))
		case c.Resources != nil:
			res := mapNode()
			for _, section := range []string{"requests", "limits"} {
				changes := c.Resources.Requests
				if section == "limits" {
					changes = c.Resources.Limits
				}
				if len(changes) == 0 {
					continue
				}
				m := mapNode()
				for _, n := range slices.Sorted(maps.Keys(changes)) {
					var v any = changes[n]
					if changes[n] == "" {
						v = nil
					}
					m.Content = append(m.Content, strNode(n), valueNode(v))
				}
				res.Content = append(res.Content, strNode(section), m)
			}
			ct.Content = append(ct.Content, strNode("resources"), res)
		}
		var inner *yaml.Node = mapNode(rct.list, seqNode(ct))
		path := podSpecPath(kind)
		for i := len(path) - 1; i >= 1; i-- {
			inner = mapNode(path[i], inner)
		}
		spec = inner
	}
	doc := mapNode("apiVersion", apiVersion, "kind", kind, "metadata", meta, "spec", spec)
	return encodeNode(doc)
}

func envList(ct map[string]any) []any {
	env, _ := ct["env"].([]any)
	return env
}

// envJSONPatch writes a JSON 6902 patch that makes env change e to container ct of
// a kind object: changed entries replaced where they are, removed ones removed, new
// ones appended in name order. Every entry addressed by index is first tested to
// carry its name, so the patch fails instead of changing another variable when the
// base's env order changes.
func envJSONPatch(kind string, ct container, e *Env) ([]byte, error) {
	ops, err := envJSONPatchOps(kind, ct, e)
	if err != nil {
		return nil, err
	}
	return encodeNode(seqNode(ops...))
}

// envJSONPatchOps are the operations of envJSONPatch.
func envJSONPatchOps(kind string, ct container, e *Env) ([]*yaml.Node, error) {
	base := "/" + strings.Join(podSpecPath(kind), "/") + "/" + ct.list + "/" + strconv.Itoa(ct.index) + "/env"
	at := map[string]int{}
	for i, it := range envList(ct.body) {
		if m, ok := it.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				at[n] = i
			}
		}
	}
	var tests, replaces, removes, adds []*yaml.Node
	op := func(kind, pointer string, value ...*yaml.Node) *yaml.Node {
		n := mapNode("op", kind, "path", pointer)
		if len(value) == 1 {
			n.Content = append(n.Content, strNode("value"), value[0])
		}
		return n
	}
	var touched []int
	for _, n := range slices.Sorted(maps.Keys(e.Set)) {
		entry := mapNode("name", n, "value", e.Set[n])
		if i, ok := at[n]; ok {
			touched = append(touched, i)
			replaces = append(replaces, op("replace", base+"/"+strconv.Itoa(i), entry))
		} else {
			adds = append(adds, op("add", base+"/-", entry))
		}
	}
	var gone []int
	for _, n := range e.Unset {
		if i, ok := at[n]; ok {
			touched = append(touched, i)
			gone = append(gone, i)
		}
	}
	sort.Ints(touched)
	names := make(map[int]string, len(at))
	for n, i := range at {
		names[i] = n
	}
	for _, i := range touched {
		tests = append(tests, op("test", base+"/"+strconv.Itoa(i)+"/name", strNode(names[i])))
	}
	// Removed from the last, so the indexes of the others hold.
	sort.Sort(sort.Reverse(sort.IntSlice(gone)))
	for _, i := range gone {
		removes = append(removes, op("remove", base+"/"+strconv.Itoa(i)))
	}
	ops := append(append(append(tests, replaces...), removes...), adds...)
	if len(ops) == 0 {
		return nil, notApplicable("the env change names no variable of container %s", ct.body["name"])
	}
	return ops, nil
}

// editValue is the value of node n, built by the helpers above, for a
// yamledit Set: keys in their order, and a string the helpers quote (one
// YAML 1.1 reads as another type) quoted.
func editValue(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(yamledit.Mapping, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m = append(m, yamledit.Field{Key: n.Content[i].Value, Value: editValue(n.Content[i+1])})
		}
		return m
	case yaml.SequenceNode:
		items := make([]any, len(n.Content))
		for i, c := range n.Content {
			items[i] = editValue(c)
		}
		return items
	}
	switch {
	case n.Tag == "!!null":
		return nil
	case n.Tag == "!!int":
		if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return i
		}
	case n.Style == yaml.DoubleQuotedStyle:
		return yamledit.Quoted(n.Value)
	}
	return n.Value
}
