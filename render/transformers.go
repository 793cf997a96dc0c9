package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// metadataSetter is one transformer of a kustomization that sets labels or
// annotations: its commonLabels or commonAnnotations, a labels entry, or a
// LabelTransformer or AnnotationsTransformer of its transformers.
type metadataSetter struct {
	// where names it as a person finds it: `labels[0] in overlay/kustomization.yaml`.
	where string
	// field is "labels" or "annotations"; values the keys it sets.
	field  string
	values map[string]string
	// object and template say whether it sets them on the object's own metadata
	// and on its pod template's.
	object, template bool
}

// metadataSetters lists the transformers of kustomization n that set labels or
// annotations on an object of kind kind and group group, as kustomize
// configures them: commonLabels on the object, its selectors and templates,
// commonAnnotations on the object and its templates, a labels entry on the
// object and, with includeSelectors or includeTemplates, its templates, and a
// builtin transformer where its fieldSpecs say. A transformers entry that is a
// directory, or a file that does not parse, sets nothing here (verification
// still judges its effect).
func (p *planner) metadataSetters(n *kustNode, kind, group string) []metadataSetter {
	in := " in " + n.file
	var out []metadataSetter
	if len(n.k.CommonLabels) > 0 {
		out = append(out, metadataSetter{where: "commonLabels" + in, field: "labels", values: n.k.CommonLabels, object: true, template: true})
	}
	for i, l := range n.k.Labels {
		s := metadataSetter{where: fmt.Sprintf("labels[%d]", i) + in, field: "labels", values: l.Pairs, object: true,
			template: l.IncludeSelectors || l.IncludeTemplates}
		for _, fs := range l.FieldSpecs {
			o, t := fieldSpecSets(fs, "labels", kind, group)
			s.object, s.template = s.object || o, s.template || t
		}
		out = append(out, s)
	}
	if len(n.k.CommonAnnotations) > 0 {
		out = append(out, metadataSetter{where: "commonAnnotations" + in, field: "annotations", values: n.k.CommonAnnotations, object: true, template: true})
	}
	for i, entry := range n.k.Transformers {
		var data []byte
		file := ""
		if isInline(entry) {
			data = []byte(entry)
		} else {
			f, err := joinRel(n.dir, entry)
			if err != nil {
				continue
			}
			if k, _ := p.before.kind(f); k != kindFile {
				continue
			}
			if data, err = p.t.readFile(f); err != nil {
				continue
			}
			file = f
		}
		docs, err := yamledit.Documents(data)
		if err != nil {
			continue
		}
		for _, d := range docs {
			tr := d.Object
			kindOf, _ := tr["kind"].(string)
			s := metadataSetter{}
			switch kindOf {
			case "LabelTransformer":
				s.field = "labels"
			case "AnnotationsTransformer":
				s.field = "annotations"
			default:
				continue
			}
			s.values = stringsOf(tr[s.field])
			specs, _ := tr["fieldSpecs"].([]any)
			for _, item := range specs {
				m, _ := item.(map[string]any)
				fs := types.FieldSpec{}
				fs.Kind, _ = m["kind"].(string)
				fs.Group, _ = m["group"].(string)
				fs.Path, _ = m["path"].(string)
				o, t := fieldSpecSets(fs, s.field, kind, group)
				s.object, s.template = s.object || o, s.template || t
			}
			name, _ := getPath(tr, []string{"metadata", "name"})
			what := fmt.Sprintf("%s %q", kindOf, fmt.Sprint(name))
			if file != "" {
				what += " of " + file
			}
			s.where = fmt.Sprintf("transformers[%d] (%s)", i, what) + in
			out = append(out, s)
		}
	}
	return out
}

// fieldSpecSets reports whether a transformer's field spec names the metadata
// field of an object of kind and group, and of its pod template.
func fieldSpecSets(fs types.FieldSpec, field, kind, group string) (object, template bool) {
	if (fs.Kind != "" && fs.Kind != kind) || (fs.Group != "" && fs.Group != group) {
		return false, false
	}
	tmpl := podSpecPath(kind)
	tmpl = append(append([]string(nil), tmpl[:len(tmpl)-1]...), "metadata", field)
	switch fs.Path {
	case "metadata/" + field:
		return true, false
	case strings.Join(tmpl, "/"):
		return false, true
	}
	return false, false
}

// stringsOf reads a mapping of strings (a transformer's labels).
func stringsOf(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// transformerOverride refuses a patch change of a label or annotation that a
// transformer of the app's root kustomization sets to another value: kustomize
// runs a kustomization's transformers after its patches, so whatever a patch
// or the object's document says, the transformer's value is rendered. (A base's
// transformers run before the overlay's patches, which then win.) The reason
// names the transformer and its file, where the value must change.
func (p *planner) transformerOverride(app Application, o *object) error {
	c := p.req.Change.Patch
	if c == nil || app.SourceType != SourceKustomize {
		return nil
	}
	r := p.reach(app)
	if r.kust == nil || len(r.kust.nodes) == 0 {
		return nil
	}
	doc, err := c.document()
	if err != nil {
		return nil
	}
	tmpl := podSpecPath(o.kind)
	tmpl = tmpl[:len(tmpl)-1]
	for _, s := range p.metadataSetters(r.kust.nodes[0], o.kind, groupOf(o.apiVersion)) {
		for _, key := range slices.Sorted(maps.Keys(s.values)) {
			var paths [][]string
			if s.object {
				paths = append(paths, []string{"metadata", s.field, key})
			}
			if s.template {
				paths = append(paths, append(append([]string(nil), tmpl...), "metadata", s.field, key))
			}
			for _, at := range paths {
				v, ok := getPath(doc, at)
				if !ok || v == s.values[key] {
					continue
				}
				word := strings.TrimSuffix(s.field, "s")
				if s.field == "annotations" {
					word = "annotation"
				}
				return &Refusal{Code: CodeTransformerOverride, App: app.Name, Reason: fmt.Sprintf(
					"the %s %q (%s) is set by %s: kustomize applies it after the kustomization's patches, so a patch or an edit of %s's document would be overridden; change the value there (it sets the %s on every object it selects), or take the key out of it and set it per object",
					word, key, strings.Join(at, "."), s.where, p.req.Target, word)}
			}
		}
	}
	return nil
}
