package render

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/kustomize/api/konfig"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

// maxReportedDifferences bounds the differences listed per app in a refusal, and
// maxDetailedLeaks the other apps whose differences are spelled out.
const (
	maxReportedDifferences = 5
	maxDetailedLeaks       = 3
)

// Plan locates, edits and verifies one change. It returns the verified edit, or a
// *Refusal (use errors.As) when no edit can be proven right; other errors are
// failures to read the repository. The repository directory is never modified.
//
// Every Plan runs under Timeout and within the bounds on what it reads (see
// MaxRenderDocuments and the others): past either it is refused. It returns as
// soon as ctx is done or Timeout passes, whatever step the plan is in; the work
// left stops at its next read or check of the context.
func Plan(ctx context.Context, req Request) (*Result, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	type planned struct {
		res *Result
		err error
	}
	done := make(chan planned, 1)
	go func() {
		res, err := plan(ctx, req)
		done <- planned{res: res, err: err}
	}()
	select {
	case p := <-done:
		return p.res, timedOut(ctx, p.err)
	case <-ctx.Done():
		return nil, callTimedOut(ctx)
	}
}

func plan(ctx context.Context, req Request) (*Result, error) {
	p, err := newPlanner(ctx, req)
	if err != nil {
		return nil, err
	}
	defer p.precomputeReaches()()
	var res *Result
	switch {
	case req.Change.NewResource != nil:
		res, err = p.planNewResource(ctx)
	case req.Change.DeleteResource != nil:
		res, err = p.planDelete(ctx)
	default:
		res, err = p.planChange(ctx)
	}
	// Free text may quote what a tool could not read, or a value the change
	// gives; see scrub.go.
	if err != nil {
		return nil, newScrubber(p.secretValues()).err(err)
	}
	if hasFreeText(res) {
		newScrubber(p.secretValues()).result(res)
	}
	return res, nil
}

// secretValues are the values free text is scrubbed of: the secret values of
// every file the plan read, and those the change gives (a Helm key guessed for
// an env value is tried set to it, and the attempt's reason quotes the key and
// the render, masked only where they are a secret's).
func (p *planner) secretValues() []string {
	return append(p.t.secretValues(p.req.Apps), p.req.Change.secretValues(p.req.Target)...)
}

// hasFreeText reports whether a result carries text besides its masked diffs.
func hasFreeText(r *Result) bool {
	if len(r.Warnings) > 0 {
		return true
	}
	for _, a := range r.Verification.Attempts {
		if a.Reason != "" {
			return true
		}
	}
	for _, a := range r.Verification.Apps {
		if len(a.Differences) > 0 {
			return true
		}
	}
	return false
}

// planner holds the state of one Plan call.
type planner struct {
	// ctx is the Plan call's context, for the caller's BeforeRender.
	ctx     context.Context
	req     Request
	t       *tree
	primary Application
	apps    []Application
	r       *renderer
	before  *view

	reachMu    sync.Mutex
	reachCache map[string]*reachCall
	warnings   []Warning
	// target is the object of the request as the primary app renders it, once
	// found (nil for a new resource): the Result's Target.
	target *objref.Target

	priorOnce sync.Once
	priorTree *priorReaches

	// remote is the chart the primary app deploys from a Helm repository, once
	// fetched for its default values (see remoteChart).
	remoteOnce sync.Once
	remote     *chart.Chart
	remoteErr  error
}

// appReach is what an Application's render reads. Every path in it is canonical
// (see tree): a file counts as read whichever name the app reads it under.
type appReach struct {
	kust *kustReach
	dir  *directoryMatcher
	// linked are the files a Directory app reads under another name (through a
	// symlink), by canonical path.
	linked map[string]bool
	// root is the app's directory; under is, for an app whose reach is unknown
	// and for a Helm app (a chart reads everything below its directory), every
	// directory reachable below root, symlinks followed, and underLinked the
	// files below them that are symlinks to files elsewhere, by canonical path.
	root        string
	under       []string
	underLinked map[string]bool
	// helmFiles are the files a Helm app reads outside its chart (values files
	// and file parameters elsewhere in the repository), by canonical path.
	helmFiles map[string]bool
	// filesOnly says the app reads helmFiles alone: a chart from a Helm
	// repository has no directory in the repository.
	filesOnly bool
	err       error
}

// reachCall computes one Application's reach once, whoever asks first.
type reachCall struct {
	once  sync.Once
	reach *appReach
	// done is set once reach is, for a later tree that reuses it (carried).
	done atomic.Bool
	// links holds every symlink the computation of reach may have gone through.
	links *linkSet
	// remembered is the key the call is shared under across plans, if any.
	remembered *reachMemoKey
}

