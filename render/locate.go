package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

// Strategies, in the order they are tried.
const (
	strategyReplicasEntry    = "replicas entry"
	strategyImagesEntry      = "images entry"
	strategyExistingPatch    = "existing patch"
	strategyInlinePatch      = "existing inline patch"
	strategyNewReplicasEntry = "new replicas entry"
	strategyNewImagesEntry   = "new images entry"
	strategyInPlace          = "in place"
	strategyNewPatch         = "new patch"
	strategyNewJSONPatch     = "new JSON 6902 patch"
	strategyNewFile          = "new file"
)

func (p *planner) planChange(ctx context.Context) (*Result, error) {
	target, objs, err := p.renderTarget()
	if err != nil {
		return nil, err
	}
	// The primary is the source rendering the target (see renderTarget).
	app := p.primary
	expected, err := expectedAfter(target, p.req.Change)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	if p.req.Change.Env != nil {
		if ref := p.secretEnvRefusal(target, objs); ref != nil {
			return nil, ref
		}
	}
	if p.req.Change.Env != nil && app.SourceType == SourceKustomize {
		if res, ok, err := p.planEnvThroughGenerator(ctx, target, objs); ok || err != nil {
			return res, err
		}
	}
	if deepEqual(target.body, expected) {
		if p.req.Change.Env != nil {
			if ref := p.envFromUnsetRefusal(target, objs); ref != nil {
				return nil, ref
			}
		}
		return nil, &Refusal{Code: CodeNoChange, App: app.Name, Reason: fmt.Sprintf("%s already renders that way (%s): there is nothing to change", p.req.Target, p.req.Change.describe())}
	}
	if target.generatedBy != "" {
		doc, err := p.req.Change.Patch.document()
		if err != nil {
			return nil, err
		}
		data, _ := doc["data"].(map[string]any)
		return p.planGenerated(ctx, target, expected, data)
	}
	exp := &changeExpectation{primary: app.Name, target: target.key(app.Namespace), expected: expected}
	if e := p.req.Change.Env; e != nil && app.SourceType == SourceHelm {
		exp.envContainer, exp.envAdded = e.Container, addedEnv(target, e)
	}

	var builders []candidateBuilder
	switch app.SourceType {
	case SourceDirectory:
		builders = p.directoryBuilders(target, expected)
	case SourceKustomize:
		builders, err = p.kustomizeBuilders(target, expected)
		if err != nil {
			return nil, err
		}
	case SourceHelm:
		builders, err = p.helmBuilders(target, expected)
		if err != nil {
			return nil, err
		}
	}
	out, err := p.tryCandidates(ctx, builders, exp)
	if err != nil {
		return nil, err
	}
	if out.winner == nil {
		if app.SourceType == SourceHelm {
			if where := helmOverride(app, target.body, expected); where != "" {
				return p.planAppManifest(ctx, target, exp, where, out)
			}
		}
		if ref := p.replacementRefusal(p.replacedFields(target, expected), out); ref != nil {
			return nil, ref
		}
		return nil, p.noVerifiedEdit(target, out)
	}
	return p.result(out.winner, out.verified, out.attempts)
}

