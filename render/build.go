package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/kukie/kukie-gitops/render/helmexec"
)

// kustomizeSlot serialises kustomize builds: krusty sets a process-wide OpenAPI
// schema during Run, so two builds at once could see each other's schema. It is a
// channel, not a mutex, so that waiting for it ends with the waiter's context.
var kustomizeSlot = make(chan struct{}, 1)

const (
	originAnnotation          = "config.kubernetes.io/origin"
	transformationsAnnotation = "alpha.config.kubernetes.io/transformations"
)

// renderer renders Applications and caches results per view and source, so that
// Applications sharing a source (same path and options, different destinations)
// are built once.
type renderer struct {
	// ctx bounds every render: reads fail once it is done.
	ctx   context.Context
	mu    sync.Mutex
	cache map[renderKey]renderResult
}

type renderKey struct {
	view   *view
	source string
	origin bool
}

type renderResult struct {
	objs []*object
	err  error
}

func newRenderer(ctx context.Context) *renderer {
	return &renderer{ctx: ctx, cache: map[renderKey]renderResult{}}
}

// helmKey is what a Helm render depends on besides the chart's files: the
// chart itself when it comes from a Helm repository.
type helmKey struct {
	Options            HelmOptions
	Release, Namespace string
	Chart              *ChartDependency `json:",omitempty"`
}

func sourceKey(app Application) string {
	key := struct {
		T SourceType
		P string
		K KustomizeOptions
		D DirectoryOptions
		H *helmKey `json:",omitempty"`
	}{T: app.SourceType, P: path.Clean(app.Path), K: app.Kustomize, D: app.Directory}
	if app.SourceType == SourceHelm {
		// A chart sees its release name and namespace: Applications of one chart
		// render alike only when these are the same too.
		key.H = &helmKey{Options: app.Helm, Release: cmpOr(app.Helm.ReleaseName, app.Name), Namespace: app.Namespace, Chart: app.Chart}
	}
	b, _ := json.Marshal(key)
	return string(b)
}

// render returns the objects of app as Argo CD would render them from v. With
// origin, kustomize objects also say which file they came from (locating needs it;
// it makes builds slower, so verification renders go without). Objects are shared
// between callers and must not be modified.
func (r *renderer) render(v *view, app Application, origin bool) ([]*object, error) {
	k := renderKey{view: v, source: sourceKey(app), origin: origin && app.SourceType == SourceKustomize}
	return r.load(k, func() ([]*object, error) { return renderApp(r.ctx, v, app, k.origin) })
}

// load returns the result cached under k, computing it with build once.
func (r *renderer) load(k renderKey, build func() ([]*object, error)) ([]*object, error) {
	r.mu.Lock()
	res, ok := r.cache[k]
	r.mu.Unlock()
	if ok {
		return res.objs, res.err
	}
	objs, err := build()
	r.mu.Lock()
	r.cache[k] = renderResult{objs: objs, err: err}
	r.mu.Unlock()
	return objs, err
}

