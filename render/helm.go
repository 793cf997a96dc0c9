package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/ignore"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/kukie/kukie-gitops/render/helmexec"
	"github.com/kukie/kukie-gitops/render/helmtemplate"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

// Bounds of a Helm render beyond those of every read (see MaxFileSize and the
// per-render bounds, which chart files, values files and file parameters count
// against like any file).
const (
	// MaxChartFiles is how many files one chart (its subcharts included, and
	// every file of its chart archives at every depth) may hold.
	MaxChartFiles = 2_000
	// MaxChartArchiveBytes is how many bytes the chart archives of one chart
	// (vendored, fetched, and every archive nested in one: see
	// MaxChartArchiveDepth) may expand to together, the names of their files
	// included.
	MaxChartArchiveBytes = 16 << 20
	// MaxHelmOutputBytes is how many bytes of manifests one chart may render.
	MaxHelmOutputBytes = 16 << 20
	// maxTemplateList bounds what one call of the list-making template functions
	// (until, untilStep, repeat) may make: those allocate in one step whatever a
	// value asks for, before any output is written.
	maxTemplateList = 100_000
)

// HelmOptions are spec.source.helm settings, applied the way Argo CD turns them
// into flags of "helm template".
type HelmOptions struct {
	// ReleaseName is the release name: spec.source.helm.releaseName, else the
	// Application's own name.
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace is the release namespace when it is not the destination's.
	Namespace string `json:"namespace,omitempty"`
	// ValueFiles are "--values" files relative to the app path (absolute from the
	// repository root when they start with "/"), in order.
	ValueFiles              []string `json:"valueFiles,omitempty"`
	IgnoreMissingValueFiles bool     `json:"ignoreMissingValueFiles,omitempty"`
	// Values is the YAML of spec.source.helm.values or valuesObject, passed after
	// every values file; ValuesField names which of the two it came from.
	Values      string `json:"values,omitempty"`
	ValuesField string `json:"valuesField,omitempty"`
	// IgnoredValues says the Application sets values beside valuesObject:
	// Argo CD passes valuesObject alone (see argocd.AppSourceHelm.ValuesYAML),
	// so the values text reaches no render, and a plan warns of it.
	IgnoredValues bool `json:"ignoredValues,omitempty"`
	// Parameters are "--set" values ("--set-string" with ForceString), FileParameters
	// "--set-file" values read from files of the repository.
	Parameters     []HelmParameter     `json:"parameters,omitempty"`
	FileParameters []HelmFileParameter `json:"fileParameters,omitempty"`
	SkipCrds       bool                `json:"skipCrds,omitempty"`
	SkipTests      bool                `json:"skipTests,omitempty"`
	// SkipSchemaValidation skips the chart's values.schema.json.
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// KubeVersion and APIVersions are .Capabilities: the Application's own, else
	// the destination cluster's; empty means Helm's defaults.
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// SetCluster gives a Helm app the capabilities of its destination cluster, as
// Argo CD passes them to "helm template" (--kube-version, --api-versions): the
// Application's own spec.source.helm.kubeVersion and apiVersions win, each on
// its own. Other apps are left as they are.
func (a *Application) SetCluster(kubeVersion string, apiVersions []string) {
	if a.SourceType != SourceHelm {
		return
	}
	if a.Helm.KubeVersion == "" {
		a.Helm.KubeVersion = kubeVersion
	}
	if len(a.Helm.APIVersions) == 0 {
		a.Helm.APIVersions = slices.Clone(apiVersions)
	}
}

// HelmParameter is one spec.source.helm.parameters entry.
type HelmParameter struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	ForceString bool   `json:"forceString,omitempty"`
}