// renderTarget renders the primary app and finds the target in it, refusing a
// target render must not change; it returns the render too.
func (p *planner) renderTarget() (*object, []*object, error) {
	app := p.primary
	if err := p.checkRenderable(app); err != nil {
		return nil, nil, err
	}
	objs, err := p.render(p.before, app)
	if err != nil {
		return nil, nil, withApp(err, app.Name)
	}
	target, err := p.findTarget(app, objs)
	var ref *Refusal
	if errors.As(err, &ref) && ref.Code == CodeTargetNotFound {
		if src, srcTarget, srcObjs, srcErr := p.sourceRenderingTarget(); src != nil {
			app, target, objs, err = *src, srcTarget, srcObjs, srcErr
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if err := p.checkTarget(app, target); err != nil {
		return nil, nil, err
	}
	k := target.key(app.Namespace)
	p.target = &objref.Target{APIVersion: target.apiVersion, Kind: target.kind, Namespace: k.Namespace, Name: target.name}
	return target, objs, nil
}

// sourceRenderingTarget finds, when the request names a multi-source
// Application by its name alone (as the service does, from the target's
// tracking id) and its first source renders no such object, the later source
// that renders the target, and makes it the primary app: Argo CD renders each
// source on its own, so the target's edit belongs to the one whose render
// holds it (err says why it cannot be edited there, as findTarget does: it
// renders it twice). It returns nil, and leaves the primary as it was, when
// none does or the request named a source.
func (p *planner) sourceRenderingTarget() (src *Application, target *object, objs []*object, err error) {
	first := p.primary
	if strings.Contains(first.Name, " (source ") {
		return nil, nil, nil, nil
	}
	asked := p.req.Target
	for _, a := range p.apps {
		if !strings.HasPrefix(a.Name, first.Name+" (source ") || p.checkRenderable(a) != nil {
			continue
		}
		// The primary's before-render carries the origins locating reads.
		p.primary = a
		objs, err := p.render(p.before, a)
		if err == nil {
			target, err := p.findTarget(a, objs)
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != CodeTargetNotFound {
				return &p.primary, target, objs, err
			}
		}
		p.primary, p.req.Target = first, asked
	}
	return nil, nil, nil, nil
}

func withApp(err error, app string) error {
	var ref *Refusal
	if errors.As(err, &ref) && ref.App == "" {
		cp := *ref
		cp.App = app
		return &cp
	}
	return err
}

func (p *planner) noVerifiedEdit(target *object, out *tryOutcome) *Refusal {
	code := outcomeCode(out)
	if r := p.reach(p.primary); r.kust != nil && target.origin != "" && inComponent(r.kust, target.origin) {
		code = CodeComponent
	}
	reason := fmt.Sprintf("no edit location for %s verifies: %s", p.req.Target, attemptsReason(out.attempts))
	switch {
	case len(out.attempts) == 0:
		reason = fmt.Sprintf("no place in the repository can express %s for %s", p.req.Change.describe(), p.req.Target)
		if p.primary.SourceType == SourceHelm {
			reason = p.noValuesKeyReason(target)
		}
	case p.primary.SourceType == SourceHelm && allGuesses(out.attempts):
		// Only keys the chart reads that nothing sets were tried: that no key
		// holds the value says more than how each guess rendered.
		reason = p.noValuesKeyReason(target) + fmt.Sprintf("; nor does a new key of those its templates read that no values file sets (%d tried, listed)", len(out.attempts))
	}
	if note := p.subchartNullNote(); note != "" && len(out.attempts) > 0 {
		// What to do first; the renders of the attempts after it.
		reason = fmt.Sprintf("no edit location for %s verifies: %s; tried: %s", p.req.Target, note, attemptsReason(out.attempts))
	}
	if note := p.helmDigestNote(target); note != "" {
		reason += "; " + note
	}
	if code == CodeComponent {
		reason = fmt.Sprintf("%s comes from component %s, which the edit cannot change without changing every app that uses it; %s", p.req.Target, path.Dir(target.origin), reason)
	}
	return p.refusal(code, reason, out.attempts)
}

// allGuesses reports whether every attempt set a key the chart reads that
// nothing sets.
func allGuesses(attempts []Attempt) bool {
	for _, a := range attempts {
		if !a.guess {
			return false
		}
	}
	return len(attempts) > 0
}

// outcomeCode is the refusal code when no candidate verified: a leak into another
// app says most, then an app the edit reaches that cannot be verified.
func outcomeCode(out *tryOutcome) string {
	switch {
	case out.leaked:
		return CodeLeak
	case out.unverifiable:
		return CodeUnverifiableApp
	}
	return CodeVerificationFailed
}

// renderedKind is the kind of t as the render spells it: a kind given in another
// case, as kubectl takes it ("certificate" for cert-manager's Certificate, with
// --api-version), names the one kind of its group the render holds in that spelling
// when none is spelled as given.
func renderedKind(t objref.Target, objs []*object) string {
	group := groupOf(t.APIVersion)
	spelled := ""
	for _, o := range objs {
		if groupOf(o.apiVersion) != group || !strings.EqualFold(o.kind, t.Kind) {
			continue
		}
		if o.kind == t.Kind {
			return t.Kind
		}
		if spelled != "" && spelled != o.kind {
			return t.Kind
		}
		spelled = o.kind
	}
	if spelled == "" {
		return t.Kind
	}
	return spelled
}

// hashNamed is the one generated object of objs that kustomize names want's name
// and a hash suffix of its content ("-" and ten characters), if there is one: in
// want's namespace, or in any when anyNamespace (neither the request nor the app
// names one), as a target named in full is found.
func hashNamed(want objKey, objs []*object, appNamespace string, anyNamespace bool) *object {
	var found *object
	for _, o := range objs {
		k := o.key(appNamespace)
		if o.generatedBy == "" || k.Group != want.Group || k.Kind != want.Kind || (k.Namespace != want.Namespace && !anyNamespace) {
			continue
		}
		if len(k.Name) != len(want.Name)+11 || !strings.HasPrefix(k.Name, want.Name+"-") {
			continue
		}
		if found != nil {
			return nil
		}
		found = o
	}
	return found
}

func inComponent(r *kustReach, file string) bool {
	for d := range r.componentDirs {
		if strings.HasPrefix(file, d+"/") {
			return true
		}
	}
	return false
}

// findTarget picks the one rendered object the request names.
func (p *planner) findTarget(app Application, objs []*object) (*object, error) {
	p.req.Target.Kind = renderedKind(p.req.Target, objs)
	t := p.req.Target
	want := objKey{Group: groupOf(t.APIVersion), Kind: t.Kind, Namespace: effectiveNamespace(t.APIVersion, t.Kind, t.Namespace, app.Namespace), Name: t.Name}
	var matches, sameKind []*object
	anyNamespace := t.Namespace == "" && app.Namespace == ""
	for _, o := range objs {
		k := o.key(app.Namespace)
		if k == want || (anyNamespace && k.Group == want.Group && k.Kind == want.Kind && k.Name == want.Name) {
			matches = append(matches, o)
		} else if o.kind == t.Kind {
			sameKind = append(sameKind, o)
		}
	}
	where := func(o *object) string {
		k := o.key(app.Namespace).String()
		switch {
		case o.file != "":
			return k + " in " + describeDoc(o.file, o.doc)
		case o.origin != "":
			return k + " from " + o.origin
		}
		return k
	}
	if len(matches) == 0 {
		if o := hashNamed(want, sameKind, app.Namespace, anyNamespace); o != nil {
			// The generator's name, which the user knows and the hash of its
			// content changes with every edit.
			p.req.Target.Name = o.name
			return o, nil
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		var found []string
		for i, o := range sameKind {
			if i == 10 {
				found = append(found, fmt.Sprintf("and %d more", len(sameKind)-10))
				break
			}
			found = append(found, where(o))
		}
		msg := fmt.Sprintf("application %s (%s, path %s) renders no %s", app.Name, app.SourceType, app.Path, want)
		if len(found) > 0 {
			msg += "; it renders " + strings.Join(found, ", ")
		} else {
			msg += fmt.Sprintf("; it renders no %s at all", t.Kind)
		}
		if held := p.unreadHolders(app, want); len(held) > 0 {
			msg += "; " + strings.Join(held, "; ")
		}
		return nil, &Refusal{Code: CodeTargetNotFound, App: app.Name, Reason: msg}
	default:
		var found []string
		for _, o := range matches {
			found = append(found, where(o))
		}
		return nil, &Refusal{Code: CodeTargetAmbiguous, App: app.Name, Reason: fmt.Sprintf("application %s renders %s %d times: %s", app.Name, want, len(matches), strings.Join(found, "; "))}
	}
}

// checkTarget refuses targets render must not edit.
func (p *planner) checkTarget(app Application, o *object) error {
	name := p.req.Target.String()
	switch {
	case o.kind == "Secret" && groupOf(o.apiVersion) == "":
		return &Refusal{Code: CodeSecret, App: app.Name, Reason: fmt.Sprintf("%s is a Secret; Secrets are never edited (manage them with your secret store)", name)}
	case o.remote:
		return &Refusal{Code: CodeRemoteBase, App: app.Name, Reason: fmt.Sprintf("%s comes from a remote base; remote bases are not supported", name)}
	case o.generatedBy != "":
		if generatedDataPatch(o, p.req.Change) {
			// planGenerated edits the generator's inputs, or refuses as below.
			return nil
		}
		if p.req.Change.Patch != nil {
			// A data value that is no string ("/data/FLAG=true" read as JSON)
			// is a mistake in the request, and its refusal spells the string
			// to give; saying that only data keys change would mislead.
			if err := checkPatchLists(o, p.req.Change.Patch); err != nil {
				return withApp(err, app.Name)
			}
		}
		return p.generatedRefusal(app, o, "")
	}
	c := p.req.Change
	if app.SourceType == SourceKustomize {
		if c.Replicas != nil || c.Patch.sets("spec", "replicas") {
			// Kustomize matches a replicas entry against every name the
			// object had, those before a namePrefix or nameSuffix too.
			names := []string{o.name}
			if r := p.reach(app).kust; r != nil && len(app.Kustomize.Replicas) > 0 {
				names = append(names, layerNames(o.name, app.Kustomize, r.nodes)...)
			}
			for _, name := range names {
				if _, ok := app.Kustomize.Replicas[name]; !ok {
					continue
				}
				if name != o.name {
					name = fmt.Sprintf("%s (the name of %s before a name prefix or suffix)", name, o.name)
				}
				return &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf("Application %s sets %s.kustomize.replicas for %s; a Git edit would be overridden, change the Application instead", app.Name, sourceSettings(app), name)}
			}
		}
		if c.Image != nil {
			if ct, ok := findContainer(o.body, o.kind, c.Image.Container); ok {
				img, _ := ct.body["image"].(string)
				for _, arg := range app.Kustomize.Images {
					entry, err := parseImageArg(envsubst(arg, app.Kustomize.Env))
					if err != nil {
						continue
					}
					if (entry["name"] == parseImageRef(img).name || entry["newName"] == parseImageRef(img).name) && overridesVersion(entry) {
						return &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf("Application %s overrides image %s in %s.kustomize.images; a Git edit would be overridden, change the Application instead", app.Name, parseImageRef(img).name, sourceSettings(app))}
					}
				}
			}
		}
		if field, key, ok := metadataOverride(app.Kustomize, c.Patch); ok {
			return &Refusal{Code: CodeAppOverride, App: app.Name, Reason: fmt.Sprintf("Application %s sets %s %q in %s.kustomize.%s, which Argo CD applies over the repository when it renders; a Git edit would be overridden, change the Application instead", app.Name, strings.TrimSuffix(field, "s"), key, sourceSettings(app), metadataOption[field])}
		}
		if err := p.transformerOverride(app, o); err != nil {
			return err
		}
	}
	return nil
}

// overridesVersion reports whether an image override (parseImageArg) sets the
// image's tag or digest: "kustomize edit set image" replaces the images entry
// whole, so a tag or digest it does not set ("name=newName", or "*", which
// keeps the entry's) comes from the repository, and a Git edit of it stays.
func overridesVersion(entry map[string]any) bool {
	for _, k := range []string{"newTag", "digest"} {
		if v, ok := entry[k]; ok && v != "*" {
			return true
		}
	}
	return false
}

// metadataOption is the spec.source.kustomize option that sets each metadata map.
var metadataOption = map[string]string{"labels": "commonLabels", "annotations": "commonAnnotations"}

// metadataOverride finds a label or annotation a patch sets that the
// Application's commonLabels or commonAnnotations set too: on the object, and
// on its pod template where kustomize adds them there (annotations always,
// labels unless they leave selectors alone without including templates).
func metadataOverride(o KustomizeOptions, p *Patch) (field, key string, ok bool) {
	if p == nil {
		return "", "", false
	}
	for _, field := range []string{"labels", "annotations"} {
		set, templates := o.CommonLabels, !o.LabelWithoutSelector || o.LabelIncludeTemplates
		if field == "annotations" {
			set, templates = o.CommonAnnotations, true
		}
		for _, key := range slices.Sorted(maps.Keys(set)) {
			if p.sets("metadata", field, key) || (templates && p.sets("spec", "template", "metadata", field, key)) {
				return field, key, true
			}
		}
	}
	return "", "", false
}

func (p *planner) directoryBuilders(target *object, expected map[string]any) []candidateBuilder {
	return []candidateBuilder{{
		strategy: strategyInPlace,
		files:    []string{target.file},
		build: func() (*candidate, error) {
			ops, err := changeOps(target.body, target.kind, p.req.Change, inPlace, target.body, expected)
			if err != nil {
				return nil, err
			}
			if target.item >= 0 {
				// The object is an item of a List document: its fields are under
				// items[item] of that document.
				for i := range ops {
					ops[i].Path = append(yamledit.Path{yamledit.K("items"), yamledit.I(target.item)}, ops[i].Path...)
				}
			}
			return p.editCandidate(strategyInPlace, target.file, target.doc, ops)
		},
	}}
}

func (p *planner) editCandidate(strategy, file string, doc int, ops []yamledit.Op) (*candidate, error) {
	out, ws, err := p.editFile(p.before, file, doc, ops...)
	if err != nil {
		return nil, err
	}
	return &candidate{strategy: strategy, files: map[string][]byte{file: out}, warnings: ws}, nil
}

// sourceDoc is the document a kustomize object was read from.
type sourceDoc struct {
	file      string
	index     int
	obj       map[string]any
	name      string
	namespace string
}

// findSourceDoc finds the document of the object's origin file that produced it:
// same kind and group, and the name that the render's prefixes and suffixes extend.
func (p *planner) findSourceDoc(o *object) (*sourceDoc, error) {
	if o.origin == "" {
		return nil, nil
	}
	data, err := p.t.readFile(o.origin)
	if err != nil {
		return nil, err
	}
	docs, err := yamledit.Documents(data)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, refuse(CodeAliasBomb, "%s: YAML aliases expand beyond the allowed bound", o.origin)
		}
		return nil, refuse(CodeRenderFailed, "parse %s: %v", o.origin, err)
	}
	var best *sourceDoc
	ambiguous := false
	for _, d := range docs {
		if d.Empty {
			continue
		}
		so, ok := newObject(d.Object)
		if !ok || so.kind != o.kind || groupOf(so.apiVersion) != groupOf(o.apiVersion) || !strings.Contains(o.name, so.name) {
			continue
		}
		c := &sourceDoc{file: o.origin, index: d.Index, obj: so.body, name: so.name, namespace: so.namespace}
		switch {
		case best == nil || len(so.name) > len(best.name):
			best, ambiguous = c, false
		case len(so.name) == len(best.name):
			ambiguous = true
		}
	}
	if ambiguous {
		return nil, refuse(CodeTargetAmbiguous, "%s holds several %s documents that could render as %s", o.origin, o.kind, o.name)
	}
	return best, nil
}

