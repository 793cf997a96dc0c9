package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

// maxManifestScan bounds how many YAML files applicationManifests reads, and
// maxManifestCopies how many definitions of one Application it returns.
const (
	maxManifestScan   = 2_000
	maxManifestCopies = 8
)

// Strategies of a value the Application itself sets, edited in its manifest.
const (
	strategyAppParameter    = "application parameter"
	strategyAppValuesObject = "application valuesObject key"
	strategyAppValues       = "application values key"
)

// appManifest is a document of the repository that defines an Argo CD
// Application: an app-of-apps keeps its children's manifests in Git.
type appManifest struct {
	file string
	doc  int
	line int
	obj  map[string]any
}

func (m *appManifest) String() string {
	return fmt.Sprintf("%s, the document at line %d", m.file, m.line)
}

// appKey splits render's name of an Application ("namespace/name", a source or
// cluster suffix dropped) into its namespace (empty when not given) and name.
func appKey(app string) (ns, name string) {
	key, _, _ := strings.Cut(app, " (")
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return "", key
	}
	return ns, name
}

// applicationManifests finds the documents of the repository that define the
// Argo CD Application app names (within maxManifestScan YAML files and the
// plan's read bounds), at most maxManifestCopies of them. An Application
// manifest without a namespace matches any.
func (p *planner) applicationManifests(app string) []*appManifest {
	ns, name := appKey(app)
	scanned := 0
	var found []*appManifest
	var walk func(dir string) bool
	walk = func(dir string) bool {
		names, err := p.before.list(dir)
		if err != nil {
			return false
		}
		for _, n := range names {
			if strings.HasPrefix(n, ".") {
				continue // .git and the like hold no manifests Argo CD reads
			}
			rel := path.Join(dir, n)
			k, err := p.before.kind(rel)
			if err != nil {
				continue
			}
			if k == kindDir {
				if !walk(rel) {
					return false
				}
				continue
			}
			if ext := path.Ext(n); k != kindFile || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			if scanned++; scanned > maxManifestScan {
				return false
			}
			data, err := p.before.read(rel)
			if err != nil {
				return false // a bound of the plan: stop reading
			}
			if !bytes.Contains(data, []byte("Application")) || !bytes.Contains(data, []byte(name)) {
				continue
			}
			docs, err := yamledit.Documents(data)
			if err != nil {
				continue
			}
			for _, d := range docs {
				o, ok := newObject(d.Object)
				if !ok || !strings.HasPrefix(o.apiVersion, "argoproj.io/") || o.kind != "Application" || o.name != name || (ns != "" && o.namespace != "" && o.namespace != ns) {
					continue
				}
				if found = append(found, &appManifest{file: rel, doc: d.Index, line: d.Line, obj: o.body}); len(found) == maxManifestCopies {
					return false
				}
			}
		}
		return true
	}
	walk(".")
	return found
}

// sourceSuffix matches the suffix FromArgoCD gives a later source's app.
var sourceSuffix = regexp.MustCompile(` \(source (\d+)\)`)

// sourceIndex is the index in spec.sources of the source render's app name
// stands for (0 for spec.source and the first source).
func sourceIndex(app string) int {
	m := sourceSuffix.FindStringSubmatch(app)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0
	}
	return n - 1
}

// sourceSettings names an app's source in its Application, where a reason
// tells the reader to look: spec.source, or the entry of spec.sources a
// multi-source Application renders the app from, by its index.
func sourceSettings(app Application) string {
	if i := sourceIndex(app.Name); i > 0 || app.InSources {
		return fmt.Sprintf("spec.sources[%d]", i)
	}
	return "spec.source"
}

// manifestSource is the source of a repository's Application manifest that
// an app of render stands for.
type manifestSource struct {
	// app is the source as render renders it, from the manifest.
	app Application
	// helm is where its helm block is, in the document and in the rendered
	// object (spec.source.helm or spec.sources[i].helm).
	helm      yamledit.Path
	helmField []string
}

