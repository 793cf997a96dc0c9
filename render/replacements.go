package render

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// strategyReplacementSource edits the field a kustomize replacement copies into
// the changed one.
const strategyReplacementSource = "replacement source"

// replacedField is a field the change sets that a replacements entry of a
// kustomization of the app's build writes: kustomize runs replacements after
// the kustomization's patches, so the rendered value is the source's.
type replacedField struct {
	// field is the changed field, as the cluster diff names it; want its value
	// after the change.
	field string
	want  any
	// where names the entry as a person finds it: `replacements[0] in
	// overlays/prod/kustomization.yaml`.
	where  string
	source *types.SourceSelector
	// options are the target's: a delimiter and index copy the source into one
	// part of the field.
	options *types.FieldOptions
	// doc is the source's document in the repository (nil when none is found,
	// as for a generated ConfigMap), docIndex its index in doc.file.
	doc      *sourceDoc
	docIndex int
}

// sourceName names the replacement's source as the entry does.
func (r replacedField) sourceName() string {
	s := r.source.Kind + " " + r.source.Name
	if r.source.FieldPath != "" {
		s += " " + r.source.FieldPath
	} else {
		s += " " + types.DefaultReplacementFieldPath
	}
	if r.doc != nil {
		s += " (" + r.doc.file + ")"
	}
	return s
}

// replacedFields lists the fields the change sets on target that replacements
// of the app's kustomizations write, each with the entry that writes it.
func (p *planner) replacedFields(target *object, expected map[string]any) []replacedField {
	if p.primary.SourceType != SourceKustomize {
		return nil
	}
	r := p.reach(p.primary).kust
	if r == nil || !slices.ContainsFunc(r.nodes, func(n *kustNode) bool { return len(n.k.Replacements) > 0 }) {
		return nil
	}
	var diffs []difference
	compareValues(nil, expected, target.body, &diffs, 20)
	if len(diffs) == 0 {
		return nil
	}
	src, _ := p.findSourceDoc(target)
	layers := layerNames(target.name, p.primary.Kustomize, r.nodes)
	var out []replacedField
	for _, n := range r.nodes {
		for i, rep := range p.replacementsOf(n) {
			if rep.Source == nil || rep.SourceValue != nil {
				continue
			}
			where := fmt.Sprintf("replacements[%d] in %s", i, n.file)
			for _, t := range rep.Targets {
				if t == nil || t.Select == nil || !selectorMatches(t.Select, target, src, layers) || rejected(t.Reject, target, src, layers) {
					continue
				}
				for _, fp := range t.FieldPaths {
					re := fieldPathPattern(fp)
					for _, d := range diffs {
						if re.MatchString(d.path()) {
							f := replacedField{field: d.path(), want: d.want, where: where, source: rep.Source, options: t.Options}
							f.doc, f.docIndex = p.replacementSourceDoc(r.nodes, rep.Source)
							out = append(out, f)
						}
					}
				}
			}
		}
	}
	return out
}

// replacementsOf reads the replacements of kustomization n: inline, or the
// file of a path entry (one replacement or a list of them).
func (p *planner) replacementsOf(n *kustNode) []types.Replacement {
	var out []types.Replacement
	for _, rf := range n.k.Replacements {
		if rf.Path == "" {
			out = append(out, rf.Replacement)
			continue
		}
		f, err := joinRel(n.dir, rf.Path)
		if err != nil {
			continue
		}
		data, err := p.t.readFile(f)
		if err != nil {
			continue
		}
		var list []types.Replacement
		if err := sigsyaml.Unmarshal(data, &list); err == nil {
			out = append(out, list...)
			continue
		}
		var one types.Replacement
		if err := sigsyaml.Unmarshal(data, &one); err == nil {
			out = append(out, one)
		}
	}
	return out
}

func rejected(sels []*types.Selector, o *object, src *sourceDoc, layers []string) bool {
	for _, s := range sels {
		if s != nil && selectorMatches(s, o, src, layers) {
			return true
		}
	}
	return false
}

// fieldPathPattern matches the changed fields (as the cluster diff names them)
// a replacement's field path writes: the field itself or one beneath it, a "*"
// standing for any key or list item.
func fieldPathPattern(fp string) *regexp.Regexp {
	fp = strings.ReplaceAll(fp, ".[", "[")
	var b strings.Builder
	b.WriteString("^")
	for i, part := range strings.Split(fp, ".") {
		switch {
		case part == "*" && i == 0:
			b.WriteString(`[^.\[]+`)
		case part == "*":
			// A key of a mapping, or an item of a list (named [name=web] here).
			b.WriteString(`(?:\.[^.\[]+|\[[^\]]*\])`)
		case i > 0:
			b.WriteString(`\.` + regexp.QuoteMeta(part))
		default:
			b.WriteString(regexp.QuoteMeta(part))
		}
	}
	b.WriteString(`(?:$|[.\[])`)
	return regexp.MustCompile(b.String())
}