// patchRef is one patch a kustomization lists: a patch file, or a patch written
// inline in the kustomization (then inline holds its text and at the path of that
// text in the kustomization file).
type patchRef struct {
	file   string
	target *types.Selector
	json   bool
	inline string
	at     yamledit.Path
}

func patchRefs(n *kustNode) []patchRef {
	var out []patchRef
	add := func(ref string, sel *types.Selector, json bool) {
		if f, err := joinRel(n.dir, ref); err == nil {
			out = append(out, patchRef{file: f, target: sel, json: json})
		}
	}
	addInline := func(text string, sel *types.Selector, json bool, at ...yamledit.Step) {
		out = append(out, patchRef{target: sel, json: json, inline: text, at: at})
	}
	for i, pt := range n.k.Patches {
		switch {
		case pt.Path != "":
			add(pt.Path, pt.Target, false)
		case pt.Patch != "":
			addInline(pt.Patch, pt.Target, false, yamledit.K("patches"), yamledit.I(i), yamledit.K("patch"))
		}
	}
	for i, s := range n.k.PatchesStrategicMerge {
		if isInline(string(s)) {
			addInline(string(s), nil, false, yamledit.K("patchesStrategicMerge"), yamledit.I(i))
		} else {
			add(string(s), nil, false)
		}
	}
	for i, pt := range n.k.PatchesJson6902 {
		switch {
		case pt.Path != "":
			add(pt.Path, pt.Target, true)
		case pt.Patch != "":
			addInline(pt.Patch, pt.Target, true, yamledit.K("patchesJson6902"), yamledit.I(i), yamledit.K("patch"))
		}
	}
	return out
}