func newPlanner(ctx context.Context, req Request) (*planner, error) {
	if err := req.Change.Validate(); err != nil {
		return nil, refuse(CodeInvalidRequest, "%v", err)
	}
	if err := req.Change.checkNoMask(req.Target); err != nil {
		return nil, refuse(CodeInvalidRequest, "%v", err)
	}
	if req.Change.NewResource == nil {
		if req.Target.APIVersion == "" || req.Target.Kind == "" || req.Target.Name == "" {
			return nil, refuse(CodeInvalidRequest, "the target needs apiVersion, kind and name")
		}
	}
	return openPlanner(ctx, req)
}

// openPlanner checks the Applications of req and opens its tree; the change is
// the caller's (Plan's, or a revert's).
func openPlanner(ctx context.Context, req Request) (*planner, error) {
	if len(req.Apps) == 0 {
		return nil, refuse(CodeInvalidRequest, "no Application given")
	}
	names := map[string]bool{}
	for _, a := range req.Apps {
		if a.Name == "" {
			return nil, refuse(CodeInvalidRequest, "an Application has no name")
		}
		if names[a.Name] {
			return nil, refuse(CodeInvalidRequest, "Application %s is given twice", a.Name)
		}
		names[a.Name] = true
		if _, ok := cleanRel(a.Path); !ok {
			return nil, &Refusal{Code: CodePathEscape, App: a.Name, Reason: fmt.Sprintf("application %s: path %q leaves the repository", a.Name, a.Path)}
		}
	}
	var primary *Application
	switch {
	case req.App != "":
		for i := range req.Apps {
			if req.Apps[i].Name == req.App {
				primary = &req.Apps[i]
			}
		}
		if primary == nil {
			return nil, refuse(CodeInvalidRequest, "Application %s is not among the Applications given", req.App)
		}
	case len(req.Apps) == 1:
		primary = &req.Apps[0]
	default:
		return nil, refuse(CodeInvalidRequest, "several Applications given; name the one that manages the target")
	}
	t, err := openIndexedTree(req.RepoDir, req.TreeID)
	if err != nil {
		return nil, err
	}
	return &planner{
		ctx:        ctx,
		req:        req,
		t:          t,
		primary:    *primary,
		apps:       req.Apps,
		r:          newRenderer(ctx),
		before:     newView(t, nil),
		reachCache: map[string]*reachCall{},
	}, nil
}

// reach computes (once) which files an Application reads. Concurrent callers for
// the same app wait for one computation. The reach is of the tree as given, never
// of an edited view: with a TreeID it is shared with every plan on that tree.
func (p *planner) reach(app Application) *appReach {
	p.reachMu.Lock()
	c, ok := p.reachCache[app.Name]
	if !ok {
		if p.req.TreeID != "" {
			c = rememberedReaches.call(reachMemoKey{tree: p.req.TreeID, app: app.Name, source: sourceKey(app)})
		} else {
			c = &reachCall{}
		}
		p.reachCache[app.Name] = c
	}
	p.reachMu.Unlock()
	c.once.Do(func() {
		c.links = p.t.links
		if r, links := p.carried(app, c.remembered); r != nil {
			c.reach = r
			c.links.addAll(links)
		} else {
			c.reach = p.computeReach(app)
		}
		c.done.Store(true)
		if c.remembered != nil && !c.reach.rememberable() {
			rememberedReaches.forget(*c.remembered, c)
		}
	})
	return c.reach
}

func (p *planner) computeReach(app Application) *appReach {
	lexical, _ := cleanRel(app.Path)
	r := &appReach{root: lexical}
	if canon, err := p.t.canonical(lexical); err == nil {
		r.root = canon
	}
	switch app.SourceType {
	case SourceKustomize:
		r.kust, r.err = p.t.reachKustomization(lexical, effectiveComponents(newView(p.t, nil), r.root, app.Kustomize))
	case SourceDirectory:
		r.dir, r.linked, r.err = p.directoryReach(app, r.root)
	case SourceHelm:
		r.helmFiles, r.err = p.helmReach(app, lexical)
	}
	if app.SourceType == SourceHelm && app.Chart != nil && r.err == nil {
		// A chart from a Helm repository reads nothing of the repository but
		// its values files.
		r.filesOnly = true
		return r
	}
	if r.err != nil || (r.kust == nil && r.dir == nil) {
		r.under, r.underLinked = p.t.reachable(r.root)
	}
	return r
}

// helmReach returns the files a Helm app reads besides its chart directory: its
// values files and file parameters, wherever they are in the repository.
func (p *planner) helmReach(app Application, root string) (map[string]bool, error) {
	out := map[string]bool{}
	paths := slices.Clone(app.Helm.ValueFiles)
	for _, fp := range app.Helm.FileParameters {
		paths = append(paths, fp.Path)
	}
	for _, f := range paths {
		rel, err := resolveHelmPath(root, f)
		if err != nil {
			return nil, refuse(CodePathEscape, "application %s: %q: %v", app.Name, f, err)
		}
		out[p.t.key(rel)] = true
	}
	return out, nil
}