// sourceOf reads the source of the Application document obj that stands for
// the app like (render's app from the cluster): the same source index, and the
// cluster's capabilities where the manifest names none.
func sourceOf(obj map[string]any, like Application) (*manifestSource, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	a, err := argocd.DecodeApplication(raw)
	if err != nil {
		return nil, err
	}
	i := sourceIndex(like.Name)
	out := &manifestSource{helm: yamledit.Path{yamledit.K("spec"), yamledit.K("source"), yamledit.K("helm")}, helmField: []string{"spec", "source", "helm"}}
	switch {
	case !a.HasMultipleSources() && a.Spec.Source != nil && i == 0:
	case a.HasMultipleSources() && i < len(a.Spec.Sources):
		out.helm = yamledit.Path{yamledit.K("spec"), yamledit.K("sources"), yamledit.I(i), yamledit.K("helm")}
		out.helmField = []string{"spec", "sources", strconv.Itoa(i), "helm"}
	default:
		return nil, fmt.Errorf("it has no source %d", i+1)
	}
	for _, s := range FromArgoCD(a, nil) {
		if sourceIndex(s.Name) == i {
			out.app = s
			out.app.SetCluster(like.Helm.KubeVersion, like.Helm.APIVersions)
			return out, nil
		}
	}
	return nil, fmt.Errorf("its source %d renders nothing", i+1)
}

// String names where the helm block is, as a person reads the manifest.
func (s *manifestSource) String() string { return s.helm.String() }

// divergence names the first setting that render reads from the Application
// and that the manifest (its source src) says otherwise than the cluster's
// Application, or "".
func divergence(src *manifestSource, cluster Application) string {
	repo := src.app
	r, c := repo.Helm, cluster.Helm
	source := strings.TrimSuffix(src.String(), ".helm")
	helm := func(field string) string { return src.String() + "." + field }
	fields := []struct {
		name string
		r, c any
	}{
		{source + ".path", path.Clean(repo.Path), path.Clean(cluster.Path)},
		{"spec.destination.namespace", repo.Namespace, cluster.Namespace},
		{helm("releaseName"), r.ReleaseName, c.ReleaseName},
		{helm("namespace"), r.Namespace, c.Namespace},
		{helm("valueFiles"), r.ValueFiles, c.ValueFiles},
		{helm("ignoreMissingValueFiles"), r.IgnoreMissingValueFiles, c.IgnoreMissingValueFiles},
		{helm(cmpOr(c.ValuesField, "values")), r.ValuesField + ":" + r.Values, c.ValuesField + ":" + c.Values},
		{helm("parameters"), r.Parameters, c.Parameters},
		{helm("fileParameters"), r.FileParameters, c.FileParameters},
		{helm("skipCrds"), r.SkipCrds, c.SkipCrds},
		{helm("skipTests"), r.SkipTests, c.SkipTests},
		{helm("skipSchemaValidation"), r.SkipSchemaValidation, c.SkipSchemaValidation},
		{helm("kubeVersion"), r.KubeVersion, c.KubeVersion},
		{helm("apiVersions"), r.APIVersions, c.APIVersions},
	}
	for _, f := range fields {
		if !reflect.DeepEqual(f.r, f.c) && !(isEmptyList(f.r) && isEmptyList(f.c)) {
			return f.name
		}
	}
	return ""
}

// isEmptyList reports whether v is a nil or empty slice.
func isEmptyList(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Slice && rv.Len() == 0
}

// manifestSet is one candidate edit of the helm block of an Application
// manifest: parameter param's value, or the key at path of valuesObject or of
// the values text.
type manifestSet struct {
	field string // "parameters", "valuesObject" or "values"
	param int
	path  yamledit.Path
	value any
}