// location is the file an edit of the patch changes.
func (r patchRef) location(root *kustNode) string {
	if r.inline != "" {
		return root.file
	}
	return r.file
}

// strategy names the location a patch edit goes to.
func (r patchRef) strategy() string {
	if r.inline != "" {
		return strategyInlinePatch
	}
	return strategyExistingPatch
}

// text returns the patch's content: the inline text, or the patch file.
func (p *planner) patchText(r patchRef) ([]byte, error) {
	if r.inline != "" {
		return []byte(r.inline), nil
	}
	return p.t.readFile(r.file)
}

// editPatch applies ops to document doc of a patch. A patch file is edited in
// place; an inline patch is edited as text and written back into its block in the
// kustomization, so only the changed lines of the block differ.
func (p *planner) editPatch(root *kustNode, r patchRef, doc int, ops []yamledit.Op) (*candidate, error) {
	if r.inline == "" {
		return p.editCandidate(strategyExistingPatch, r.file, doc, ops)
	}
	where := fmt.Sprintf("%s (inline patch at %s)", root.file, r.at)
	text, inner, err := yamledit.Edit([]byte(r.inline), doc, ops...)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, refuse(CodeAliasBomb, "%s: YAML aliases expand beyond the allowed bound", where)
		}
		return nil, fmt.Errorf("edit %s: %w", where, err)
	}
	old, err := p.before.read(root.file)
	if err != nil {
		return nil, err
	}
	kust, outer, err := p.editFile(p.before, root.file, 0, yamledit.Set(r.at, string(text)))
	if err != nil {
		return nil, err
	}
	warnings := restructuredWarnings(where+" line ", inner)
	// The editor warns whenever it rewrites a block scalar; the block kept its shape
	// when the file changed in exactly the lines the patch text changed in.
	if !sameChangedLines(string(old), string(kust), r.inline, string(text)) {
		warnings = append(warnings, outer...)
	}
	return &candidate{strategy: strategyInlinePatch, files: map[string][]byte{root.file: kust}, warnings: warnings}, nil
}

// sameChangedLines reports whether a file changed from before to after in as
// many lines as a block of it changed from old to text: then the file changed in
// the block's lines alone, which kept their shape. The counts are those of a
// shortest line diff, which lines the two sides share around the block do not
// change; difflib's matcher is no shortest diff, and the same dropped list item
// came out as more changed lines of the block's text than of the file when it
// repeated the lines of its neighbours.
func sameChangedLines(before, after, old, text string) bool {
	inner, _ := changedLines(difflib.SplitLines(old), difflib.SplitLines(text), -1)
	outer, ok := changedLines(difflib.SplitLines(before), difflib.SplitLines(after), inner)
	return ok && outer == inner
}

// changedLines counts the lines a shortest line diff of a and b removes or adds
// (Myers' O(ND) algorithm); ok is false when that is more than most (a most
// below 0 bounds nothing), which bounds the work at the lines around the count.
// Written here because the counts need a shortest diff: difflib's matcher is not
// one, and sergi/go-diff's line diff is time-bounded and heuristic (its
// half-match), so neither gives an exact minimal count.
func changedLines(a, b []string, most int) (n int, ok bool) {
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if most < 0 || most > len(a)+len(b) {
		most = len(a) + len(b)
	}
	// far[off+k] is the furthest x reached on diagonal k (x-y) with d edits.
	off := most + 1
	far := make([]int, 2*most+3)
	for d := 0; d <= most; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && far[off+k-1] < far[off+k+1]) {
				x = far[off+k+1] // a line of b added
			} else {
				x = far[off+k-1] + 1 // a line of a removed
			}
			y := x - k
			for x < len(a) && y < len(b) && a[x] == b[y] {
				x, y = x+1, y+1
			}
			far[off+k] = x
			if x >= len(a) && y >= len(b) {
				return d, true
			}
		}
	}
	return 0, false
}

// selectorMatches reports whether a patch target selects the object (by its source
// or rendered name, or a name it has between the two: see layerNames). Label and
// annotation selectors are left to verification.
//
// kustomize reads every field of a target as a regular expression matched
// whole (kind: Deployment|StatefulSet, name: web-.*), its group and kind
// too.
func selectorMatches(sel *types.Selector, o *object, src *sourceDoc, layers []string) bool {
	if sel == nil {
		return false
	}
	names := append([]string{o.name}, layers...)
	namespaces := []string{o.namespace}
	if src != nil {
		names = append(names, src.name)
		namespaces = append(namespaces, src.namespace)
	}
	anchored := func(pattern string, values []string) bool {
		if pattern == "" {
			return true
		}
		re, err := selectorPattern(pattern)
		if err != nil {
			return false
		}
		for _, v := range values {
			if re.MatchString(v) {
				return true
			}
		}
		return false
	}
	return anchored(sel.Kind, []string{o.kind}) && anchored(sel.Group, []string{groupOf(o.apiVersion)}) &&
		anchored(sel.Name, names) && anchored(sel.Namespace, namespaces)
}

// selectorPattern compiles a field of a kustomize patch target as kustomize
// reads it: a regular expression matched whole.
func selectorPattern(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + pattern + ")$")
}