// directoryReach returns the matcher of a Directory app's files, rooted at the
// app's real directory (where a new file of the app goes), and the real paths of
// the files it reads through symlinks.
func (p *planner) directoryReach(app Application, canonRoot string) (*directoryMatcher, map[string]bool, error) {
	m, err := newDirectoryMatcher(app)
	if err != nil {
		return nil, nil, err
	}
	linked, err := m.linked(p.t)
	if err != nil {
		return nil, nil, err
	}
	real := *m
	real.root = canonRoot
	return &real, linked, nil
}

// parallelReachThreshold is the number of Applications from which their reaches
// are computed in the background from the start of a plan. Proving which apps an
// edit leaves alone reads every app's kustomization; in a monorepo that is as much
// work as rendering the edited app, and independent of it until verification asks.
const parallelReachThreshold = 64

// precomputeReaches starts computing the reach of every Application on the cores
// the plan's own work leaves free, and returns the function that stops the
// workers and waits for them; reach picks up whatever they have not done. Only
// Kustomize apps read files to know their reach.
func (p *planner) precomputeReaches() (stop func()) {
	if len(p.apps) < parallelReachThreshold {
		return func() {}
	}
	ctx, cancel := context.WithCancel(p.ctx)
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	next := make(chan Application)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for app := range next {
				p.reach(app)
			}
		})
	}
	go func() {
		defer close(next)
		for _, app := range p.apps {
			if app.SourceType != SourceKustomize {
				continue
			}
			select {
			case next <- app:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// reaches reports whether an Application's render reads the repository file f.
func (p *planner) reaches(app Application, f string) bool {
	return p.reach(app).reads(app.SourceType, f)
}

// reads reports whether the render of an Application of sourceType whose reach
// is r reads the repository file f (a canonical path).
func (r *appReach) reads(sourceType SourceType, f string) bool {
	switch {
	case r.helmFiles[f], r.underLinked[f]:
		return true
	case r.filesOnly:
		return false
	case r.err != nil || (sourceType != SourceKustomize && sourceType != SourceDirectory):
		// Unknown reach, or a chart: anything under the app's path counts,
		// symlinks followed.
		for _, d := range r.under {
			if d == "." || strings.HasPrefix(f, d+"/") {
				return true
			}
		}
		return r.root == "." || strings.HasPrefix(f, r.root+"/")
	case r.kust != nil:
		return r.kust.reads(f)
	default:
		return r.dir.matches(f) || r.linked[f]
	}
}

// reachesAny reports whether an Application's render reads one of the files.
func (p *planner) reachesAny(app Application, files []string) bool {
	for _, f := range files {
		if p.reaches(app, p.t.key(f)) {
			return true
		}
	}
	return false
}

// generatePathsCover reports whether the manifest-generate-paths annotation of app
// names file f, and whether the app has the annotation at all.
func generatePathsCover(app Application, f string) (covered, annotated bool) {
	if strings.TrimSpace(app.ManifestGeneratePaths) == "" {
		return false, false
	}
	root, _ := cleanRel(app.Path)
	for _, item := range strings.Split(app.ManifestGeneratePaths, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var p string
		if strings.HasPrefix(item, "/") {
			p, _ = cleanRel(item)
		} else {
			p, _ = cleanRel(path.Join(root, item))
		}
		if p == "" {
			continue
		}
		if p == "." || f == p || strings.HasPrefix(f, p+"/") {
			return true, true
		}
		if ok, _ := filepath.Match(p, f); ok {
			return true, true
		}
	}
	return false, true
}

// affected lists the Applications whose render depends on one of the files, the
// primary one first. It also warns where Argo CD's manifest-generate-paths would
// not refresh an app that the edit reaches.
func (p *planner) affected(files []string) ([]Application, []Warning) {
	var out []Application
	var warnings []Warning
	real := make([]string, len(files))
	for i, f := range files {
		real[i] = p.t.key(f)
	}
	for _, app := range p.apps {
		isAffected := app.Name == p.primary.Name
		for _, f := range real {
			reached := p.reaches(app, f)
			covered, annotated := generatePathsCover(app, f)
			if reached && annotated && !covered {
				warnings = append(warnings, Warning{
					Code:        "manifest_generate_paths",
					Where:       "Application " + app.Name,
					Message:     fmt.Sprintf("its argocd.argoproj.io/manifest-generate-paths annotation does not name %s, so Argo CD may keep serving the old manifests after this change", f),
					Alternative: "add the path to the annotation, or refresh the app by hand after merging",
				})
			}
			if reached || covered {
				isAffected = true
			}
		}
		if isAffected {
			out = append(out, app)
			if app.SourceType == SourceKustomize && app.Kustomize.readsRevision() {
				warnings = append(warnings, Warning{
					Code:        "revision_substituted",
					Where:       "Application " + app.Name,
					Message:     "its " + sourceSettings(app) + ".kustomize settings substitute $ARGOCD_APP_REVISION, which Argo CD sets to the commit it deploys: after the merge every object carrying it changes to the merge commit's revision too (verified here with the base commit's)",
					Alternative: "drop the revision from the settings if only the requested change should reach the cluster",
				})
			}
			if w, ok := p.customSchemaWarning(app); ok {
				warnings = append(warnings, w)
			}
			if app.SourceType == SourceHelm && app.Helm.IgnoredValues {
				warnings = append(warnings, Warning{
					Code:        "helm_values_ignored",
					Where:       "Application " + app.Name,
					Message:     fmt.Sprintf("its %s sets both values and valuesObject: Argo CD passes valuesObject alone to helm template and ignores values, so no key of values reaches the chart: the render verified is valuesObject's, and an edit of the Application's values goes to valuesObject", helmSettings(app)),
					Alternative: "move the keys of values into valuesObject and remove values",
				})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name == p.primary.Name && out[j].Name != p.primary.Name })
	return out, warnings
}

// keyed indexes an app's render by effective identity. Duplicates are an error, as
// Argo CD cannot apply them either.
func keyed(app Application, objs []*object) (map[objKey]*object, error) {
	out := make(map[objKey]*object, len(objs))
	for _, o := range objs {
		k := o.key(app.Namespace)
		if prev, dup := out[k]; dup {
			where := func(o *object) string {
				if o.file != "" {
					return describeDoc(o.file, o.doc)
				}
				return o.origin
			}
			return nil, &Refusal{Code: CodeRenderFailed, App: app.Name, Reason: fmt.Sprintf("application %s renders %s twice (%s and %s)", app.Name, k, where(prev), where(o))}
		}
		out[k] = o
	}
	return out, nil
}

// candidate is one possible edit: new contents for some files.
type candidate struct {
	strategy string
	files    map[string][]byte
	created  map[string]bool
	warnings []Warning
	// apps are Applications whose spec the edit changes (an app-of-apps
	// manifest), as they render after it; exp, when set, replaces the plan's
	// expectation for this candidate.
	apps map[string]Application
	exp  expectation
	// keys names the values keys a Helm candidate sets, for the reason of an
	// attempt that does not verify: several keys of one file are tried, and
	// the file alone does not say which one rendered wrong.
	keys []string
}

func (c *candidate) paths() []string {
	// Never nil, as an attempt's files are answered: a JSON list, [] for none.
	paths := slices.AppendSeq(make([]string, 0, len(c.files)), maps.Keys(c.files))
	slices.Sort(paths)
	return paths
}

// expectation says what every affected app must render after the edit.
type expectation interface {
	// expect returns the expected objects of app given its before-render.
	expect(app Application, before map[objKey]*object) (map[objKey]*object, error)
	// extra judges the objects rendered after the edit that expect has no entry
	// for, and returns the problems (none: accepted).
	extra(app Application, added map[objKey]*object) []string
}

// aligner is an expectation that, for an object, takes from the render what
// the change leaves to the render to decide and that means the same either
// way (the place of a new env variable a Helm chart renders from a mapping).
type aligner interface {
	align(app Application, k objKey, want, got *object) (*object, string)
}

// unmetExpectation is an expectation that can also fail as a whole, after
// every affected app was compared.
type unmetExpectation interface {
	unmet() string
}

// verifyResult is the outcome of verifying one candidate.
type verifyResult struct {
	ok   bool
	leak bool
	// unverifiable: the edit reaches an app that cannot be verified.
	unverifiable bool
	reason       string
	apps         []AppVerification
	changes      []changedObject
	warnings     []Warning
}

// changedObject is an object whose manifest differs between the renders; its
// cluster diff is only written for the edit that wins.
type changedObject struct {
	app           string
	key           objKey
	before, after *object
}

// verify renders every affected app before and after the candidate and compares
// each after-render with its expectation.
func (p *planner) verify(ctx context.Context, c *candidate, exp expectation) (*verifyResult, error) {
	after := p.before.with(c.files)
	if c.exp != nil {
		exp = c.exp
	}
	apps, warnings := p.affected(c.paths())
	res := &verifyResult{ok: true, warnings: warnings}
	var reasons, leaked []string
	for _, app := range apps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if app.Unsupported != "" && app.Name != p.primary.Name && !p.reachesAny(app, c.paths()) {
			// Argo CD refreshes it for these files (manifest-generate-paths), but
			// it reads none of them: its render cannot change.
			continue
		}
		av := AppVerification{App: app.Name}
		err := p.checkRenderable(app)
		var beforeObjs []*object
		if err == nil {
			beforeObjs, err = p.render(p.before, app)
			if err != nil && app.Name != p.primary.Name {
				err = &Refusal{Code: CodeUnverifiableApp, App: app.Name, Reason: fmt.Sprintf("application %s also reads the edited files but cannot be rendered: %s", app.Name, reasonOf(err))}
			}
		}
		var ref *Refusal
		if errors.As(err, &ref) && ref.Code == CodeUnverifiableApp {
			// This location reaches an app that cannot be verified; another
			// location may not.
			res.ok, res.unverifiable = false, true
			reasons = append(reasons, ref.Reason)
			res.apps = append(res.apps, av)
			continue
		}
		if err != nil {
			return nil, err
		}
		afterApp := app
		if a, ok := c.apps[app.Name]; ok {
			afterApp = a
		}
		afterObjs, err := p.render(after, afterApp)
		if err != nil {
			res.ok = false
			reasons = append(reasons, fmt.Sprintf("application %s does not render after the edit: %s", app.Name, reasonOf(err)))
			res.apps = append(res.apps, av)
			continue
		}
		beforeKeyed, err := keyed(app, beforeObjs)
		if err != nil {
			return nil, err
		}
		afterKeyed, err := keyed(app, afterObjs)
		if err != nil {
			res.ok = false
			reasons = append(reasons, reasonOf(err))
			res.apps = append(res.apps, av)
			continue
		}
		want, err := exp.expect(app, beforeKeyed)
		if err != nil {
			return nil, err
		}
		// Every object of either render: one added, removed or renamed (the
		// name a generator's hash gives) is compared too, so Changed never
		// exceeds it.
		av.Objects = len(unionKeys(beforeKeyed, afterKeyed))
		var lines []string
		added := map[objKey]*object{}
		for _, k := range unionKeys(want, afterKeyed) {
			w, g := want[k], afterKeyed[k]
			switch {
			case w == nil:
				added[k] = g
			case g == nil:
				lines = append(lines, fmt.Sprintf("%s: missing after the edit", k))
			default:
				why := ""
				if a, ok := exp.(aligner); ok {
					w, why = a.align(app, k, w, g)
				}
				var diffs []difference
				wb, gb := forComparison(w), forComparison(g)
				compareValues(nil, wb, gb, &diffs, maxReportedDifferences)
				if len(diffs) > 0 {
					described := describeDifferences(w, diffs)
					if why != "" {
						described = append(described, why)
					}
					lines = append(lines, k.String()+": "+strings.Join(described, ", "))
				}
			}
		}
		if len(added) > 0 {
			lines = append(lines, exp.extra(app, added)...)
		}
		for _, k := range unionKeys(beforeKeyed, afterKeyed) {
			b, a := beforeKeyed[k], afterKeyed[k]
			if b != nil && a != nil && deepEqual(b.body, a.body) {
				continue
			}
			av.Changed++
			res.changes = append(res.changes, changedObject{app: app.Name, key: k, before: b, after: a})
		}
		if len(lines) > 0 {
			res.ok = false
			if len(lines) > maxReportedDifferences {
				lines = append(lines[:maxReportedDifferences], fmt.Sprintf("and %d more", len(lines)-maxReportedDifferences))
			}
			av.Differences = lines
			if app.Name != p.primary.Name {
				res.leak = true
				leaked = append(leaked, app.Name)
				if len(leaked) <= maxDetailedLeaks {
					reasons = append(reasons, fmt.Sprintf("the edit also changes application %s: %s", app.Name, strings.Join(lines, "; ")))
				}
			} else {
				reasons = append(reasons, fmt.Sprintf("application %s does not render as expected: %s", app.Name, strings.Join(lines, "; ")))
			}
		}
		res.apps = append(res.apps, av)
	}
	if u, ok := exp.(unmetExpectation); ok && res.ok {
		if r := u.unmet(); r != "" {
			res.ok = false
			reasons = append(reasons, r)
		}
	}
	if extra := len(leaked) - maxDetailedLeaks; extra > 0 {
		names := leaked[maxDetailedLeaks:]
		if len(names) > 20 {
			names = append(names[:20:20], "...")
		}
		reasons = append(reasons, fmt.Sprintf("and %d more applications change the same way (%s)", extra, strings.Join(names, ", ")))
	}
	res.reason = strings.Join(reasons, "; ")
	return res, nil
}

// checkRenderable refuses apps render cannot build offline, or not as Argo CD
// does. It is asked only of the primary app and of the apps an edit reaches, so an
// unrelated app render cannot mirror never blocks a change.
func (p *planner) checkRenderable(app Application) error {
	if app.Unsupported != "" {
		if app.Name == p.primary.Name {
			return &Refusal{Code: CodeUnsupportedSource, App: app.Name, Reason: fmt.Sprintf("application %s cannot be verified: %s", app.Name, app.Unsupported)}
		}
		return &Refusal{Code: CodeUnverifiableApp, App: app.Name, Reason: fmt.Sprintf("application %s also reads the edited files but cannot be verified: %s", app.Name, app.Unsupported)}
	}
	if f := p.argoSourceFile(app); f != "" {
		why := fmt.Sprintf("its path holds %s, whose parameter overrides (as an image updater's Git write-back leaves them) Argo CD merges into the Application's source before it renders; render does not apply them, so its render would not be Argo CD's: move them into the Application or the app's own files", f)
		if app.Name == p.primary.Name {
			return &Refusal{Code: CodeUnsupportedSource, App: app.Name, Reason: fmt.Sprintf("application %s cannot be verified: %s", app.Name, why)}
		}
		return &Refusal{Code: CodeUnverifiableApp, App: app.Name, Reason: fmt.Sprintf("application %s also reads the edited files but cannot be verified: %s", app.Name, why)}
	}
	r := p.reach(app)
	if r.err != nil {
		var ref *Refusal
		if errors.As(r.err, &ref) {
			out := *ref
			out.App = app.Name
			if app.Name != p.primary.Name {
				out.Code = CodeUnverifiableApp
				out.Reason = fmt.Sprintf("application %s also reads the edited files but cannot be rendered: %s", app.Name, ref.Reason)
			}
			return &out
		}
		return r.err
	}
	return nil
}

// argoSourceFile is the file of app's path that Argo CD's repository server
// merges into the app's source before rendering it, if any: .argocd-source.yaml,
// then .argocd-source-<name>.yaml (<namespace>_<name> for an Application outside
// Argo CD's own namespace).
func (p *planner) argoSourceFile(app Application) string {
	root, ok := cleanRel(app.Path)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(app.Name, " (source ")
	names := []string{".argocd-source.yaml"}
	if ns, n, ok := strings.Cut(name, "/"); ok {
		names = append(names, ".argocd-source-"+n+".yaml", ".argocd-source-"+ns+"_"+n+".yaml")
	} else {
		names = append(names, ".argocd-source-"+name+".yaml")
	}
	for _, n := range names {
		f := path.Join(root, n)
		if k, err := p.before.kind(f); err == nil && k == kindFile {
			return f
		}
	}
	return ""
}

func reasonOf(err error) string {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ref.Reason
	}
	return err.Error()
}

func unionKeys(a, b map[objKey]*object) []objKey {
	seen := map[objKey]bool{}
	var out []objKey
	for k := range a {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for k := range b {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

func deepEqual(a, b map[string]any) bool {
	return equalValues(a, b)
}

// changeExpectation: the target changes as requested, everything else stays.
type changeExpectation struct {
	primary  string
	target   objKey
	expected map[string]any
	// envContainer and envAdded are, for an env change of a Helm app's
	// target, its container and the variables it adds, which take the place
	// in the container's env the chart's template gives them (see
	// alignEnvOrder); empty otherwise.
	envContainer string
	envAdded     map[string]bool
}

// align is the expected object w of key k of app in the order of the env
// list the render g gives it, where that order means the same (see
// alignEnvOrder); w otherwise, with why the order is not the same when a
// reference says so.
func (e *changeExpectation) align(app Application, k objKey, w, g *object) (*object, string) {
	if len(e.envAdded) == 0 || app.Name != e.primary || k != e.target {
		return w, ""
	}
	body, why, ok := alignEnvOrder(w.body, g.body, w.kind, e.envContainer, e.envAdded)
	if !ok {
		return w, why
	}
	cp := *w
	cp.body = body
	return &cp, ""
}

func (e *changeExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	if app.Name != e.primary {
		return before, nil
	}
	out := make(map[objKey]*object, len(before))
	for k, o := range before {
		out[k] = o
	}
	t, ok := before[e.target]
	if !ok {
		return nil, fmt.Errorf("target %s vanished from the before-render", e.target)
	}
	cp := *t
	cp.body = e.expected
	out[e.target] = &cp
	return out, nil
}

func (e *changeExpectation) extra(_ Application, added map[objKey]*object) []string {
	return unexpectedObjects(added)
}

func unexpectedObjects(added map[objKey]*object) []string {
	var lines []string
	for _, k := range unionKeys(added, nil) {
		lines = append(lines, fmt.Sprintf("%s: unexpected new object", k))
	}
	return lines
}

// tryOutcome is what trying the candidates gave.
type tryOutcome struct {
	winner       *candidate
	verified     *verifyResult
	attempts     []Attempt
	leaked       bool
	unverifiable bool
}

// tryCandidates verifies candidates in order; the first that verifies wins.
func (p *planner) tryCandidates(ctx context.Context, builders []candidateBuilder, exp expectation) (*tryOutcome, error) {
	log := zerolog.Ctx(ctx)
	out := &tryOutcome{}
	var passed []Warning // why locations before the winner were passed over
	// Builders that differ in how they reach an edit (a values key, or the
	// mapping holding it) may write the same bytes: that edit is tried once.
	tried := map[string]bool{}
	for _, b := range builders {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := b.build()
		if err == nil {
			err = p.canonicalize(c)
		}
		if err != nil {
			files := make([]string, len(b.files))
			for i, f := range b.files {
				files[i] = p.t.key(f)
			}
			var ref *Refusal
			switch {
			case errors.Is(err, errNotApplicable), errors.Is(err, yamledit.ErrNotFound), errors.Is(err, yamledit.ErrNotMapping),
				errors.Is(err, yamledit.ErrAmbiguous), errors.Is(err, yamledit.ErrUnsupported):
				out.attempts = append(out.attempts, Attempt{Strategy: b.strategy, Files: files, Reason: err.Error(), guess: b.guess})
				var d *declinedError
				if errors.As(err, &d) {
					passed = append(passed, d.w)
				}
				continue
			case errors.As(err, &ref):
				out.attempts = append(out.attempts, Attempt{Strategy: b.strategy, Files: files, Reason: ref.Reason, guess: b.guess})
				continue
			}
			return nil, fmt.Errorf("prepare edit (%s): %w", b.strategy, err)
		}
		if sig := c.signature(); tried[sig] {
			continue
		} else {
			tried[sig] = true
		}
		vr, err := p.verify(ctx, c, exp)
		if err != nil {
			return nil, err
		}
		if ev := log.Debug(); ev.Enabled() {
			// The reason may quote a tool's error; Plan scrubs what it returns, and
			// a log line leaves before that.
			reason := vr.reason
			if reason != "" {
				reason = newScrubber(p.secretValues()).text(reason)
			}
			ev.Str("strategy", c.strategy).Strs("files", c.paths()).Bool("verified", vr.ok).Str("reason", reason).Msg("Verified candidate edit")
		}
		reason := vr.reason
		if reason != "" && len(c.keys) > 0 {
			reason = "setting " + strings.Join(c.keys, ", ") + ": " + reason
		}
		out.attempts = append(out.attempts, Attempt{Strategy: c.strategy, Files: c.paths(), Verified: vr.ok, Reason: reason, guess: b.guess})
		if vr.ok {
			// Any other location verified would write the same render: the
			// change itself is refused, not this edit.
			if why := plainSecretsWritten(vr.changes); why != "" {
				return nil, &Refusal{Code: CodeSecret, App: p.primary.Name, Reason: why}
			}
			c.warnings = append(c.warnings, passed...)
			out.winner, out.verified = c, vr
			return out, nil
		}
		out.leaked = out.leaked || vr.leak
		out.unverifiable = out.unverifiable || vr.unverifiable
	}
	return out, nil
}

// signature identifies what a candidate writes: its strategy and each file's
// path and new content.
func (c *candidate) signature() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", c.strategy)
	for _, f := range slices.Sorted(maps.Keys(c.files)) {
		fmt.Fprintf(h, "%q %t %t %d\n", f, c.created[f], c.files[f] == nil, len(c.files[f]))
		h.Write(c.files[f])
	}
	return string(h.Sum(nil))
}

// canonicalize keys the candidate's files by their real paths: the edit changes the
// file itself, whichever symlink it was located through, and verification finds
// every app that reads it under any name. A new file is never written through a
// dangling symlink, and a file edited under two names is no edit.
func (p *planner) canonicalize(c *candidate) error {
	files := make(map[string][]byte, len(c.files))
	created := map[string]bool{}
	for f, b := range c.files {
		rel, ok := cleanRel(f)
		if !ok {
			return refuse(CodePathEscape, "edited path %q leaves the repository", f)
		}
		st := p.t.stat(rel)
		switch {
		case st.err != nil:
			return st.err
		case st.dangling:
			return refuse(CodeSymlinkEscape, "%s is a symlink to a missing file; an edit never writes through a symlink", rel)
		}
		if _, dup := files[st.canon]; dup {
			return refuse(CodeRenderFailed, "the edit changes %s under two names (symlinks); it cannot be applied once", st.canon)
		}
		files[st.canon] = b
		if c.created[f] {
			created[st.canon] = true
		}
	}
	c.files, c.created = files, created
	return nil
}

// candidateBuilder prepares one candidate lazily, so that a location is only edited
// when the ones before it failed.
type candidateBuilder struct {
	strategy string
	files    []string
	build    func() (*candidate, error)
	// guess marks a Helm candidate of a key the chart reads that nothing
	// sets: a refusal whose attempts are all such says no key holds the value.
	guess bool
}

// result assembles the Result of a verified candidate.
func (p *planner) result(c *candidate, vr *verifyResult, attempts []Attempt) (*Result, error) {
	res := &Result{
		App:      p.primary.Name,
		Target:   p.target,
		Strategy: c.strategy,
		Verification: Verification{
			Verified: true,
			Apps:     vr.apps,
			Attempts: attempts,
		},
	}
	namespaces := map[string]string{}
	for _, a := range p.apps {
		namespaces[a.Name] = a.Namespace
	}
	for _, c := range vr.changes {
		res.ClusterDiff = append(res.ClusterDiff, objectDiff(c.app, c.key, c.before, c.after))
		if c.after != nil {
			res.Changed = append(res.Changed, ChangedObject{App: c.app, Object: c.after.applied(namespaces[c.app])})
		}
	}
	for _, f := range c.paths() {
		e := FileEdit{Path: f, New: c.files[f], Created: c.created[f]}
		if !e.Created {
			old, err := p.t.readFile(f)
			if err != nil {
				return nil, err
			}
			e.Old = old
		}
		res.Edits = append(res.Edits, e)
	}
	res.GitDiff = gitDiff(res.Edits, p.generatorRoles(c))
	res.Warnings = append(append(append(res.Warnings, p.warnings...), c.warnings...), vr.warnings...)
	return res, nil
}

// generatorRoles finds which of the candidate's files kustomize generators read,
// judged by the kustomizations both before and after the edit, and which are
// Helm values.
func (p *planner) generatorRoles(c *candidate) map[string]sourceRole {
	roles := generatorRoles(c.paths(), func(dir string) [][]byte {
		file, err := p.t.findKustomizationFile(dir)
		if err != nil {
			return nil
		}
		var out [][]byte
		if file != "" {
			if data, err := p.t.readFile(file); err == nil {
				out = append(out, data)
			}
		}
		for f, data := range c.files {
			if path.Dir(f) == dir && slices.Contains(konfig.RecognizedKustomizationFileNames(), path.Base(f)) {
				out = append(out, data)
			}
		}
		return out
	})
	// Helm values files, as the apps and the charts name them, are masked by
	// key whatever keys they hold.
	noteValuesFiles(roles, c.paths(), appFileRoles(p.req.Apps, p.t.key), func(f string) bool {
		_, edited := c.files[f]
		return edited || p.t.stat(f).kind == kindFile
	})
	return roles
}

// refusal turns failed attempts into one refusal.
func (p *planner) refusal(code string, reason string, attempts []Attempt) *Refusal {
	return &Refusal{Code: code, App: p.primary.Name, Reason: reason, Attempts: attempts}
}

func attemptsReason(attempts []Attempt) string {
	var parts []string
	for _, a := range attempts {
		parts = append(parts, fmt.Sprintf("%s (%s): %s", a.Strategy, strings.Join(a.Files, ", "), a.Reason))
	}
	return strings.Join(parts, " | ")
}

// editFile applies ops to one document of a file and wraps editor warnings.
func (p *planner) editFile(v *view, file string, doc int, ops ...yamledit.Op) ([]byte, []Warning, error) {
	src, err := v.read(file)
	if err != nil {
		return nil, nil, err
	}
	out, ws, err := yamledit.Edit(src, doc, ops...)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, nil, refuse(CodeAliasBomb, "%s: YAML aliases expand beyond the allowed bound", file)
		}
		return nil, nil, fmt.Errorf("edit %s: %w", file, err)
	}
	return out, restructuredWarnings(file+":", ws), nil
}

// restructuredWarnings are the editor's warnings about lines whose layout
// changed, each placed at at followed by its line number.
func restructuredWarnings(at string, ws []yamledit.Warning) []Warning {
	var out []Warning
	for _, w := range ws {
		out = append(out, Warning{
			Code:        "restructured",
			Where:       at + strconv.Itoa(w.Line),
			Message:     w.Message,
			Alternative: "review the changed lines; the values are verified, the layout changed",
		})
	}
	return out
}

// render renders app from v. Only the primary app's before-render carries origins:
// locating reads them, and every other render is faster without. The caller's
// BeforeRender, when set, supplies every before-render (with origins).
func (p *planner) render(v *view, app Application) ([]*object, error) {
	if v == p.before && p.req.BeforeRender != nil {
		return p.r.load(renderKey{view: v, source: sourceKey(app), origin: true}, func() ([]*object, error) {
			objs, err := p.req.BeforeRender(p.ctx, app)
			if err != nil {
				return nil, err
			}
			return importObjects(app, objs)
		})
	}
	return p.r.render(v, app, v == p.before && app.Name == p.primary.Name)
}
