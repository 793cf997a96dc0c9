package render

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzScanYAML checks the bounds every repository file is read under against
// what the YAML parser makes of the file: what scanYAML accepts holds no more
// documents and nodes (aliases expanded) than it counted, and nests, spreads and
// expands no further than the bounds allow; what it refuses, it refuses with a
// bound's code, naming the file.
func FuzzScanYAML(f *testing.F) {
	for _, seed := range []string{
		"a: 1\nb: [1, 2, {c: d}]\n",
		"a: &x [1, 2, 3]\nb: *x\nc: *x\n---\nd: 1\n",
		"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
		"[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]",
		"? [a, b]\n: {c, d}\n",
		"---\n...\n---\n- a\n- - b\n",
		"a: !!binary aGk=\nb: !x &y {<<: *y}\n",
		"{a: 1, b: 2, c: 3, d: 4, e: 5}",
		"k: |\n  line\n  line\n",
		"&a a: *a",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scanYAML("f.yaml", data)
		if s.err != nil {
			var r *Refusal
			if !errors.As(s.err, &r) || (r.Code != CodeTooLarge && r.Code != CodeAliasBomb && r.Code != CodeFileTooLarge) ||
				!strings.HasPrefix(r.Reason, "f.yaml") {
				t.Fatalf("refused without a bound's code and the file: %#v", s.err)
			}
			return
		}
		docs, nodes := 0, 0
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc yaml.Node
			if dec.Decode(&doc) != nil {
				break
			}
			docs++
			c := expansion{limit: MaxRenderNodes + 1}
			c.walk(&doc, 0)
			nodes += c.nodes
			switch {
			case c.nodes > MaxRenderNodes || c.depth > MaxDepth || c.widest > MaxMappingKeys:
				t.Fatalf("accepted a document of %d nodes (aliases expanded), %d deep, a mapping of %d keys", c.nodes, c.depth, c.widest)
			case c.nodes-c.parsed > MaxAliasNodes:
				t.Fatalf("accepted a document whose aliases add %d nodes", c.nodes-c.parsed)
			}
		}
		if docs > s.docs || nodes > s.nodes || docs > MaxRenderDocuments || nodes > MaxRenderNodes {
			t.Fatalf("counted %d documents and %d nodes, the parser makes %d and %d", s.docs, s.nodes, docs, nodes)
		}
	})
}

// expansion measures a document as a decoder of it into Go values sees it,
// every alias expanded, counting no further than limit nodes.
type expansion struct {
	limit                        int
	nodes, parsed, depth, widest int
	seen                         map[*yaml.Node]bool
}

func (e *expansion) walk(n *yaml.Node, depth int) {
	if e.nodes > e.limit || depth > MaxDepth+1 {
		return
	}
	if e.seen == nil {
		e.seen = map[*yaml.Node]bool{}
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		e.walk(n.Alias, depth)
		return
	}
	e.nodes++
	if !e.seen[n] {
		e.seen[n] = true
		e.parsed++
	}
	if n.Kind != yaml.ScalarNode && n.Kind != yaml.AliasNode {
		e.depth = max(e.depth, depth+1)
	}
	if n.Kind == yaml.MappingNode {
		e.widest = max(e.widest, len(n.Content)/2)
	}
	for _, child := range n.Content {
		e.walk(child, depth+1)
	}
}

// FuzzParseKustomization reads any kustomization file a repository holds the
// way a render does, within the bounds first: parsing never panics, and the
// parse shared through the memo is the file's own parse.
func FuzzParseKustomization(f *testing.F) {
	for _, seed := range []string{
		"resources:\n- deploy.yaml\n- ../base\n",
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nimages:\n- name: web\n  newTag: \"1\"\n",
		"bases: [../base]\npatchesStrategicMerge: [p.yaml]\npatchesJson6902:\n- target: {kind: Deployment, name: web}\n  path: j.yaml\n",
		"commonLabels: {a: b}\nvars:\n- name: X\n  objref: {kind: Service, name: web, apiVersion: v1}\n",
		"helmCharts:\n- name: web\n  valuesInline: {a: 1}\nreplicas:\n- name: web\n  count: 2\n",
		"resources: [a]\nresources: [b]\n",
		"replacements:\n- source: {kind: ConfigMap, fieldPath: data.x}\n  targets: [{select: {kind: Deployment}, fieldPaths: [spec.replicas]}]\n",
		"patches:\n- patch: |-\n    - op: add\n      path: /x\n      value: 1\n",
		"configMapGenerator:\n- name: c\n  literals: [a=b]\n  envs: [e.env]\n",
		"kind: Component\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if s := scanYAML("kustomization.yaml", data); s.err != nil {
			return
		}
		k, err := parseKustomizationBytes(data)
		memo := newKustomizationMemo(1 << 20)
		for range 2 {
			shared, sharedErr := memo.parse(data)
			if (err == nil) != (sharedErr == nil) || !reflect.DeepEqual(k, shared) {
				t.Fatalf("the memo's parse differs from the file's: %v, %v", err, sharedErr)
			}
		}
	})
}
