package render

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// newDoc is one document of a new-resource manifest.
// HoldsSecret reports whether the manifest holds a Secret, or may (it does not
// parse): such a change is refused as every change of a Secret is, and a view of
// it shows none of its values.
func (n NewResource) HoldsSecret() bool {
	docs, err := splitManifest(n.Manifest)
	if err != nil {
		return true
	}
	for _, d := range docs {
		if d.obj.kind == "Secret" && groupOf(d.obj.apiVersion) == "" {
			return true
		}
	}
	return false
}

type newDoc struct {
	obj   *object
	bytes []byte
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?\r?$`)

// splitManifest parses a manifest into its documents, keeping each document's bytes.
func splitManifest(manifest string) ([]newDoc, error) {
	data := []byte(manifest)
	docs, err := yamledit.Documents(data)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, refuse(CodeAliasBomb, "the new manifest's YAML aliases expand beyond the allowed bound")
		}
		return nil, refuse(CodeInvalidRequest, "the new manifest does not parse: %v", err)
	}
	var chunks [][]byte
	for _, c := range docSeparator.Split(manifest, -1) {
		if strings.TrimSpace(stripComments(c)) != "" {
			chunks = append(chunks, []byte(strings.TrimLeft(c, "\r\n")))
		}
	}
	var out []newDoc
	for _, d := range docs {
		if d.Empty {
			continue
		}
		o, ok := newObject(d.Object)
		if !ok {
			return nil, refuse(CodeInvalidRequest, "document %d of the new manifest has no apiVersion or kind", d.Index+1)
		}
		if o.name == "" {
			return nil, refuse(CodeInvalidRequest, "document %d of the new manifest (%s) has no metadata.name", d.Index+1, o.kind)
		}
		if o.kind == "List" || strings.HasSuffix(o.kind, "List") {
			return nil, refuse(CodeInvalidRequest, "document %d of the new manifest is a %s; add its items as separate documents", d.Index+1, o.kind)
		}
		out = append(out, newDoc{obj: o})
	}
	if len(out) == 0 {
		return nil, refuse(CodeInvalidRequest, "the new manifest holds no object")
	}
	if len(chunks) == len(out) {
		for i := range out {
			out[i].bytes = ensureNewline(chunks[i])
		}
	} else {
		// Separators the splitter cannot see (inside block scalars): one file for all.
		out[0].bytes = ensureNewline(data)
		for i := 1; i < len(out); i++ {
			out[i].bytes = nil
		}
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func ensureNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}

// newResourceWarnings lists the deny-list warnings of a new object.
func newResourceWarnings(app Application, file string, o *object) []Warning {
	var ws []Warning
	group := groupOf(o.apiVersion)
	where := fmt.Sprintf("%s (%s %s)", file, o.kind, o.name)
	if isClusterScoped(group, o.kind) {
		ws = append(ws, Warning{
			Code:        "cluster_scoped",
			Where:       where,
			Message:     fmt.Sprintf("%s is cluster-scoped: it affects the whole cluster, not only namespace %s, and deleting the app deletes it for everyone", o.kind, app.Namespace),
			Alternative: "use a namespaced kind (Role instead of ClusterRole, RoleBinding instead of ClusterRoleBinding) where one exists",
		})
	}
	if group == "argoproj.io" && (o.kind == "Application" || o.kind == "ApplicationSet") {
		ws = append(ws, Warning{
			Code:        "argo_application",
			Where:       where,
			Message:     fmt.Sprintf("a new %s makes Argo CD deploy more applications, with whatever its project allows", o.kind),
			Alternative: "add the application through the team that owns Argo CD's app-of-apps",
		})
	}
	if o.namespace != "" && app.Namespace != "" && o.namespace != app.Namespace && !isClusterScoped(group, o.kind) {
		ws = append(ws, Warning{
			Code:        "foreign_namespace",
			Where:       where,
			Message:     fmt.Sprintf("it goes to namespace %s, outside the app's destination namespace %s; the sync fails if the project does not allow it", o.namespace, app.Namespace),
			Alternative: "drop metadata.namespace so it lands in " + app.Namespace,
		})
	}
	return ws
}

func (p *planner) planNewResource(ctx context.Context) (*Result, error) {
	app := p.primary
	if err := p.checkRenderable(app); err != nil {
		return nil, err
	}
	if app.SourceType == SourceHelm && app.Chart != nil {
		return nil, &Refusal{Code: CodeUnsupportedSource, App: app.Name, Reason: fmt.Sprintf(
			"application %s deploys chart %s, of which this repository holds only values files: no file of it adds a resource to what the chart renders; add the manifest to an app that renders files of this repository (a Directory or Kustomize app), or to the chart where it is made", app.Name, app.Chart)}
	}
	docs, err := splitManifest(p.req.Change.NewResource.Manifest)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	objs, err := p.render(p.before, app)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	existing, err := keyed(app, objs)
	if err != nil {
		return nil, err
	}
	seen := map[objKey]bool{}
	for _, d := range docs {
		o := d.obj
		if o.kind == "Secret" && groupOf(o.apiVersion) == "" {
			return nil, &Refusal{Code: CodeSecret, App: app.Name, Reason: fmt.Sprintf("the new manifest holds Secret %s; Secrets are never added through Git in clear text (use your secret store)", o.name)}
		}
		k := o.key(app.Namespace)
		if existing[k] != nil || seen[k] {
			return nil, &Refusal{Code: CodeAlreadyExists, App: app.Name, Reason: fmt.Sprintf("application %s already renders %s", app.Name, k)}
		}
		seen[k] = true
	}

	root, _ := cleanRel(app.Path)
	// New files go where the app's directory really is, never through a symlink.
	root, err = p.t.canonical(root)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	dirs := []string{root}
	switch app.SourceType {
	case SourceDirectory:
		dirs = manifestDirs(root, objs)
	case SourceHelm:
		// Helm renders the files of the chart's templates folder, not those
		// beside Chart.yaml.
		dirs = []string{path.Join(root, "templates")}
	}
	var files map[string][]byte
	var created map[string]bool
	var names []string
	for _, dir := range dirs {
		files, created, names = map[string][]byte{}, map[string]bool{}, nil
		for _, d := range docs {
			if d.bytes == nil {
				continue
			}
			file, err := p.freeFileName(dir, fmt.Sprintf("%s-%s", strings.ToLower(d.obj.kind), d.obj.name), files)
			if err != nil {
				return nil, err
			}
			files[file], created[file] = d.bytes, true
			names = append(names, file)
		}
		if app.SourceType != SourceDirectory {
			break
		}
		why, err := directoryLeavesOut(app, root, names)
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		if why == "" {
			break
		}
		if dir == dirs[len(dirs)-1] {
			return nil, &Refusal{Code: CodeVerificationFailed, App: app.Name, Reason: fmt.Sprintf(
				"application %s would read the new file in none of its folders (%s): for %s, %s; add the manifest to a file it reads, or change %s.directory", app.Name, strings.Join(dirs, ", "), names[0], why, sourceSettings(app))}
		}
	}
	for i, d := range docs {
		file := names[0]
		if i < len(names) && len(names) == len(docs) {
			file = names[i]
		}
		p.warnings = append(p.warnings, newResourceWarnings(app, file, d.obj)...)
	}
	c := &candidate{strategy: strategyNewFile, files: files, created: created}
	if app.SourceType == SourceKustomize {
		node, err := p.t.kustomization(root)
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		kustSrc, err := p.t.readFile(node.file)
		if err != nil {
			return nil, err
		}
		n, err := listLength(kustSrc, "resources")
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		var ops []yamledit.Op
		for i, f := range names {
			ops = append(ops, yamledit.Set(yamledit.Path{yamledit.K("resources"), yamledit.I(n + i)}, path.Base(f)))
		}
		kust, ws, err := p.editFile(p.before, node.file, 0, ops...)
		if err != nil {
			return nil, err
		}
		c.files[node.file] = kust
		c.warnings = ws
	}
	exp := &newResourceExpectation{primary: app, docs: docs}
	out, err := p.tryCandidates(ctx, []candidateBuilder{{strategy: c.strategy, files: c.paths(), build: func() (*candidate, error) { return c, nil }}}, exp)
	if err != nil {
		return nil, err
	}
	if out.winner == nil {
		return nil, p.refusal(outcomeCode(out), "the new resources do not render as given: "+attemptsReason(out.attempts), out.attempts)
	}
	return p.result(out.winner, out.verified, out.attempts)
}

// manifestDirs are the folders a Directory app's new file may go to, in the
// order tried: its root, then the folders of the files its objects come from,
// below root (canonical), in render order.
func manifestDirs(root string, objs []*object) []string {
	dirs := []string{root}
	for _, o := range objs {
		d := path.Dir(o.file)
		if o.file == "" || slices.Contains(dirs, d) || (root != "." && !strings.HasPrefix(d, root+"/")) {
			continue
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// directoryLeavesOut says why a Directory app whose real folder is root would
// not read one of the new files (paths from the repository root, in that
// folder), "" when it reads them all: its include, exclude and recurse
// settings match the path below the app's path, as Argo CD's do.
func directoryLeavesOut(app Application, root string, files []string) (string, error) {
	m, err := newDirectoryMatcher(app)
	if err != nil {
		return "", err
	}
	for _, f := range files {
		within := f
		if root != "." {
			within = strings.TrimPrefix(f, root+"/")
		}
		if lexical := path.Join(m.root, within); !m.matches(lexical) {
			return m.leftOut(app, lexical), nil
		}
	}
	return "", nil
}

// freeFileName picks "<base>.yaml" in dir, or "<base>-2.yaml" and so on when taken.
func (p *planner) freeFileName(dir, base string, taken map[string][]byte) (string, error) {
	for i := 1; i <= 20; i++ {
		name := base + ".yaml"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.yaml", base, i)
		}
		f := path.Join(dir, name)
		if _, ok := taken[f]; ok {
			continue
		}
		st := p.t.stat(f)
		if st.err != nil {
			return "", st.err
		}
		// A dangling symlink holds its name: writing the file would follow it.
		if st.kind == kindNone && !st.dangling {
			return f, nil
		}
	}
	return "", refuse(CodeAlreadyExists, "no free file name for %s in %s", base, dir)
}

// listLength counts the items of a top-level list of a single-document file.
func listLength(src []byte, key string) (int, error) {
	docs, err := yamledit.Documents(src)
	if err != nil {
		return 0, refuse(CodeRenderFailed, "parse kustomization: %v", err)
	}
	for _, d := range docs {
		if d.Object != nil {
			list, _ := d.Object[key].([]any)
			return len(list), nil
		}
	}
	return 0, nil
}

// newResourceExpectation: every existing object stays; the new documents appear.
// Directory apps render them verbatim, and so do Helm apps (a template without
// actions); kustomize apps may add their name prefixes, namespace, labels and
// annotations.
type newResourceExpectation struct {
	primary Application
	docs    []newDoc
}

func (e *newResourceExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	if app.Name != e.primary.Name || (app.SourceType != SourceDirectory && app.SourceType != SourceHelm) {
		return before, nil
	}
	out := make(map[objKey]*object, len(before)+len(e.docs))
	for k, o := range before {
		out[k] = o
	}
	for _, d := range e.docs {
		out[d.obj.key(app.Namespace)] = d.obj
	}
	return out, nil
}

func (e *newResourceExpectation) extra(app Application, added map[objKey]*object) []string {
	if app.Name != e.primary.Name || app.SourceType != SourceKustomize {
		return unexpectedObjects(added)
	}
	var problems []string
	used := map[objKey]bool{}
	for _, d := range e.docs {
		var match *object
		var matchKey objKey
		for k, o := range added {
			if !used[k] && o.kind == d.obj.kind && groupOf(o.apiVersion) == groupOf(d.obj.apiVersion) && strings.Contains(o.name, d.obj.name) {
				match, matchKey = o, k
				break
			}
		}
		if match == nil {
			problems = append(problems, fmt.Sprintf("%s %s: not rendered after the edit", d.obj.kind, d.obj.name))
			continue
		}
		used[matchKey] = true
		var diffs []difference
		compareValues(nil, d.obj.body, match.body, &diffs, 100)
		var kept []difference
		for _, df := range diffs {
			if transformerField(df) {
				continue
			}
			kept = append(kept, df)
		}
		if len(kept) > maxReportedDifferences {
			kept = kept[:maxReportedDifferences]
		}
		for _, l := range describeDifferences(d.obj, kept) {
			problems = append(problems, matchKey.String()+": "+l)
		}
	}
	for k := range added {
		if !used[k] {
			problems = append(problems, fmt.Sprintf("%s: unexpected new object", k))
		}
	}
	return problems
}

// transformerField reports whether a difference between a new manifest and its
// kustomize render is one that kustomize's own transformers make: the name and
// namespace, and labels, annotations and selectors it adds.
func transformerField(d difference) bool {
	p := d.path()
	if p == "metadata.name" || p == "metadata.namespace" {
		return true
	}
	// Name references (scaleTargetRef.name, configMapRef.name, ...) follow the
	// prefixes and suffixes kustomize gives the objects they name.
	if last := d.segs[len(d.segs)-1]; last == "name" || strings.HasSuffix(last, "Name") {
		want, wok := d.want.(string)
		got, gok := d.got.(string)
		if wok && gok && strings.Contains(got, want) {
			return true
		}
	}
	if !isAbsent(d.want) {
		return false
	}
	for _, s := range d.segs {
		switch s {
		case "labels", "annotations", "selector", "matchLabels":
			return true
		}
	}
	return false
}