// renderApp renders app from v under ctx, every read counted against the bounds
// of one render.
func renderApp(ctx context.Context, v *view, app Application, origin bool) ([]*object, error) {
	if err := contextError(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	objs, err := renderSource(ctx, v.metered(ctx), app, origin)
	observeRender(ctx, app, start, len(objs), err)
	return objs, err
}

// renderSource renders app by its source type.
func renderSource(ctx context.Context, v *view, app Application, origin bool) ([]*object, error) {
	switch app.SourceType {
	case SourceDirectory:
		return renderDirectory(v, app)
	case SourceKustomize:
		return renderKustomize(ctx, v, app, origin)
	case SourceHelm:
		return renderHelm(ctx, v, app)
	default:
		return nil, &Refusal{Code: CodeUnsupportedSource, App: app.Name, Reason: fmt.Sprintf("application %s has source type %q; only Directory, Kustomize and Helm are supported", app.Name, app.SourceType)}
	}
}

func renderKustomize(ctx context.Context, v *view, app Application, origin bool) ([]*object, error) {
	lexical, ok := cleanRel(app.Path)
	if !ok {
		return nil, refuse(CodePathEscape, "application %s: path %q leaves the repository", app.Name, app.Path)
	}
	// kustomize builds from the real directory of the path (its file system
	// resolves symlinks), and origins are relative to it.
	root, err := v.t.canonical(lexical)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	// kustomize fetches remote bases and resources itself (HTTP, git), so every
	// reference is resolved inside the repository before the build: a remote one
	// is refused here, never fetched. Edits add only local references, so the
	// repository's own kustomizations are the ones to check.
	components := effectiveComponents(v, root, app.Kustomize)
	reach, err := v.t.reachKustomization(root, components)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	if err := v.t.checkTransformWork(root, app.Kustomize, components); err != nil {
		return nil, withApp(err, app.Name)
	}
	kfile, err := v.kustomizationFile(root)
	if err != nil {
		return nil, err
	}
	opts, helm, err := parseBuildOptions(app.Kustomize.BuildOptions)
	if err != nil {
		return nil, &Refusal{Code: CodeUnsupportedSource, App: app.Name, Reason: fmt.Sprintf("application %s: %v", app.Name, err)}
	}
	if ref := helmChartsRefusal(app.Name, reach, helm); ref != nil {
		return nil, ref
	}
	// The build's own copy of the tree: what the edits write stays in it.
	bv := v.with(nil)
	end := building(ctx, app.Name, root)
	maps, err := buildKustomization(ctx, bv, root, kfile, app.Kustomize, sourceSettings(app), opts, origin, reach)
	end()
	if err := contextError(ctx); err != nil {
		return nil, buildTimedOut(err, app.Name, root)
	}
	if err != nil {
		if exceeded := bv.budget.exceeded(); exceeded != nil {
			return nil, withApp(exceeded, app.Name)
		}
		var edit *argoEditError
		var limit *helmexec.LimitError
		var objErr *objectMapError
		switch {
		case errors.As(err, &edit):
			return nil, withApp(refuse(CodeRenderFailed, "application %s: %s: %v", app.Name, kfile, edit.err), app.Name)
		case errors.As(err, &objErr):
			return nil, fmt.Errorf("application %s: %w", app.Name, err)
		case errors.Is(err, helmexec.ErrOutputTooLarge):
			return nil, &Refusal{Code: CodeTooLarge, App: app.Name, Reason: fmt.Sprintf(
				"application %s: kustomization %s: the build's resources take more than the %d bytes a render may hold", app.Name, root, MaxPlanRenderBytes)}
		case errors.As(err, &limit):
			return nil, &Refusal{Code: CodeTooLarge, App: app.Name, Reason: fmt.Sprintf("application %s: kustomization %s: %v", app.Name, root, err)}
		}
		return nil, withApp(refuse(CodeRenderFailed, "application %s: kustomize build %s: %v", app.Name, root, err), app.Name)
	}
	var objs []*object
	for _, m := range maps {
		o, ok := newObject(m)
		if !ok {
			return nil, refuse(CodeRenderFailed, "application %s: kustomize produced an object without apiVersion or kind", app.Name)
		}
		if err := o.takeOrigin(root); err != nil {
			return nil, fmt.Errorf("application %s: %s: %w", app.Name, o.kind+"/"+o.name, err)
		}
		o.origin = v.realOrigin(o.origin)
		objs = append(objs, o)
	}
	return objs, nil
}

// buildTimedOut names the app and kustomization of a timeout refusal of its
// build: the build was stopped (its worker killed) or never started.
func buildTimedOut(err error, app, root string) error {
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeTimeout {
		return err
	}
	return &Refusal{Code: CodeTimeout, App: app, Reason: fmt.Sprintf("application %s: kustomize build %s: %s", app, root, ref.Reason)}
}

// buildKustomization makes the Argo CD edits of k, the kustomize settings of
// the source settings names (see sourceSettings), (and, with origin, the
// origin annotations) in bv and builds root from it, in a worker process of the
// context's pool (see WithKustomizeWorkers) or, where the process builds in
// process (SetKustomizeInProcess), in the kustomize slot. It answers each
// resource's map, in the build's order. A build in a worker is sent what reach
// (the build's kustomization graph) says it reads (see expectedReads).
func buildKustomization(ctx context.Context, bv *view, root, kfile string, k KustomizeOptions, settings string, opts *krusty.Options, origin bool, reach *kustReach) ([]map[string]any, error) {
	edit := func() error {
		if !k.empty() {
			if err := applyArgoEdits(bv, root, k, settings); err != nil {
				return &argoEditError{err: err}
			}
		}
		if origin {
			if err := withOriginAnnotations(bv, kfile); err != nil {
				return &argoEditError{err: err}
			}
		}
		return nil
	}
	workers := kustomizeWorkersOf(ctx)
	if workers == nil {
		return runKustomize(ctx, func() ([]map[string]any, error) {
			if err := edit(); err != nil {
				return nil, err
			}
			resMap, err := helmexec.RunKustomizer(krusty.MakeKustomizer(opts), bv, abs(root), reach.namesSchema())
			if err != nil {
				return nil, err
			}
			return resourceMaps(resMap)
		})
	}
	// The edits run kustomize's edit command in process, in the slot like any
	// use of kustomize here; the build, which a repository can make take any
	// time and memory, runs in a worker, killed at ctx's end.
	if _, err := runKustomize(ctx, func() (struct{}, error) { return struct{}{}, edit() }); err != nil {
		return nil, err
	}
	// Counted as a build in the slot is (see runInSlot): one that never got a
	// worker stays waiting, so a timeout says the build never started.
	use := slotUseOf(ctx)
	if use == nil {
		use = new(slotUse)
	}
	use.waiting.Add(1)
	started := false
	defer func() {
		if started {
			use.running.Add(-1)
		}
	}()
	ahead := bv.readingAhead()
	return workers.Kustomize(ctx, bv, helmexec.KustomizeJob{
		Root: abs(root), Options: opts, OutputLimit: MaxPlanRenderBytes,
		Started:  func() { started = true; use.waiting.Add(-1); use.running.Add(1) },
		Expected: expectedReads(reach), ReadAhead: ahead.read, Unread: ahead.unread,
		OwnSchema: reach.namesSchema(),
	})
}

// expectedReads are the paths a build of reach's kustomizations resolves and
// reads, as kustomize names them (joined to the canonical directory its file
// system answered), in about the order it reads them: each kustomization's
// directory, the names it looks for its kustomization file under, its file,
// its resources as listed, and the other files it reads. A file it names
// through a symlink is asked for under another name, which the worker forwards.
func expectedReads(reach *kustReach) []string {
	if reach == nil {
		return nil
	}
	names := konfig.RecognizedKustomizationFileNames()
	var out []string
	for _, n := range reach.nodes {
		out = append(out, abs(n.dir))
		for _, name := range names {
			out = append(out, abs(path.Join(n.dir, name)))
		}
		listed := map[string]bool{}
		for _, f := range append([]string{n.file}, n.k.Resources...) {
			if f != n.file {
				f = path.Join(n.dir, f)
			}
			if _, ok := slices.BinarySearch(n.files, f); ok && !listed[f] {
				listed[f] = true
				out = append(out, abs(f))
			}
		}
		for _, f := range n.files {
			if !listed[f] {
				out = append(out, abs(f))
			}
		}
	}
	return out
}

// resourceMaps is each resource of resMap as a map.
func resourceMaps(resMap resmap.ResMap) ([]map[string]any, error) {
	out := make([]map[string]any, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			return nil, &objectMapError{id: res.CurId().String(), err: err}
		}
		out = append(out, m)
	}
	return out, nil
}