// replacementSourceDoc finds the document of a replacement's source among the
// files the app's kustomizations read: the one document of its kind and name
// (the name it has where the replacement runs, a base's prefix and suffix
// possibly applied). It is nil when there is none, or more than one.
func (p *planner) replacementSourceDoc(nodes []*kustNode, s *types.SourceSelector) (*sourceDoc, int) {
	names := append([]string{s.Name}, layerNames(s.Name, KustomizeOptions{}, nodes)...)
	var found *sourceDoc
	index := 0
	for _, n := range nodes {
		for _, f := range n.files {
			if f == n.file || slices.Contains(konfig.RecognizedKustomizationFileNames(), path.Base(f)) {
				continue
			}
			data, err := p.t.readFile(f)
			if err != nil {
				continue
			}
			docs, err := yamledit.Documents(data)
			if err != nil {
				continue
			}
			for _, d := range docs {
				if d.Empty {
					continue
				}
				o, ok := newObject(d.Object)
				if !ok || o.kind != s.Kind || (s.Group != "" && groupOf(o.apiVersion) != s.Group) || !slices.Contains(names, o.name) {
					continue
				}
				if found != nil && (found.file != f || index != d.Index) {
					return nil, 0
				}
				found, index = &sourceDoc{file: f, index: d.Index, obj: o.body, name: o.name, namespace: o.namespace}, d.Index
			}
		}
	}
	return found, index
}

// replacementSourceBuilders edit the source field of the replacement that
// writes the changed field, in its document: the new value, or with a
// delimiter, the part of it the replacement copies.
func (p *planner) replacementSourceBuilders(fields []replacedField) []candidateBuilder {
	var out []candidateBuilder
	for _, f := range fields {
		if f.source.Options != nil && (f.source.Options.Delimiter != "" || f.source.Options.Create) {
			continue
		}
		value, ok := f.want.(string)
		if !ok {
			continue
		}
		if o := f.options; o != nil && o.Delimiter != "" {
			parts := strings.Split(value, o.Delimiter)
			if o.Index < 0 || o.Index >= len(parts) {
				continue
			}
			value = parts[o.Index]
		}
		if f.doc == nil {
			if b, ok := p.generatedSourceBuilder(f, value); ok {
				out = append(out, b)
			}
			continue
		}
		at, ok := yamlPathOf(cmpOr(f.source.FieldPath, types.DefaultReplacementFieldPath))
		if !ok {
			continue
		}
		f := f
		out = append(out, candidateBuilder{strategy: strategyReplacementSource, files: []string{f.doc.file}, build: func() (*candidate, error) {
			return p.editCandidate(strategyReplacementSource, f.doc.file, f.docIndex, []yamledit.Op{{Path: at, Kind: yamledit.OpSet, Value: scalar(value)}})
		}})
	}
	return out
}

// generatedSourceBuilder edits the input of the configMapGenerator that makes a
// replacement's source ConfigMap, for a data key source: the literal or env
// file line of the outermost entry that sets the key.
func (p *planner) generatedSourceBuilder(f replacedField, value string) (candidateBuilder, bool) {
	key, ok := strings.CutPrefix(f.source.FieldPath, "data.")
	if f.source.Kind != "ConfigMap" || !ok || strings.ContainsAny(key, ".[") || strings.ContainsAny(value, "\r\n") {
		return candidateBuilder{}, false
	}
	gens := p.generatorEntries(p.primary, &object{kind: "ConfigMap", name: f.source.Name, generatedBy: "ConfigMapGenerator"})
	if len(gens) == 0 {
		return candidateBuilder{}, false
	}
	ins, ok := p.generatedKeyInputs(gens, key, true)
	if !ok || len(ins) != 1 {
		return candidateBuilder{}, false
	}
	in := ins[0]
	switch {
	case in.literal >= 0:
		e := &entryEdit{entry: in.entry, set: map[int]string{in.literal: key + "=" + value}}
		return candidateBuilder{strategy: strategyReplacementSource, files: []string{in.entry.file}, build: func() (*candidate, error) {
			return p.editCandidate(strategyReplacementSource, in.entry.file, 0, e.ops())
		}}, true
	case in.envFile != "":
		return candidateBuilder{strategy: strategyReplacementSource, files: []string{in.envFile}, build: func() (*candidate, error) {
			src, err := p.before.read(in.envFile)
			if err != nil {
				return nil, err
			}
			edited, ok := editEnvLines(src, map[int]*string{in.line: &value})
			if !ok {
				return nil, notApplicable("%s has no line %d", in.envFile, in.line)
			}
			return &candidate{strategy: strategyReplacementSource, files: map[string][]byte{in.envFile: edited}}, nil
		}}, true
	}
	return candidateBuilder{}, false
}