func (p *planner) kustomizeBuilders(target *object, expected map[string]any) ([]candidateBuilder, error) {
	reach := p.reach(p.primary).kust
	root := reach.nodes[0]
	src, err := p.findSourceDoc(target)
	if err != nil {
		return nil, withApp(err, p.primary.Name)
	}
	sourceName := target.name
	if src != nil {
		sourceName = src.name
	}
	c := p.req.Change
	var builders []candidateBuilder
	kustEdit := func(strategy string, ops ...yamledit.Op) candidateBuilder {
		return candidateBuilder{strategy: strategy, files: []string{root.file}, build: func() (*candidate, error) {
			return p.editCandidate(strategy, root.file, 0, ops)
		}}
	}

	// (1) The overlay already sets the field: its replicas or images entry, then a
	// patch that sets it (a new transformer entry would leave that patch's value
	// dead, since kustomize runs the transformers after the patches).
	// (0) A replacement of the app's kustomizations writes the field: its
	// source's value is the field's.
	builders = append(builders, p.replacementSourceBuilders(p.replacedFields(target, expected))...)
	var entries []candidateBuilder
	layers := layerNames(target.name, p.primary.Kustomize, reach.nodes)
	if c.Replicas != nil {
		entries = append(entries, replicasEntryBuilders(root, []string{sourceName, target.name}, layers, c.Replicas.Count, kustEdit)...)
	}
	if c.Image != nil {
		entries = append(entries, p.imagesEntryBuilders(root, target, src, kustEdit)...)
	}
	builders = append(builders, entries...)
	setting, others := p.patchBuilders(root, true, target, src, layers, expected)
	builders = append(builders, setting...)
	// (5, tried last) A replicas or images entry, or a patch, of a base or
	// component the build includes that sets the field. It comes after every
	// edit of the overlay's own folder: a base is there to be shared, by the
	// overlays of other environments too, which are often deployed by another
	// cluster's Argo CD and so not rendered by this plan. The overlay's entry or
	// patch wins over it (kustomize builds the base first), as a person
	// changing one environment writes it. Verification drops the edit of one
	// another app of the plan reads too.
	var included []candidateBuilder
	for _, n := range reach.nodes[1:] {
		nodeEdit := func(strategy string, ops ...yamledit.Op) candidateBuilder {
			return candidateBuilder{strategy: strategy, files: []string{n.file}, build: func() (*candidate, error) {
				return p.editCandidate(strategy, n.file, 0, ops)
			}}
		}
		if c.Replicas != nil {
			included = append(included, replicasEntryBuilders(n, []string{sourceName, target.name}, layers, c.Replicas.Count, nodeEdit)...)
		}
		if c.Image != nil {
			included = append(included, p.imagesEntryBuilders(n, target, src, nodeEdit)...)
		}
		setting, _ := p.patchBuilders(n, false, target, src, layers, expected)
		included = append(included, setting...)
	}

	// (2) The resource's document lives in the overlay's own folder: editing it
	// leaves no value that a later layer overrides.
	if src != nil && inOverlayFolder(reach, p.t.key(src.file)) {
		builders = append(builders, candidateBuilder{strategy: strategyInPlace, files: []string{src.file}, build: func() (*candidate, error) {
			ops, err := changeOps(src.obj, target.kind, c, inPlace, target.body, expected)
			if err != nil {
				return nil, err
			}
			return p.editCandidate(strategyInPlace, src.file, src.index, ops)
		}})
	}

	// (3) A new replicas or images entry, when the overlay has none for the target:
	// the transformer applies to every object of the kustomization with that name
	// or image, so verification keeps it only when nothing else changes.
	if len(entries) == 0 {
		builders = append(builders, p.newEntryBuilders(target, sourceName, kustEdit)...)
	}
	builders = append(builders, others...)

	// (4) A new patch in the overlay with an explicit target: strategic merge, and
	// for env a JSON 6902 patch after it, since a strategic-merge patch puts the
	// entries it names first while existing entries keep their place and new ones go
	// last (env order decides what $(VAR) references see).
	if c.Patch != nil {
		// A merge patch replaces lists whole, which a strategic-merge patch does
		// not (it merges lists with a merge key): the JSON 6902 patch says exactly
		// what the merge patch does.
		builders = append(builders, p.newPatchBuilder(root, target, src, sourceName, strategyNewJSONPatch, func() ([]byte, error) {
			return mergeJSONPatch(target.body, c.Patch)
		}))
		return append(builders, included...), nil
	}
	builders = append(builders, p.newPatchBuilder(root, target, src, sourceName, strategyNewPatch, func() ([]byte, error) {
		return strategicMergePatch(target.apiVersion, target.kind, sourceName, c, target.body, expected)
	}))
	if c.Env != nil {
		if ct, ok := findContainer(target.body, target.kind, c.Env.Container); ok && len(envList(ct.body)) > 0 {
			builders = append(builders, p.newPatchBuilder(root, target, src, sourceName, strategyNewJSONPatch, func() ([]byte, error) {
				return envJSONPatch(target.kind, ct, c.Env)
			}))
		}
	}
	return append(builders, included...), nil
}

// replicasEntryBuilders sets the count of each replicas entry of n that names
// the target: by one of names (its source's or its rendered name) or by the
// name a layer of the build gives it.
func replicasEntryBuilders(n *kustNode, names, layers []string, count int64, edit func(string, ...yamledit.Op) candidateBuilder) []candidateBuilder {
	var out []candidateBuilder
	for _, r := range n.k.Replicas {
		if slices.Contains(names, r.Name) || slices.Contains(layers, r.Name) {
			out = append(out, edit(strategyReplicasEntry, replicasCountOp(r.Name, count)))
		}
	}
	return out
}

func (p *planner) imagesEntryBuilders(root *kustNode, target *object, src *sourceDoc, kustEdit func(string, ...yamledit.Op) candidateBuilder) []candidateBuilder {
	c := p.req.Change.Image
	rct, ok := findContainer(target.body, target.kind, c.Container)
	if !ok {
		return nil
	}
	img, _ := rct.body["image"].(string)
	renderedName := parseImageRef(img).name
	var sourceName string
	if src != nil {
		if sct, ok := findContainer(src.obj, target.kind, c.Container); ok {
			s, _ := sct.body["image"].(string)
			sourceName = parseImageRef(s).name
		}
	}
	var out []candidateBuilder
	for _, e := range root.k.Images {
		final := e.Name
		if e.NewName != "" {
			final = e.NewName
		}
		if final != renderedName && (sourceName == "" || e.Name != sourceName) {
			continue
		}
		entry := yamledit.Path{yamledit.K("images"), yamledit.M("name", e.Name)}
		var ops []yamledit.Op
		if c.Digest != "" {
			ops = append(ops, yamledit.Op{Path: joinPath(entry, keys("digest")), Kind: yamledit.OpSet, Value: scalar(c.Digest)})
			if e.NewTag != "" {
				ops = append(ops, yamledit.Op{Path: joinPath(entry, keys("newTag")), Kind: yamledit.OpDelete})
			}
		} else {
			ops = append(ops, yamledit.Op{Path: joinPath(entry, keys("newTag")), Kind: yamledit.OpSet, Value: scalar(c.Tag)})
			if e.Digest != "" {
				ops = append(ops, yamledit.Op{Path: joinPath(entry, keys("digest")), Kind: yamledit.OpDelete})
			}
		}
		out = append(out, kustEdit(strategyImagesEntry, ops...))
	}
	return out
}

func replicasCountOp(name string, count int64) yamledit.Op {
	return yamledit.Op{Path: yamledit.Path{yamledit.K("replicas"), yamledit.M("name", name), yamledit.K("count")}, Kind: yamledit.OpSet, Value: count}
}

// newEntryBuilders add a replicas or images entry for the target to the overlay's
// kustomization (creating the list when there is none), as kustomize edit set
// replicas / set image would: replicas by the name the object has where the
// overlay's transformers see it (its source name, else its rendered name), images
// by the name the container's image has there, with newTag or digest.
func (p *planner) newEntryBuilders(target *object, sourceName string, kustEdit func(string, ...yamledit.Op) candidateBuilder) []candidateBuilder {
	c := p.req.Change
	switch {
	case c.Replicas != nil:
		out := []candidateBuilder{kustEdit(strategyNewReplicasEntry, replicasCountOp(sourceName, c.Replicas.Count))}
		if target.name != sourceName {
			out = append(out, kustEdit(strategyNewReplicasEntry, replicasCountOp(target.name, c.Replicas.Count)))
		}
		return out
	case c.Image != nil:
		rct, ok := findContainer(target.body, target.kind, c.Image.Container)
		if !ok {
			return nil
		}
		img, _ := rct.body["image"].(string)
		name := parseImageRef(img).name
		if name == "" {
			return nil
		}
		field, value := "newTag", c.Image.Tag
		if c.Image.Digest != "" {
			field, value = "digest", c.Image.Digest
		}
		return []candidateBuilder{kustEdit(strategyNewImagesEntry, yamledit.Op{
			Path: yamledit.Path{yamledit.K("images"), yamledit.M("name", name), yamledit.K(field)}, Kind: yamledit.OpSet, Value: scalar(value),
		})}
	}
	return nil
}