// HelmFileParameter is one spec.source.helm.fileParameters entry.
type HelmFileParameter struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// renderHelm renders a Helm app the way Argo CD's repo server runs "helm
// template": the chart at the app path (its subcharts vendored under charts/),
// or the one it deploys from a Helm repository (Application.Chart, fetched),
// the values files in order, then values or valuesObject, then the parameters,
// with CRDs unless skipCrds and hooks but tests when skipTests; the output split
// into objects as Argo CD splits it (Lists flattened, empty documents dropped).
func renderHelm(ctx context.Context, v *view, app Application) ([]*object, error) {
	lexical, ok := cleanRel(app.Path)
	if !ok {
		return nil, refuse(CodePathEscape, "application %s: path %q leaves the repository", app.Name, app.Path)
	}
	if err := checkHelmOptions(app); err != nil {
		return nil, err
	}
	var ch *chart.Chart
	var budget archiveBudget
	var root string
	if app.Chart != nil {
		// A chart from a Helm repository: its values files are the
		// repository's, resolved from its root.
		root = app.Chart.String()
		var err error
		if ch, budget, err = fetchAppChart(ctx, app); err != nil {
			return nil, withApp(err, app.Name)
		}
	} else {
		var err error
		if root, err = v.t.canonical(lexical); err != nil {
			return nil, withApp(err, app.Name)
		}
		if ch, budget, err = loadChart(v, root); err != nil {
			return nil, withApp(err, app.Name)
		}
	}
	if deps := ch.Metadata.Dependencies; len(deps) > 0 {
		if err := resolveDependencies(ctx, ch, root, &budget); err != nil {
			return nil, withApp(err, app.Name)
		}
		if err := helmtemplate.CheckDependencies(ch); err != nil {
			return nil, &Refusal{Code: CodeHelmDependency, App: app.Name, Reason: fmt.Sprintf("application %s: chart %s: %v", app.Name, root, err)}
		}
	}
	if cycle := recursiveTemplates(ch); cycle != "" {
		return nil, &Refusal{Code: CodeHelm, App: app.Name, Reason: fmt.Sprintf(
			"application %s: chart %s: its templates include each other recursively (%s); render does not run recursive templates, whose memory only Helm's limit of 1000 nested includes of each name bounds",
			app.Name, root, cycle)}
	}
	files, err := helmValueFiles(v, app, lexical)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	vals, err := helmValues(v, app, lexical, files)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	out, err := runHelm(ctx, ch, vals, app)
	if err := contextError(ctx); err != nil {
		return nil, err
	}
	if err != nil {
		if exceeded := v.budget.exceeded(); exceeded != nil {
			return nil, withApp(exceeded, app.Name)
		}
		var ref *Refusal
		var limit *helmexec.LimitError
		switch {
		case errors.As(err, &ref):
			return nil, withApp(err, app.Name)
		case errors.Is(err, helmexec.ErrOutputTooLarge):
			return nil, outputTooLarge(app, root)
		case errors.As(err, &limit):
			return nil, refuse(CodeTooLarge, "application %s: chart %s: %v", app.Name, root, err)
		}
		return nil, refuse(CodeRenderFailed, "application %s: helm template %s: %v", app.Name, root, err)
	}
	return helmObjects(app, root, out)
}

// checkHelmOptions refuses by name what Argo CD applies and render does not.
func checkHelmOptions(app Application) error {
	h := app.Helm
	var unsupported []string
	for _, f := range h.ValueFiles {
		switch {
		case app.Chart != nil && !strings.HasPrefix(f, "/") && !strings.HasPrefix(f, "$"):
			unsupported = append(unsupported, fmt.Sprintf("the values file %q, which Argo CD reads from inside chart %s (only values files of this repository, \"$ref/...\" of a ref source, are read)", f, app.Chart))
		case strings.HasPrefix(f, "$"):
			unsupported = append(unsupported, fmt.Sprintf("the values file %q of another source (multi-source Applications are not supported yet)", f))
		case strings.Contains(f, "://"):
			unsupported = append(unsupported, fmt.Sprintf("the remote values file %q (render reads only the repository)", f))
		case strings.ContainsAny(f, "*?["):
			unsupported = append(unsupported, fmt.Sprintf("the values file glob %q", f))
		case strings.Contains(f, "$"):
			unsupported = append(unsupported, fmt.Sprintf("the values file %q, which names a build environment variable", f))
		}
	}
	for _, p := range h.Parameters {
		if strings.Contains(p.Value, "$") {
			unsupported = append(unsupported, fmt.Sprintf("the parameter %s, whose value names a build environment variable", p.Name))
		}
	}
	for _, p := range h.FileParameters {
		if app.Chart != nil && !strings.HasPrefix(p.Path, "/") && !strings.HasPrefix(p.Path, "$") {
			unsupported = append(unsupported, fmt.Sprintf("the file parameter %s from %q, which Argo CD reads from inside chart %s (only files of this repository, \"$ref/...\" of a ref source, are read)", p.Name, p.Path, app.Chart))
			continue
		}
		if strings.Contains(p.Path, "$") || strings.Contains(p.Path, "://") {
			unsupported = append(unsupported, fmt.Sprintf("the file parameter %s from %q, outside the repository or naming a build environment variable", p.Name, p.Path))
		}
	}
	if len(unsupported) > 0 {
		return &Refusal{Code: CodeHelm, App: app.Name, Reason: fmt.Sprintf("application %s sets Helm options render does not apply: %s", app.Name, strings.Join(unsupported, "; "))}
	}
	return nil
}