// appManifestBuilders offers the edits of the Application manifest m that set
// what the primary app's own helm settings hold for the target's changed
// fields: a parameter's value, a key of valuesObject, or a key of the values
// text. The manifest must say what the cluster's Application says (the spec
// rendered before is the cluster's, the one after the manifest's), else the
// change is refused naming the setting that differs.
func (p *planner) appManifestBuilders(target *object, exp *changeExpectation, m *appManifest) ([]candidateBuilder, error) {
	app := p.primary
	src, err := sourceOf(m.obj, app)
	if err != nil {
		return nil, &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf("the Application is defined in this repository, in %s, but it cannot be read as the Application deployed: %v", m, err)}
	}
	if d := divergence(src, app); d != "" {
		if parent := p.chartParent(m.file); parent != "" {
			return nil, &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf(
				"the Application is defined in this repository, in %s, a template of the chart of Helm app %s, but %s as written there is not what the Application in the cluster has (the chart computes it when it renders), so the edit is not made there: change it where the chart takes it from", m, parent, d)}
		}
		return nil, &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf(
			"the Application is defined in this repository, in %s, but %s there is not what the Application in the cluster has: the repository is not what is deployed, so an edit of it cannot be verified (sync the app that deploys that file, or change the Application where it is managed)", m, d)}
	}
	var chains [][]fieldChange
	targetChanges(target.body, exp.expected, nil, &chains)
	chains = withEnclosing(target.body, exp.expected, chains)

	var paramLeaves, valuesLeavesOf []valuesLeaf
	for i, prm := range app.Helm.Parameters {
		var steps yamledit.Path
		for _, s := range strings.Split(prm.Name, ".") {
			steps = append(steps, yamledit.K(s))
		}
		paramLeaves = append(paramLeaves, valuesLeaf{doc: i, path: steps, value: prm.Value, text: prm.Value, node: &yaml.Node{Kind: yaml.ScalarNode, Value: prm.Value}})
	}
	if app.Helm.Values != "" {
		if valuesLeavesOf, err = valuesLeaves("", []byte(app.Helm.Values)); err != nil {
			return nil, withApp(err, app.Name)
		}
	}
	var perChain [][]manifestSet
	for _, chain := range chains {
		var sets []manifestSet
		for _, fc := range chain {
			for _, s := range matchLeaves(paramLeaves, fc) {
				if v, ok := parameterText(s.value); ok && !s.fresh {
					sets = append(sets, manifestSet{field: "parameters", param: s.doc, value: v})
				}
			}
			for _, s := range matchLeaves(valuesLeavesOf, fc) {
				sets = append(sets, manifestSet{field: app.Helm.ValuesField, path: s.path, value: s.value})
			}
		}
		perChain = append(perChain, sets)
	}
	if len(perChain) == 0 {
		return nil, nil
	}
	var builders []candidateBuilder
	for _, first := range perChain[0] {
		sets := []manifestSet{first}
		for _, others := range perChain[1:] {
			if len(others) == 0 {
				return builders, nil
			}
			sets = append(sets, others[0])
		}
		builders = append(builders, p.manifestBuilder(m, src, exp, sets))
		if len(builders) >= maxHelmCandidates {
			break
		}
	}
	return builders, nil
}

// parameterText is a rendered scalar as a parameter's value ("--set" parses it
// back); a structure cannot be one.
func parameterText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64, int, float64, bool:
		return fmt.Sprint(x), true
	}
	return "", false
}