// layerNames are the names an object may have where the kustomizations of a
// build see it, between its source document's and its rendered one: the rendered
// name without the Application's namePrefix and nameSuffix, then without those of
// each kustomization in turn, the app's own first. An overlay's patch sees a base's
// object named by the base's namePrefix (shop-web), not yet by its own (eu-shop-web).
// Names it never has only cost a candidate verification drops.
func layerNames(name string, o KustomizeOptions, nodes []*kustNode) []string {
	var out []string
	strip := func(prefix, suffix string) {
		n := name
		if prefix != "" && strings.HasPrefix(n, prefix) {
			n = strings.TrimPrefix(n, prefix)
		}
		if suffix != "" && strings.HasSuffix(n, suffix) {
			n = strings.TrimSuffix(n, suffix)
		}
		if n != name && n != "" {
			name = n
			out = append(out, n)
		}
	}
	strip(o.NamePrefix, o.NameSuffix)
	for _, n := range nodes {
		strip(n.k.NamePrefix, n.k.NameSuffix)
	}
	return out
}

// patchBuilders offers the existing patches of the target a kustomization lists:
// first those that already set the field, then the others. Of a kustomization
// other than the app's own (own false), only edits of the field's value are
// offered, never new operations appended to its patch.
func (p *planner) patchBuilders(root *kustNode, own bool, target *object, src *sourceDoc, layers []string, expected map[string]any) (setting, others []candidateBuilder) {
	type scored struct {
		b     candidateBuilder
		score int
	}
	var found []scored
	sourceName := target.name
	if src != nil {
		sourceName = src.name
	}
	for _, ref := range patchRefs(root) {
		data, err := p.patchText(ref)
		if err != nil {
			continue
		}
		if ref.json || looksLikeJSONPatch(data) {
			if ref.target != nil && selectorMatches(ref.target, target, src, layers) && (own || p.req.Change.Env == nil) {
				if b, ok := p.jsonPatchBuilder(root, ref, data, target, expected); ok {
					found = append(found, scored{b, 0})
				}
			}
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
			po, ok := newObject(d.Object)
			if !ok {
				continue
			}
			var matches bool
			if ref.target != nil {
				matches = selectorMatches(ref.target, target, src, layers)
			} else {
				matches = po.kind == target.kind && groupOf(po.apiVersion) == groupOf(target.apiVersion) &&
					(po.name == sourceName || po.name == target.name || slices.Contains(layers, po.name))
			}
			if !matches {
				continue
			}
			score := 2
			if setsField(po.body, target.kind, p.req.Change) {
				score = 0
			} else if ref.inline == "" && strings.HasPrefix(path.Base(ref.file), "kukie-") {
				score = 1
			}
			ref, index, body := ref, d.Index, po.body
			edit := func(mode opMode) candidateBuilder {
				return candidateBuilder{strategy: ref.strategy(), files: []string{ref.location(root)}, build: func() (*candidate, error) {
					ops, err := changeOps(body, target.kind, p.req.Change, mode, target.body, expected)
					if err != nil {
						return nil, err
					}
					return p.editPatch(root, ref, index, ops)
				}}
			}
			found = append(found, scored{edit(inPatch), score})
			if unsetsOwnEnv(body, target.kind, p.req.Change.containerName(), p.req.Change.Env) {
				found = append(found, scored{edit(inPatchDirective), score})
			}
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].score < found[j].score })
	for _, f := range found {
		if f.score == 0 {
			setting = append(setting, f.b)
		} else {
			others = append(others, f.b)
		}
	}
	return setting, others
}

// looksLikeJSONPatch reports whether a patch's text is a list of operations, as
// kustomize tells one (it decodes the YAML as a JSON patch): a sequence of
// mappings each naming an op, whatever comes first in them (path: before op:),
// comments and a leading "---" being no part of it.
func looksLikeJSONPatch(data []byte) bool {
	var ops []map[string]any
	if err := yaml.Unmarshal(data, &ops); err != nil || len(ops) == 0 {
		return false
	}
	for _, op := range ops {
		if _, ok := op["op"]; !ok {
			return false
		}
	}
	return true
}

// jsonPatchBuilder edits the value of an existing JSON 6902 operation on the
// changed field (replicas, image, a resource quantity, a field of a patch change),
// or on a mapping that holds it: the operation a person would change, where a new
// patch after it would leave it stating the old value. Every field the change sets
// must be one an operation sets; a removal is not offered, since dropping the
// operation brings back what lies beneath it.
func (p *planner) jsonPatchBuilder(root *kustNode, ref patchRef, data []byte, target *object, expected map[string]any) (candidateBuilder, bool) {
	c := p.req.Change
	type field struct {
		pointer string
		value   any
	}
	var fields []field
	switch {
	case c.Env != nil:
		if b, ok := p.jsonPatchEnvValueBuilder(root, ref, data, target); ok {
			return b, true
		}
		return p.jsonPatchEnvBuilder(root, ref, data, target)
	case c.Replicas != nil:
		fields = []field{{"/spec/replicas", c.Replicas.Count}}
	case c.Image != nil:
		rct, ok := findContainer(target.body, target.kind, c.Image.Container)
		if !ok {
			return candidateBuilder{}, false
		}
		ect, _ := findContainer(expected, target.kind, c.Image.Container)
		img, _ := ect.body["image"].(string)
		fields = []field{{"/" + strings.Join(podSpecPath(target.kind), "/") + "/" + rct.list + "/" + strconv.Itoa(rct.index) + "/image", scalar(img)}}
	case c.Resources != nil:
		rct, ok := findContainer(target.body, target.kind, c.Resources.Container)
		if !ok {
			return candidateBuilder{}, false
		}
		base := "/" + strings.Join(podSpecPath(target.kind), "/") + "/" + rct.list + "/" + strconv.Itoa(rct.index) + "/resources/"
		for _, section := range []string{"requests", "limits"} {
			changes := c.Resources.Requests
			if section == "limits" {
				changes = c.Resources.Limits
			}
			for _, name := range slices.Sorted(maps.Keys(changes)) {
				if changes[name] == "" {
					return candidateBuilder{}, false
				}
				fields = append(fields, field{base + section + "/" + escapePointer(name), scalar(changes[name])})
			}
		}
	case c.Patch != nil:
		doc, err := c.Patch.document()
		if err != nil {
			return candidateBuilder{}, false
		}
		var walk func(prefix string, m map[string]any) bool
		walk = func(prefix string, m map[string]any) bool {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				ptr := prefix + "/" + escapePointer(k)
				switch v := m[k].(type) {
				case nil:
					return false
				case map[string]any:
					if len(v) > 0 {
						if !walk(ptr, v) {
							return false
						}
						continue
					}
				}
				fields = append(fields, field{ptr, m[k]})
			}
			return true
		}
		if !walk("", doc) {
			return candidateBuilder{}, false
		}
	default:
		return candidateBuilder{}, false
	}
	var ops []struct {
		Op    string `yaml:"op"`
		Path  string `yaml:"path"`
		Value any    `yaml:"value"`
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		return candidateBuilder{}, false
	}
	var edits []yamledit.Op
	for _, f := range fields {
		found := false
		// The last operation on the field decides it.
		for i := len(ops) - 1; i >= 0 && !found; i-- {
			op := ops[i]
			if op.Op != "replace" && op.Op != "add" {
				continue
			}
			at := yamledit.Path{yamledit.I(i), yamledit.K("value")}
			switch {
			case op.Path == f.pointer:
			case strings.HasPrefix(f.pointer, op.Path+"/"):
				// An operation setting a mapping that holds the field.
				if _, ok := op.Value.(map[string]any); !ok {
					continue
				}
				segs, err := pointerSegments(strings.TrimPrefix(f.pointer, op.Path))
				if err != nil {
					return candidateBuilder{}, false
				}
				at = joinPath(at, keys(segs...))
			default:
				continue
			}
			edits = append(edits, yamledit.Op{Path: at, Kind: yamledit.OpSet, Value: f.value})
			found = true
		}
		if !found {
			return candidateBuilder{}, false
		}
	}
	return candidateBuilder{strategy: ref.strategy(), files: []string{ref.location(root)}, build: func() (*candidate, error) {
		return p.editPatch(root, ref, 0, edits)
	}}, true
}