// helmFileInfo is what .helmignore rules look at: the name and whether it is a
// directory.
type helmFileInfo struct {
	name string
	dir  bool
}

func (i helmFileInfo) Name() string { return path.Base(i.name) }
func (i helmFileInfo) Size() int64  { return 0 }
func (i helmFileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir
	}
	return 0
}
func (i helmFileInfo) ModTime() time.Time { return time.Time{} }
func (i helmFileInfo) IsDir() bool        { return i.dir }
func (i helmFileInfo) Sys() any           { return nil }

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// loadChart loads the chart in directory root the way Helm loads a chart
// directory (.helmignore honoured, a BOM dropped), every file read through the
// view's bounded reader, vendored chart archives expanded under a bound first.
// It returns what is left of the chart's bounds for the archives fetched per
// Chart.lock.
func loadChart(v *view, root string) (*chart.Chart, archiveBudget, error) {
	if k, err := v.kind(path.Join(root, "Chart.yaml")); err != nil {
		return nil, archiveBudget{}, err
	} else if k != kindFile {
		return nil, archiveBudget{}, refuse(CodeRenderFailed, "%s has no Chart.yaml", root)
	}
	rules := ignore.Empty()
	if k, _ := v.kind(path.Join(root, ignore.HelmIgnore)); k == kindFile {
		data, err := v.read(path.Join(root, ignore.HelmIgnore))
		if err != nil {
			return nil, archiveBudget{}, err
		}
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, archiveBudget{}, refuse(CodeRenderFailed, "%s: %v", path.Join(root, ignore.HelmIgnore), err)
		}
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	budget := newArchiveBudget()
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := v.list(dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := path.Join(dir, n)
			rel := strings.TrimPrefix(p, root+"/")
			if root == "." {
				rel = p
			}
			k, err := v.kind(p)
			if err != nil {
				return err
			}
			if rules.Ignore(rel, helmFileInfo{name: rel, dir: k == kindDir}) {
				continue
			}
			switch k {
			case kindDir:
				if err := walk(p); err != nil {
					return err
				}
			case kindFile:
				if budget.files--; budget.files < 0 {
					return refuse(CodeTooLarge, "chart %s holds more than %d files, at most %d", root, MaxChartFiles, MaxChartFiles)
				}
				data, err := v.read(p)
				if err != nil {
					return err
				}
				if subchartArchive(rel) {
					if _, err := checkChartArchive(p, data, &budget); err != nil {
						return err
					}
				}
				files = append(files, &archive.BufferedFile{Name: rel, Data: bytes.TrimPrefix(data, utf8BOM)})
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, archiveBudget{}, err
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, archiveBudget{}, refuse(CodeRenderFailed, "load chart %s: %v", root, err)
	}
	return ch, budget, nil
}

// helmValueFiles resolves the values files as Argo CD does: relative to the app
// path, or to the repository root when absolute, never outside it; each once, at
// its first place; a missing one skipped with ignoreMissingValueFiles.
func helmValueFiles(v *view, app Application, root string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range app.Helm.ValueFiles {
		p, err := resolveHelmPath(root, f)
		if err != nil {
			return nil, refuse(CodePathEscape, "values file %q: %v", f, err)
		}
		k, err := v.kind(p)
		if err != nil {
			return nil, err
		}
		if k != kindFile {
			if app.Helm.IgnoreMissingValueFiles && k == kindNone {
				continue
			}
			if k != kindNone {
				return nil, refuse(CodeRenderFailed, "values file %s (%q of %s.valueFiles) is not a file", p, f, helmSettings(app))
			}
			return nil, refuse(CodeRenderFailed, "values file %s (%q of %s.valueFiles) does not exist, so Argo CD cannot render the app either: add the file, remove it from valueFiles, or set ignoreMissingValueFiles: true", p, f, helmSettings(app))
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// resolveHelmPath resolves a path of spec.source.helm against the app path.
func resolveHelmPath(root, p string) (string, error) {
	var joined string
	if strings.HasPrefix(p, "/") {
		joined = path.Clean(strings.TrimPrefix(p, "/"))
	} else {
		joined = path.Join(root, p)
	}
	rel, ok := cleanRel(joined)
	if !ok || strings.HasPrefix(joined, "../") || joined == ".." {
		return "", errors.New("it leaves the repository")
	}
	return rel, nil
}

// helmValues merges the values as "helm template" does with Argo CD's flags:
// the values files in order, then values or valuesObject, then parameters,
// string parameters and file parameters.
func helmValues(v *view, app Application, root string, files []string) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range files {
		data, err := v.read(f)
		if err != nil {
			return nil, err
		}
		m, err := loader.LoadValues(bytes.NewReader(data))
		if err != nil {
			return nil, refuse(CodeRenderFailed, "values file %s: %v", f, err)
		}
		base = loader.MergeMaps(base, m)
	}
	if app.Helm.Values != "" {
		field := helmSettings(app) + "." + cmpOr(app.Helm.ValuesField, "values")
		scan := scanYAML(field, []byte(app.Helm.Values))
		if err := v.budget.take(field, len(app.Helm.Values), scan, scan.err); err != nil {
			return nil, err
		}
		m, err := loader.LoadValues(strings.NewReader(app.Helm.Values))
		if err != nil {
			return nil, refuse(CodeRenderFailed, "%s: %v", field, err)
		}
		base = loader.MergeMaps(base, m)
	}
	var set, setString []string
	for _, p := range uniqueParameters(app.Helm.Parameters) {
		arg := p.Name + "=" + cleanSetParameter(p.Value)
		if p.ForceString {
			setString = append(setString, arg)
		} else {
			set = append(set, arg)
		}
	}
	for _, s := range set {
		if err := strvals.ParseInto(s, base); err != nil {
			return nil, refuse(CodeRenderFailed, "parameter %s: %v", s, err)
		}
	}
	for _, s := range setString {
		if err := strvals.ParseIntoString(s, base); err != nil {
			return nil, refuse(CodeRenderFailed, "parameter %s: %v", s, err)
		}
	}
	for _, p := range app.Helm.FileParameters {
		f, err := resolveHelmPath(root, p.Path)
		if err != nil {
			return nil, refuse(CodePathEscape, "file parameter %s (%q): %v", p.Name, p.Path, err)
		}
		reader := func(rs []rune) (any, error) {
			data, err := v.read(f)
			if err != nil {
				return nil, err
			}
			return string(data), nil
		}
		if err := strvals.ParseIntoFile(p.Name+"="+cleanSetParameter(f), base, reader); err != nil {
			var ref *Refusal
			if errors.As(err, &ref) {
				return nil, err
			}
			return nil, refuse(CodeRenderFailed, "file parameter %s (%s): %v", p.Name, f, err)
		}
	}
	return base, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// uniqueParameters keeps the last value of each parameter name: Argo CD collects
// parameters by name before it passes them.
func uniqueParameters(params []HelmParameter) []HelmParameter {
	last := map[string]int{}
	for i, p := range params {
		last[p.Name] = i
	}
	var out []HelmParameter
	for i, p := range params {
		if last[p.Name] == i {
			out = append(out, p)
		}
	}
	return out
}

// cleanSetParameter escapes commas the way Argo CD does before it passes a
// parameter to --set: a value in braces is a Helm list and is kept.
func cleanSetParameter(val string) string {
	if strings.HasPrefix(val, "{") && strings.HasSuffix(val, "}") {
		return val
	}
	var b strings.Builder
	var prev rune
	for _, r := range val {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// runHelm renders the chart as "helm template" does, in a worker process of the
// context's pool (see WithHelmWorkers): there the templates run under a memory
// limit, and are stopped when ctx is done, which Helm's engine in process cannot
// be.
func runHelm(ctx context.Context, ch *chart.Chart, vals map[string]any, app Application) (string, error) {
	h := app.Helm
	if h.KubeVersion != "" {
		if _, err := common.ParseKubeVersion(h.KubeVersion); err != nil {
			return "", refuse(CodeRenderFailed, "kube version %q: %v", h.KubeVersion, err)
		}
	}
	return helmWorkersOf(ctx).Render(ctx, ch, vals, helmexec.Options{
		ReleaseName: cmpOr(h.ReleaseName, app.Name),
		// Without --namespace, helm takes the namespace of its kube context, which
		// is "default" on Argo CD's repo server.
		Namespace:            cmpOr(cmpOr(h.Namespace, app.Namespace), "default"),
		IncludeCRDs:          !h.SkipCrds,
		SkipTests:            h.SkipTests,
		SkipSchemaValidation: h.SkipSchemaValidation,
		KubeVersion:          h.KubeVersion,
		APIVersions:          h.APIVersions,
		OutputLimit:          MaxHelmOutputBytes,
		ListLimit:            maxTemplateList,
	})
}

type helmWorkersKey struct{}

// WithHelmWorkers returns ctx carrying p: every Helm render under ctx (Plan,
// Revert, Render) runs the chart's templates in p's worker processes instead of
// the process's pool (see SetHelmWorkers).
func WithHelmWorkers(ctx context.Context, p *helmexec.Pool) context.Context {
	return context.WithValue(ctx, helmWorkersKey{}, p)
}

// helmWorkers is the process's pool, nil until SetHelmWorkers or the first Helm
// render. Worker processes belong to the process, like its cores, so one pool
// bounds every render of it, whichever caller (pipeline, pull request check,
// repository view) asks.
var helmWorkers atomic.Pointer[helmexec.Pool]

// SetHelmWorkers makes p the pool of the process's Helm renders, for those whose
// context carries none; a pool set before is closed (a render under way on it
// finishes). Without it, the first Helm render makes a pool of helmexec's
// defaults.
func SetHelmWorkers(p *helmexec.Pool) {
	if old := helmWorkers.Swap(p); old != nil {
		old.Close()
	}
}

func helmWorkersOf(ctx context.Context) *helmexec.Pool {
	if p, _ := ctx.Value(helmWorkersKey{}).(*helmexec.Pool); p != nil {
		return p
	}
	if p := helmWorkers.Load(); p != nil {
		return p
	}
	p := helmexec.New(helmexec.Config{})
	if !helmWorkers.CompareAndSwap(nil, p) {
		return helmWorkers.Load()
	}
	return p
}

// helmObjects splits the output of "helm template" into objects as Argo CD does:
// empty documents dropped, the items of a document with an items list (a List)
// flattened, a List with null items dropped. The output is checked against
// the bounds of a file (aliases, depth, width) before it is decoded.
func helmObjects(app Application, root, out string) ([]*object, error) {
	if len(out) > MaxHelmOutputBytes {
		return nil, outputTooLarge(app, root)
	}
	where := "the output of chart " + root
	if s := scanYAML(where, []byte(out)); s.err != nil {
		return nil, withApp(s.err, app.Name)
	}
	docs, err := yamledit.Documents([]byte(out))
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, refuse(CodeAliasBomb, "application %s: %s: YAML aliases expand beyond the allowed bound", app.Name, where)
		}
		return nil, refuse(CodeRenderFailed, "application %s: %s does not parse: %v", app.Name, where, err)
	}
	var objs []*object
	add := func(m map[string]any, doc int) error {
		o, ok := newObject(m)
		if !ok {
			return refuse(CodeRenderFailed, "application %s: %s: document %d has no apiVersion or kind", app.Name, where, doc+1)
		}
		objs = append(objs, o)
		return nil
	}
	for _, d := range docs {
		if d.Empty || d.Object == nil {
			continue
		}
		if list, isList := d.Object["items"].([]any); isList {
			for _, it := range list {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, refuse(CodeRenderFailed, "application %s: %s: document %d: a List item is not an object", app.Name, where, d.Index+1)
				}
				if err := add(m, d.Index); err != nil {
					return nil, err
				}
			}
			continue
		}
		if isNullList(d.Object) {
			continue
		}
		if err := add(d.Object, d.Index); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func outputTooLarge(app Application, root string) error {
	return refuse(CodeTooLarge, "application %s: chart %s renders more than %d bytes, at most %d", app.Name, root, MaxHelmOutputBytes, MaxHelmOutputBytes)
}

// isNullList reports a List whose items are null, which Argo CD drops.
func isNullList(m map[string]any) bool {
	_, spec := m["spec"]
	_, status := m["status"]
	items, ok := m["items"]
	return !spec && !status && ok && items == nil
}