// manifestBuilder edits the helm block of the manifest as sets say; the
// candidate renders the primary app from the edited manifest's spec, and
// expects every app that renders the manifest to change in that helm field of
// that Application alone.
func (p *planner) manifestBuilder(m *appManifest, src *manifestSource, change *changeExpectation, sets []manifestSet) candidateBuilder {
	strategy := map[string]string{"parameters": strategyAppParameter, "valuesObject": strategyAppValuesObject, "values": strategyAppValues}[sets[0].field]
	return candidateBuilder{
		strategy: strategy,
		files:    []string{m.file},
		build: func() (*candidate, error) {
			var ops []yamledit.Op
			var valuesOps []yamledit.Op
			fields := map[string]bool{}
			for _, s := range sets {
				fields[s.field] = true
				switch s.field {
				case "parameters":
					ops = append(ops, yamledit.Set(joinPath(src.helm, yamledit.Path{yamledit.K("parameters"), yamledit.I(s.param), yamledit.K("value")}), s.value.(string)))
				case "valuesObject":
					ops = append(ops, yamledit.SetSorted(joinPath(src.helm, yamledit.Path{yamledit.K("valuesObject")}, s.path), valuesValue(s.value)))
				default:
					valuesOps = append(valuesOps, yamledit.SetSorted(s.path, valuesValue(s.value)))
				}
			}
			var out []byte
			var warnings []Warning
			v := p.before
			if len(ops) > 0 {
				var err error
				if out, warnings, err = p.editFile(v, m.file, m.doc, ops...); err != nil {
					return nil, err
				}
				v = p.before.with(map[string][]byte{m.file: out})
			}
			if len(valuesOps) > 0 {
				var err error
				var ws []Warning
				if out, ws, err = p.editValuesText(v, m, src, valuesOps); err != nil {
					return nil, err
				}
				warnings = append(warnings, ws...)
			}
			docs, err := yamledit.Documents(out)
			if err != nil {
				return nil, fmt.Errorf("read edited %s: %w", m.file, err)
			}
			if m.doc >= len(docs) {
				return nil, fmt.Errorf("read edited %s: document %d is gone", m.file, m.doc)
			}
			after, err := sourceOf(docs[m.doc].Object, p.primary)
			if err != nil {
				return nil, notApplicable("the edited %s no longer reads as the Application: %v", m, err)
			}
			child := p.primary
			child.Helm = after.app.Helm
			exp := &manifestExpectation{changeExpectation: change, app: p.primary.Name, values: map[string]any{}}
			exp.ns, exp.name = appKey(p.primary.Name)
			edited := normalize(docs[m.doc].Object)
			for f := range fields {
				at := append(append([]string(nil), src.helmField...), f)
				exp.values[strings.Join(at, "\x00")] = lookupPath(edited, at)
			}
			return &candidate{strategy: strategy, files: map[string][]byte{m.file: out}, warnings: warnings,
				apps: map[string]Application{p.primary.Name: child}, exp: exp}, nil
		},
	}
}

// editValuesText edits the YAML of the helm values string of the manifest as
// text, and writes it back into its block scalar, where only the lines the
// values change may differ: a string written otherwise (folded, quoted, with
// an indentation the block cannot keep) is not edited.
func (p *planner) editValuesText(v *view, m *appManifest, src *manifestSource, ops []yamledit.Op) ([]byte, []Warning, error) {
	at := joinPath(src.helm, yamledit.Path{yamledit.K("values")})
	where := fmt.Sprintf("%s (%s)", m.file, at)
	old := p.primary.Helm.Values
	text, inner, err := yamledit.Edit([]byte(old), 0, ops...)
	if err != nil {
		return nil, nil, fmt.Errorf("edit the values of %s: %w", where, err)
	}
	before, err := v.read(m.file)
	if err != nil {
		return nil, nil, err
	}
	out, _, err := p.editFile(v, m.file, m.doc, yamledit.Set(at, string(text)))
	if err != nil {
		return nil, nil, err
	}
	if !sameChangedLines(string(before), string(out), old, string(text)) {
		return nil, nil, notApplicable("the values string of %s cannot be edited line by line: the editor would rewrite the whole string (write it as a literal block, \"values: |\", to have it edited)", where)
	}
	// The block kept its shape; a value inside it may not have (a flow
	// collection of the values on the path).
	return out, restructuredWarnings(where+" line ", inner), nil
}

// manifestExpectation is a change made through an Application manifest: the
// primary app renders the requested change (from the edited spec), and every
// app that renders the manifest's Application renders it with the edited helm
// fields (values, by their path in the object) and nothing else changed.
type manifestExpectation struct {
	*changeExpectation
	app      string
	ns, name string
	values   map[string]any
	// rendered counts the other apps that render the Application.
	rendered int
}

func (e *manifestExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	if app.Name == e.app {
		return e.changeExpectation.expect(app, before)
	}
	out := make(map[objKey]*object, len(before))
	for k, o := range before {
		out[k] = o
		if k.Group != "argoproj.io" || k.Kind != "Application" || k.Name != e.name || (e.ns != "" && k.Namespace != e.ns) {
			continue
		}
		e.rendered++
		body, _ := deepCopy(o.body).(map[string]any)
		for at, v := range e.values {
			setPath(body, strings.Split(at, "\x00"), deepCopy(v))
		}
		cp := *o
		cp.body = body
		out[k] = &cp
	}
	return out, nil
}