// jsonPatchEnvValueBuilder edits, in a JSON 6902 patch of the target (a file,
// or inline in the kustomization, in block or JSON style), the value of each
// variable an env change sets where an operation of the patch adds or
// replaces that variable's entry of the container's env ("add" at
// .../env/- or .../env/N, value {name: X, value: y}): the operation's value is
// the one place the variable's value is written, so it changes there and the
// rest of the patch stays byte for byte. A variable the change removes that
// the patch's one operation on it adds goes with that operation. The
// variables the patch holds no operation of are set or removed by operations
// appended after the patch's own, as jsonPatchEnvBuilder appends them (see
// appendPatchOps). A change none of whose variables the patch holds, or one
// that would leave it without operations, is left to the builders that append
// operations or write a new patch.
func (p *planner) jsonPatchEnvValueBuilder(root *kustNode, ref patchRef, data []byte, target *object) (candidateBuilder, bool) {
	e := p.req.Change.Env
	ct, ok := findContainer(target.body, target.kind, e.Container)
	if !ok {
		return candidateBuilder{}, false
	}
	var ops []struct {
		Op    string `yaml:"op"`
		Path  string `yaml:"path"`
		Value any    `yaml:"value"`
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		return candidateBuilder{}, false
	}
	env := "/" + strings.Join(podSpecPath(target.kind), "/") + "/" + ct.list + "/" + strconv.Itoa(ct.index) + "/env/"
	unset := map[string]bool{}
	for _, n := range e.Unset {
		unset[n] = true
	}
	at := map[string]int{}
	on := map[string][]int{} // the operations on each variable removed
	for i, op := range ops {
		rest, under := strings.CutPrefix(op.Path, env)
		if !under || (op.Op != "add" && op.Op != "replace") || (rest != "-" && !isIndex(rest)) {
			continue
		}
		entry, _ := op.Value.(map[string]any)
		name, _ := entry["name"].(string)
		if unset[name] {
			on[name] = append(on[name], i)
			continue
		}
		if _, set := e.Set[name]; !set {
			continue
		}
		if _, from := entry["valueFrom"]; from {
			continue
		}
		// The last operation on the variable is the one whose value renders.
		at[name] = i
	}
	// An "add" inserts the variable's entry, so dropping the operation removes
	// it; a "replace" overwrote one from below, which dropping would bring back.
	var dropped []int
	drop := map[string]bool{}
	for name, is := range on {
		if len(is) == 1 && ops[is[0]].Op == "add" {
			dropped = append(dropped, is[0])
			drop[name] = true
		}
	}
	if len(at)+len(dropped) == 0 || len(dropped) == len(ops) {
		return candidateBuilder{}, false
	}
	rest := &Env{Container: e.Container, Set: map[string]string{}}
	var edits []yamledit.Op
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		i, held := at[name]
		if !held {
			rest.Set[name] = e.Set[name]
			continue
		}
		edits = append(edits, yamledit.Op{Path: yamledit.Path{yamledit.I(i), yamledit.K("value"), yamledit.K("value")}, Kind: yamledit.OpSet, Value: scalar(e.Set[name])})
	}
	for _, name := range e.Unset {
		if !drop[name] {
			rest.Unset = append(rest.Unset, name)
		}
	}
	// Dropped from the last, so the indexes of the others hold.
	sort.Sort(sort.Reverse(sort.IntSlice(dropped)))
	for _, i := range dropped {
		edits = append(edits, yamledit.Delete(yamledit.Path{yamledit.I(i)}))
	}
	more := len(rest.Set) > 0 || len(rest.Unset) > 0
	if more && !appendsOperations(data) {
		return candidateBuilder{}, false
	}
	return candidateBuilder{strategy: ref.strategy(), files: []string{ref.location(root)}, build: func() (*candidate, error) {
		if !more {
			return p.editPatch(root, ref, 0, edits)
		}
		// The appended operations run on the env the patch's own leave: the
		// rendered one without the entries of the dropped operations (the
		// edits change the others in value only).
		appended, err := envJSONPatchOps(target.kind, withoutEnv(ct, drop), rest)
		if err != nil {
			return nil, err
		}
		return p.appendPatchOps(root, ref, data, edits, len(ops)-len(dropped), appended)
	}}, true
}