// yamlPathOf turns a replacement's field path of plain keys, list indexes and
// [name=value] items into an editor path.
func yamlPathOf(fp string) (yamledit.Path, bool) {
	fp = strings.ReplaceAll(fp, ".[", "[")
	var out yamledit.Path
	for _, part := range strings.Split(fp, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" || key == "*" {
			return nil, false
		}
		if i, err := strconv.Atoi(key); err == nil {
			out = append(out, yamledit.I(i))
		} else {
			out = append(out, yamledit.K(key))
		}
		for rest != "" {
			sel, more, ok := strings.Cut(rest, "]")
			k, v, isPair := strings.Cut(sel, "=")
			if !ok || !isPair {
				return nil, false
			}
			out = append(out, yamledit.M(k, v))
			rest = strings.TrimPrefix(more, "[")
		}
	}
	return out, true
}

// replacementRefusal says, when no edit verified, which replacement writes the
// changed field and where its value comes from: no patch or document edit can
// change what a replacement writes after them, and an edit of the source changes
// every object that shows it (the source itself, unless it is local-config).
func (p *planner) replacementRefusal(fields []replacedField, out *tryOutcome) *Refusal {
	if len(fields) == 0 {
		return nil
	}
	f := fields[0]
	reason := fmt.Sprintf("%s of %s is written by %s from %s: kustomize applies replacements after the kustomization's patches, so a patch or an edit of %s's document is overridden",
		f.field, p.req.Target, f.where, f.sourceName(), p.req.Target)
	tried := false
	for _, a := range out.attempts {
		if a.Strategy == strategyReplacementSource {
			tried = true
			reason += fmt.Sprintf("; the edit of the source (%s) does not render as asked: %s", strings.Join(a.Files, ", "), a.Reason)
		}
	}
	switch {
	case f.doc == nil && p.generatorOf(f.source) != "" && tried:
		reason += fmt.Sprintf("; the app deploys the source too, so that edit changes %s %s as well, which the change does not ask for: to change both, change %s in the input of %s", f.source.Kind, f.source.Name, cmpOr(f.source.FieldPath, types.DefaultReplacementFieldPath), p.generatorOf(f.source))
	case f.doc == nil && p.generatorOf(f.source) != "":
		reason += fmt.Sprintf("; the source is made by %s: change %s in its input", p.generatorOf(f.source), cmpOr(f.source.FieldPath, types.DefaultReplacementFieldPath))
	case f.doc == nil:
		reason += "; the source is no document of the files the app's kustomizations read: change the value where the source gets it"
	case !tried:
		reason += fmt.Sprintf("; change %s in %s", cmpOr(f.source.FieldPath, types.DefaultReplacementFieldPath), f.doc.file)
	default:
		reason += fmt.Sprintf("; the app deploys the source too, so that edit changes %s %s as well, which the change does not ask for: to change both, change %s in %s", f.source.Kind, f.source.Name, cmpOr(f.source.FieldPath, types.DefaultReplacementFieldPath), f.doc.file)
	}
	return p.refusal(CodeTransformerOverride, reason, out.attempts)
}

// generatorOf names the configMapGenerator or secretGenerator entry of the app's
// kustomizations that makes a replacement's source ("" when none does).
func (p *planner) generatorOf(s *types.SourceSelector) string {
	r := p.reach(p.primary).kust
	if r == nil {
		return ""
	}
	for _, n := range r.nodes {
		gens := map[string][]types.GeneratorArgs{"ConfigMap": nil, "Secret": nil}
		for _, g := range n.k.ConfigMapGenerator {
			gens["ConfigMap"] = append(gens["ConfigMap"], g.GeneratorArgs)
		}
		for _, g := range n.k.SecretGenerator {
			gens["Secret"] = append(gens["Secret"], g.GeneratorArgs)
		}
		for _, g := range gens[s.Kind] {
			if g.Name == s.Name {
				return fmt.Sprintf("%sGenerator %q of %s", strings.ToLower(s.Kind[:1])+s.Kind[1:], g.Name, n.file)
			}
		}
	}
	return ""
}