// objectMapError is a resource of a build that is no map.
type objectMapError struct {
	id  string
	err error
}

func (e *objectMapError) Error() string {
	return fmt.Sprintf("read rendered object %s: %v", e.id, e.err)
}

func (e *objectMapError) Unwrap() error { return e.err }

// runKustomize runs build, a use of kustomize in process (the edits and build
// of one kustomization, or the edits alone), in the kustomize slot (see
// runInSlot).
func runKustomize[T any](ctx context.Context, build func() (T, error)) (T, error) {
	return runInSlot(ctx, kustomizeSlot, "kustomize", build)
}

// argoEditError is a failure of the kustomization edits before the build.
type argoEditError struct{ err error }

func (e *argoEditError) Error() string { return e.err.Error() }

// runInSlot runs one build of a tool that cannot be cancelled in process
// (krusty) in one of its slots. The build runs on its own goroutine and
// is abandoned when ctx is done: the caller returns at once, and the build stops
// at its next read of the view (which fails from then on) or when it finishes,
// bounded by what the view let it read; only then does the next build start. A
// panic in the tool is an error of this build.
func runInSlot[T any](ctx context.Context, slots chan struct{}, tool string, build func() (T, error)) (T, error) {
	var zero T
	use := slotUseOf(ctx)
	if use == nil {
		use = new(slotUse)
	}
	use.waiting.Add(1)
	select {
	case slots <- struct{}{}:
		use.waiting.Add(-1)
		use.running.Add(1)
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	type built struct {
		v   T
		err error
	}
	done := make(chan built, 1)
	go func() {
		defer func() { <-slots; use.running.Add(-1) }()
		defer func() {
			if r := recover(); r != nil {
				done <- built{err: fmt.Errorf("%s panicked: %v", tool, r)}
			}
		}()
		v, err := build()
		done <- built{v: v, err: err}
	}()
	select {
	case b := <-done:
		return b.v, b.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// takeOrigin moves kustomize's build metadata annotations out of the object: the
// origin (which render may ask for) into the origin fields. They describe the
// build, not the object, and are never compared.
func (o *object) takeOrigin(root string) error {
	meta, _ := o.body["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	raw, hasOrigin := annotations[originAnnotation].(string)
	_, hasTransformations := annotations[transformationsAnnotation]
	if !hasOrigin && !hasTransformations {
		return nil
	}
	delete(annotations, originAnnotation)
	delete(annotations, transformationsAnnotation)
	if len(annotations) == 0 {
		delete(meta, "annotations")
	}
	if !hasOrigin {
		return nil
	}
	var origin struct {
		Path         string `yaml:"path"`
		Repo         string `yaml:"repo"`
		ConfiguredIn string `yaml:"configuredIn"`
		ConfiguredBy struct {
			Kind string `yaml:"kind"`
		} `yaml:"configuredBy"`
	}
	if err := yaml.Unmarshal([]byte(raw), &origin); err != nil {
		return fmt.Errorf("parse origin annotation: %w", err)
	}
	switch {
	case origin.Repo != "":
		o.remote = true
	case strings.HasSuffix(origin.ConfiguredBy.Kind, "Transformer"):
		// A transformer makes no object: one that replaced the object's
		// annotations (a patch setting metadata.annotations whole) dropped the
		// origin kustomize had put there, and kustomize then names the
		// transformer. Where the object came from is unknown; it is no
		// generator's.
	case origin.ConfiguredBy.Kind != "":
		o.generatedBy = origin.ConfiguredBy.Kind
		if p, ok := cleanRel(path.Join(root, origin.ConfiguredIn)); ok {
			o.origin = p
		}
	case origin.Path != "":
		if p, ok := cleanRel(path.Join(root, origin.Path)); ok {
			o.origin = p
		}
	}
	return nil
}

// realOrigin turns an origin into the canonical path of the file it names.
// Kustomize joins origins as written, so an origin that passes through a symlinked
// directory and then climbs out of it ("link/../x") names no real file: it is
// dropped rather than pointing locating at the wrong file.
func (v *view) realOrigin(origin string) string {
	if origin == "" {
		return ""
	}
	canon, err := v.t.canonical(origin)
	if err != nil {
		return ""
	}
	if k, err := v.kind(canon); err != nil || k != kindFile {
		return ""
	}
	return canon
}

func (v *view) kustomizationFile(dir string) (string, error) {
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		f := v.t.key(path.Join(dir, name))
		if _, ok := v.files[f]; ok {
			return f, nil
		}
	}
	f, err := v.t.findKustomizationFile(dir)
	if err != nil {
		return "", err
	}
	if f == "" {
		return "", refuse(CodeRenderFailed, "%s has no kustomization file (kustomization.yaml, kustomization.yml or Kustomization)", dir)
	}
	return f, nil
}

// withOriginAnnotations turns on kustomize's origin annotations in the
// kustomization file of the build's view, so render learns which file each object
// came from. It only feeds the build; edits never use it.
func withOriginAnnotations(v *view, kfile string) error {
	data, err := v.read(kfile)
	if err != nil {
		return err
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if k == nil {
		k = map[string]any{}
	}
	meta, _ := k["buildMetadata"].([]any)
	for _, m := range meta {
		if m == types.OriginAnnotations {
			return nil
		}
	}
	k["buildMetadata"] = append(meta, types.OriginAnnotations)
	out, err := yaml.Marshal(k)
	if err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	return v.WriteFile(abs(kfile), out)
}

// parseImageArg parses a "kustomize edit set image" argument: [name=]newName[:tag][@digest].
func parseImageArg(arg string) (map[string]any, error) {
	name, rest, hasEq := strings.Cut(arg, "=")
	if !hasEq {
		rest = arg
	}
	ref := parseImageRef(rest)
	if ref.name == "" {
		return nil, fmt.Errorf("image override %q has no image name", arg)
	}
	entry := map[string]any{}
	if hasEq {
		entry["name"] = name
		if ref.name != name {
			entry["newName"] = ref.name
		}
	} else {
		entry["name"] = ref.name
	}
	if ref.tag != "" {
		entry["newTag"] = ref.tag
	}
	if ref.digest != "" {
		entry["digest"] = ref.digest
	}
	return entry, nil
}