// appendPatchOps edits the JSON 6902 patch of ref, whose text is data, with
// edits (to its own operations, of which n are left) and appends the
// operations more after them. Block-style operations of a patch file are
// appended as text, which keeps whatever ends the file; those of an inline
// patch become items of its list, indented as it is. A JSON-style list ([...])
// takes them as members, written like its own (one per line when those are),
// so only the lines of the JSON text they join change. When the list cannot
// take them so (the text would be laid out anew, or the kustomization's
// scalar holding it rewritten beyond its changed lines), the patch is passed
// over with the reason, which the result of the location that takes the
// change instead carries as a warning.
func (p *planner) appendPatchOps(root *kustNode, ref patchRef, data []byte, edits []yamledit.Op, n int, more []*yaml.Node) (*candidate, error) {
	flow := flowList(data)
	if ref.inline == "" && !flow {
		c := &candidate{strategy: strategyExistingPatch, files: map[string][]byte{ref.file: data}}
		if len(edits) > 0 {
			var err error
			if c, err = p.editPatch(root, ref, 0, edits); err != nil {
				return nil, err
			}
		}
		text, err := encodeNode(seqNode(more...))
		if err != nil {
			return nil, err
		}
		c.files[ref.file] = appendOperations(c.files[ref.file], text)
		return c, nil
	}
	for i, op := range more {
		edits = append(edits, yamledit.Set(yamledit.Path{yamledit.I(n + i)}, editValue(op)))
	}
	c, err := p.editPatch(root, ref, 0, edits)
	if err != nil || !flow || len(c.warnings) == 0 {
		return c, err
	}
	where, instead := ref.file, "write the list one operation per line"
	if ref.inline != "" {
		where, instead = fmt.Sprintf("%s (inline patch at %s)", root.file, ref.at), "write the list in a block scalar (patch: |-)"
	}
	var why []string
	for _, w := range c.warnings {
		why = append(why, w.Where+": "+w.Message)
	}
	return nil, &declinedError{w: Warning{
		Code:  "patch_not_extended",
		Where: where,
		Message: fmt.Sprintf("the JSON 6902 patch was left as it is: the operations the change adds cannot join its JSON list in the lines they add (%s)",
			strings.Join(why, "; ")),
		Alternative: "the change is made by the edits of this result instead; for such a change to go into this patch, " + instead,
	}}
}

// flowList reports whether the patch text data is a flow-style (JSON) list.
func flowList(data []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return false
	}
	n := doc.Content[0]
	return n.Kind == yaml.SequenceNode && n.Style&yaml.FlowStyle != 0
}

// withoutEnv is container ct with the first env entry of each name in names
// left out.
func withoutEnv(ct container, names map[string]bool) container {
	if len(names) == 0 {
		return ct
	}
	body := make(map[string]any, len(ct.body))
	for k, v := range ct.body {
		body[k] = v
	}
	left := map[string]bool{}
	var env []any
	for _, it := range envList(ct.body) {
		m, _ := it.(map[string]any)
		if n, _ := m["name"].(string); names[n] && !left[n] {
			left[n] = true
			continue
		}
		env = append(env, it)
	}
	body["env"] = env
	ct.body = body
	return ct
}

// appendsOperations reports whether operations can be appended to the JSON 6902
// patch whose text is data: a list that holds some (see appendPatchOps).
func appendsOperations(data []byte) bool {
	var ops []any
	return yaml.Unmarshal(data, &ops) == nil && len(ops) > 0
}

// appendOperations is the patch file data followed by the operations more.
func appendOperations(data, more []byte) []byte {
	out := append([]byte{}, data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, more...)
}

// isIndex reports whether s is a list index of a JSON pointer.
func isIndex(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

// jsonPatchEnvBuilder appends the operations of an env change to a JSON 6902 patch
// file of the target: they run after the patch's own operations, on the env those
// leave, which is the env rendered now. An inline patch is left to a new patch.
func (p *planner) jsonPatchEnvBuilder(root *kustNode, ref patchRef, data []byte, target *object) (candidateBuilder, bool) {
	ct, ok := findContainer(target.body, target.kind, p.req.Change.Env.Container)
	if ref.inline != "" || !ok || len(envList(ct.body)) == 0 || !appendsOperations(data) {
		return candidateBuilder{}, false
	}
	return candidateBuilder{strategy: strategyExistingPatch, files: []string{ref.file}, build: func() (*candidate, error) {
		more, err := envJSONPatchOps(target.kind, ct, p.req.Change.Env)
		if err != nil {
			return nil, err
		}
		var ops []any
		if err := yaml.Unmarshal(data, &ops); err != nil {
			return nil, notApplicable("%s: %v", ref.file, err)
		}
		return p.appendPatchOps(root, ref, data, nil, len(ops), more)
	}}, true
}

// newPatchBuilder writes the patch content makes as a new file of the overlay,
// listed in its patches with an explicit target.
func (p *planner) newPatchBuilder(root *kustNode, target *object, src *sourceDoc, sourceName, strategy string, content func() ([]byte, error)) candidateBuilder {
	return p.newPatchFileBuilder(root, target, src, sourceName, strategy, newPatchFileName(target.kind, sourceName), content)
}

// newPatchFileBuilder is newPatchBuilder with the new file's name given.
func (p *planner) newPatchFileBuilder(root *kustNode, target *object, src *sourceDoc, sourceName, strategy, fname string, content func() ([]byte, error)) candidateBuilder {
	file := path.Join(root.dir, fname)
	return candidateBuilder{strategy: strategy, files: []string{file, root.file}, build: func() (*candidate, error) {
		st := p.t.stat(file)
		if st.err != nil {
			return nil, st.err
		}
		if st.kind != kindNone {
			for _, ref := range patchRefs(root) {
				if ref.file == file {
					return nil, notApplicable("%s already exists and was tried as an existing patch", file)
				}
			}
			return nil, notApplicable("%s already exists but %s does not list it; rename or list it first", file, root.file)
		}
		data, err := content()
		if err != nil {
			return nil, err
		}
		var sel yamledit.Mapping
		if g := groupOf(target.apiVersion); g != "" {
			sel = append(sel, yamledit.Field{Key: "group", Value: g})
		}
		version := target.apiVersion
		if _, v, ok := strings.Cut(version, "/"); ok {
			version = v
		}
		sel = append(sel,
			yamledit.Field{Key: "version", Value: version},
			yamledit.Field{Key: "kind", Value: target.kind},
			yamledit.Field{Key: "name", Value: sourceName})
		if ns := p.patchTargetNamespace(root, target, src); ns != "" {
			sel = append(sel, yamledit.Field{Key: "namespace", Value: ns})
		}
		kust, ws, err := p.editFile(p.before, root.file, 0, yamledit.Op{
			Path: yamledit.Path{yamledit.K("patches"), yamledit.M("path", fname), yamledit.K("target")}, Kind: yamledit.OpSet, Value: sel,
		})
		if err != nil {
			return nil, err
		}
		return &candidate{
			strategy: strategy,
			files:    map[string][]byte{file: data, root.file: kust},
			created:  map[string]bool{file: true},
			warnings: ws,
		}, nil
	}}
}

// patchTargetNamespace is the namespace the object has when the overlay's patches
// run: kustomize applies an overlay's own namespace after its patches.
func (p *planner) patchTargetNamespace(root *kustNode, target *object, src *sourceDoc) string {
	if root.k.Namespace == "" && p.primary.Kustomize.Namespace == "" {
		return target.namespace
	}
	if src != nil {
		return src.namespace
	}
	return ""
}