// unmet says why the edit cannot reach the cluster when no app the edited
// file reaches renders the Application: nothing deploys that manifest.
func (e *manifestExpectation) unmet() string {
	if e.rendered > 0 {
		return ""
	}
	return fmt.Sprintf("no Application given renders Application %s from the edited file, so the edit would not reach the cluster (the Application is applied some other way)", e.name)
}

// setPath sets the value at p of a decoded object, creating maps on the way
// (a list index must exist); nil removes the key.
func setPath(body map[string]any, p []string, v any) {
	var cur any = body
	for i, s := range p {
		last := i == len(p)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				if v == nil {
					delete(x, s)
				} else {
					x[s] = v
				}
				return
			}
			next, ok := x[s]
			if !ok {
				next = map[string]any{}
				x[s] = next
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n >= len(x) {
				return
			}
			if last {
				x[n] = v
				return
			}
			cur = x[n]
		default:
			return
		}
	}
}

// planAppManifest plans a change whose value the primary Helm app's own
// settings hold (where says which), after no values file edit verified
// (values files attempted): the edit goes to the Application's manifest when
// the repository defines it, else the change is refused saying where the value
// lives.
func (p *planner) planAppManifest(ctx context.Context, target *object, exp *changeExpectation, where string, values *tryOutcome) (*Result, error) {
	lead := fmt.Sprintf("no values file edit for %s verifies: %s", p.req.Target, where)
	found := p.applicationManifests(p.primary.Name)
	if len(found) == 0 {
		return nil, p.refusal(CodeAppOverride, lead+"; the Application is not defined in this repository (it was created by hand, by an ApplicationSet or from another repository), so change that setting where the Application is managed", values.attempts)
	}
	if len(found) > 1 {
		// Of several definitions, the one an app deploys is the one to edit.
		var deployed []*appManifest
		for _, m := range found {
			if p.deployedBy(m.file) != "" {
				deployed = append(deployed, m)
			}
		}
		if len(deployed) != 1 {
			var where []string
			for _, m := range found {
				where = append(where, m.String())
			}
			return nil, p.refusal(CodeAppOverride, fmt.Sprintf("%s; the Application is defined %d times in this repository (%s) and %d of them are deployed by the Applications given, so which one to edit is not known: change the setting where the Application is managed", lead, len(found), strings.Join(where, "; "), len(deployed)), values.attempts)
		}
		found = deployed
	}
	builders, err := p.appManifestBuilders(target, exp, found[0])
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			cp := *ref
			cp.Reason = lead + "; " + ref.Reason
			cp.Attempts = values.attempts
			return nil, &cp
		}
		return nil, err
	}
	out, err := p.tryCandidates(ctx, builders, exp)
	if err != nil {
		return nil, err
	}
	attempts := append(values.attempts, out.attempts...)
	if out.winner == nil {
		reason := fmt.Sprintf("%s; no edit of the Application in %s verifies: %s", lead, found[0], attemptsReason(out.attempts))
		if len(out.attempts) == 0 {
			reason = fmt.Sprintf("%s; the Application's manifest in %s cannot express %s", lead, found[0], p.req.Change.describe())
		}
		code := CodeAppOverride
		if out.leaked {
			code = CodeLeak
		}
		return nil, p.refusal(code, reason, attempts)
	}
	return p.result(out.winner, out.verified, attempts)
}

// chartParent names a Helm app other than the primary whose chart holds file,
// or "": there the document is a template, its text not always what deploys.
func (p *planner) chartParent(file string) string {
	return p.appReading(file, func(a Application) bool { return a.SourceType == SourceHelm })
}

// deployedBy names an app other than the primary whose render reads file, or "".
func (p *planner) deployedBy(file string) string {
	return p.appReading(file, func(Application) bool { return true })
}

// appReading names an app other than the primary, of those like accepts,
// whose render reads file, or "".
func (p *planner) appReading(file string, like func(Application) bool) string {
	key := p.t.key(file)
	for _, app := range p.apps {
		if app.Name != p.primary.Name && like(app) && p.reaches(app, key) {
			return app.Name
		}
	}
	return ""
}
