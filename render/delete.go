package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// Strategies of a delete_resource change.
const (
	strategyRemoveDocument = "remove document"
	strategyRemoveFile     = "remove file"
	strategyRemoveListItem = "remove list item"
	strategyDeletePatch    = "new delete patch"
	strategyValuesToggle   = "values toggle"
	strategyNewToggle      = "new values toggle"
)

// syncOptionsAnnotation is Argo CD's per-resource sync options annotation.
const syncOptionsAnnotation = "argocd.argoproj.io/sync-options"

// planDelete removes the target from what its Application renders. The edit is,
// in order: the target's document where the app's own folder holds it (the whole
// file, and its entry in the kustomization that lists it, when the file holds
// nothing else); for an object of a kustomize base, a "$patch: delete" patch in
// the overlay (a base is shared by design, and never edited for one overlay);
// for a Helm app, a boolean values key whose flip stops the chart rendering the
// object, found by rendering. The expected render is the before-render without
// the target, every other app the edit reaches unchanged.
//
// Secrets are refused like every change of a Secret, and so is an object that
// other objects of the app still name (see referencesTo).
func (p *planner) planDelete(ctx context.Context) (*Result, error) {
	target, objs, err := p.renderTarget()
	if err != nil {
		return nil, err
	}
	// The primary is the source rendering the target (see renderTarget).
	app := p.primary
	key := target.key(app.Namespace)
	if refs := referencesTo(app, objs, target); len(refs) > 0 {
		shown := refs
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(refs)-10))
		}
		return nil, &Refusal{Code: CodeReferenced, App: app.Name, Reason: fmt.Sprintf(
			"%s is still referenced by name in application %s: %s; remove or change those references first (label selectors, such as a Service's, do not count)",
			key, app.Name, strings.Join(shown, ", "))}
	}
	exp := &deleteExpectation{primary: app.Name, target: key}
	var builders []candidateBuilder
	switch app.SourceType {
	case SourceDirectory:
		builders = p.directoryDeleteBuilders(target)
	case SourceKustomize:
		builders, err = p.kustomizeDeleteBuilders(target)
	case SourceHelm:
		builders, err = p.helmToggleBuilders(target)
	}
	if err != nil {
		return nil, err
	}
	out, err := p.tryCandidates(ctx, builders, exp)
	if err != nil {
		return nil, err
	}
	if out.winner == nil {
		if app.SourceType == SourceHelm {
			reason := fmt.Sprintf("no boolean key of the values files of application %s switches off %s alone", app.Name, key)
			if len(out.attempts) > 0 {
				reason += ": " + attemptsReason(out.attempts)
			}
			reason += "; the chart renders it unconditionally or together with other objects, so only a change of the chart can remove it"
			return nil, p.refusal(outcomeCode(out), reason, out.attempts)
		}
		return nil, p.noVerifiedEdit(target, out)
	}
	res, err := p.result(out.winner, out.verified, out.attempts)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, pruneWarnings(app, target, key)...)
	return res, nil
}

// pruneWarnings say when Argo CD will leave the deleted object in the cluster.
func pruneWarnings(app Application, target *object, key objKey) []Warning {
	var ws []Warning
	if !app.Prune {
		ws = append(ws, Warning{
			Code:        "no_prune",
			Where:       "Application " + app.Name,
			Message:     fmt.Sprintf("it does not prune automatically (spec.syncPolicy.automated.prune is not set): after the merge Argo CD leaves %s in the cluster and shows it OutOfSync, requiring pruning", key),
			Alternative: fmt.Sprintf("after the merge sync the app with pruning (argocd app sync %s --prune, or Prune in the UI), or delete the object by hand", app.Name),
		})
	}
	meta, _ := target.body["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	if opts, _ := annotations[syncOptionsAnnotation].(string); opts != "" {
		for _, o := range strings.Split(opts, ",") {
			switch o = strings.TrimSpace(o); o {
			case "Prune=false":
				ws = append(ws, Warning{
					Code:        "prune_disabled",
					Where:       key.String(),
					Message:     fmt.Sprintf("its %s annotation says %s: Argo CD never prunes it, even when the app prunes", syncOptionsAnnotation, o),
					Alternative: "delete the object by hand after the merge",
				})
			case "Prune=confirm":
				ws = append(ws, Warning{
					Code:        "prune_confirm",
					Where:       key.String(),
					Message:     fmt.Sprintf("its %s annotation says %s: Argo CD prunes it only once someone confirms the pruning", syncOptionsAnnotation, o),
					Alternative: "confirm the pruning in Argo CD after the merge",
				})
			}
		}
	}
	return ws
}

// deleteExpectation: the target is gone from the primary app's render, nothing
// else changes anywhere.
type deleteExpectation struct {
	primary string
	target  objKey
}

func (e *deleteExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	if app.Name != e.primary {
		return before, nil
	}
	if _, ok := before[e.target]; !ok {
		return nil, fmt.Errorf("target %s vanished from the before-render", e.target)
	}
	out := make(map[objKey]*object, len(before)-1)
	for k, o := range before {
		if k != e.target {
			out[k] = o
		}
	}
	return out, nil
}

// extra names the target as still rendered rather than as a new object: an
// edit that does not switch it off leaves it where it was.
func (e *deleteExpectation) extra(app Application, added map[objKey]*object) []string {
	var lines []string
	if _, ok := added[e.target]; ok && app.Name == e.primary {
		lines = append(lines, fmt.Sprintf("%s: still rendered, though the change deletes it", e.target))
		added = maps.Clone(added)
		delete(added, e.target)
	}
	return append(lines, unexpectedObjects(added)...)
}

// removeInPlaceBuilders remove document doc of file: the document alone when the
// file holds others, else the whole file together with the ops that unlist it
// (remove, by kustomization file).
func (p *planner) removeInPlaceBuilders(file string, doc int, unlist func() (map[string][]yamledit.Op, error)) []candidateBuilder {
	data, err := p.t.readFile(file)
	if err != nil {
		return []candidateBuilder{failedBuilder(strategyRemoveDocument, file, err)}
	}
	docs, err := yamledit.Documents(data)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			err = refuse(CodeAliasBomb, "%s: YAML aliases expand beyond the allowed bound", file)
		}
		return []candidateBuilder{failedBuilder(strategyRemoveDocument, file, err)}
	}
	others := 0
	for _, d := range docs {
		if !d.Empty && d.Index != doc {
			others++
		}
	}
	if others > 0 {
		return []candidateBuilder{{strategy: strategyRemoveDocument, files: []string{file}, build: func() (*candidate, error) {
			out, err := yamledit.RemoveDocument(data, doc)
			if err != nil {
				return nil, fmt.Errorf("remove document %d of %s: %w", doc+1, file, err)
			}
			return &candidate{strategy: strategyRemoveDocument, files: map[string][]byte{file: out}}, nil
		}}}
	}
	return []candidateBuilder{{strategy: strategyRemoveFile, files: []string{file}, build: func() (*candidate, error) {
		c := &candidate{strategy: strategyRemoveFile, files: map[string][]byte{file: nil}}
		if unlist == nil {
			return c, nil
		}
		edits, err := unlist()
		if err != nil {
			return nil, err
		}
		for _, kf := range slices.Sorted(maps.Keys(edits)) {
			out, ws, err := p.editFile(p.before, kf, 0, edits[kf]...)
			if err != nil {
				return nil, err
			}
			c.files[kf] = out
			c.warnings = append(c.warnings, ws...)
		}
		return c, nil
	}}}
}

// directoryDeleteBuilders remove a Directory app's object: its document, or,
// for an item of a List document, the item (the List too when it is the last).
func (p *planner) directoryDeleteBuilders(target *object) []candidateBuilder {
	if target.item < 0 {
		return p.removeInPlaceBuilders(target.file, target.doc, nil)
	}
	data, err := p.t.readFile(target.file)
	if err != nil {
		return []candidateBuilder{failedBuilder(strategyRemoveListItem, target.file, err)}
	}
	docs, err := yamledit.Documents(data)
	if err != nil || target.doc >= len(docs) {
		return []candidateBuilder{failedBuilder(strategyRemoveListItem, target.file, refuse(CodeRenderFailed, "parse %s: %v", target.file, err))}
	}
	if items, _ := docs[target.doc].Object["items"].([]any); len(items) < 2 {
		return p.removeInPlaceBuilders(target.file, target.doc, nil)
	}
	return []candidateBuilder{{strategy: strategyRemoveListItem, files: []string{target.file}, build: func() (*candidate, error) {
		return p.editCandidate(strategyRemoveListItem, target.file, target.doc, []yamledit.Op{yamledit.Delete(yamledit.Path{yamledit.K("items"), yamledit.I(target.item)})})
	}}}
}

// failedBuilder is a location that could not even be read: tried, and refused
// with the reason.
func failedBuilder(strategy, file string, err error) candidateBuilder {
	return candidateBuilder{strategy: strategy, files: []string{file}, build: func() (*candidate, error) { return nil, err }}
}

// kustomizeDeleteBuilders: the target's document (or file) when the overlay's own
// folder holds it, then a "$patch: delete" patch in the overlay.
func (p *planner) kustomizeDeleteBuilders(target *object) ([]candidateBuilder, error) {
	reach := p.reach(p.primary).kust
	root := reach.nodes[0]
	src, err := p.findSourceDoc(target)
	if err != nil {
		return nil, withApp(err, p.primary.Name)
	}
	sourceName := target.name
	var builders []candidateBuilder
	if src != nil {
		sourceName = src.name
		if root.dir == "." || strings.HasPrefix(src.file, root.dir+"/") {
			builders = append(builders, p.removeInPlaceBuilders(src.file, src.index, func() (map[string][]yamledit.Op, error) {
				return p.unlistResource(reach, src.file)
			})...)
		}
	}
	fname := fmt.Sprintf("kukie-delete-%s-%s.yaml", strings.ToLower(target.kind), sourceName)
	builders = append(builders, p.newPatchFileBuilder(root, target, src, sourceName, strategyDeletePatch, fname, func() ([]byte, error) {
		return deletePatch(target.apiVersion, target.kind, sourceName)
	}))
	return builders, nil
}

// unlistResource returns the edits that remove file from the resources (or
// bases) lists of the kustomizations of the app that list it.
func (p *planner) unlistResource(reach *kustReach, file string) (map[string][]yamledit.Op, error) {
	want := p.t.key(file)
	out := map[string][]yamledit.Op{}
	for _, n := range reach.nodes {
		data, err := p.t.readFile(n.file)
		if err != nil {
			return nil, err
		}
		docs, err := yamledit.Documents(data)
		if err != nil || len(docs) == 0 {
			continue
		}
		for _, field := range []string{"resources", "bases"} {
			items, _ := docs[0].Object[field].([]any)
			// Removed from the last, so the indexes of the others hold.
			for i := len(items) - 1; i >= 0; i-- {
				ref, _ := items[i].(string)
				if f, err := joinRel(n.dir, ref); err == nil && p.t.key(f) == want {
					out[n.file] = append(out[n.file], yamledit.Delete(yamledit.Path{yamledit.K(field), yamledit.I(i)}))
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, notApplicable("no kustomization of the app lists %s in its resources", file)
	}
	return out, nil
}

// deletePatch is a strategic-merge patch that removes the object from the build.
func deletePatch(apiVersion, kind, name string) ([]byte, error) {
	return sigsyaml.Marshal(map[string]any{
		"$patch":     "delete",
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
	})
}

// maxToggleCandidates bounds the values keys a delete tries; each renders the
// apps the values file reaches.
const maxToggleCandidates = maxHelmCandidates

// helmToggleBuilders finds the boolean values keys whose flip may stop the chart
// rendering the target: the keys of the app's values files (the last file that
// sets a key wins), then keys only the chart's defaults set, added to the app's
// last values file. Keys that look like the target's switch come first (a path
// naming its kind or name, ending in enabled or create), true keys before false
// ones; each is verified by rendering.
func (p *planner) helmToggleBuilders(target *object) ([]candidateBuilder, error) {
	app := p.primary
	editable, defaults, err := p.helmEditableFiles()
	if err != nil {
		return nil, err
	}
	type toggle struct {
		set   helmValueSet
		score int
	}
	var toggles []toggle
	// A key is flipped where it wins: in the last file that sets it, or as a
	// new key of the app's last values file when that file does not set it.
	seen, seenFresh, inLast := map[string]bool{}, map[string]bool{}, map[string]bool{}
	add := func(l valuesLeaf, file string, fresh bool) {
		b, ok := l.value.(bool)
		if !ok || l.node.Kind != yaml.ScalarNode {
			return
		}
		k := l.path.String()
		switch {
		case fresh && (inLast[k] || seenFresh[k]):
			return
		case fresh:
			seenFresh[k] = true
		case seen[k]:
			return
		default:
			seen[k] = true
			inLast[k] = file == editable[len(editable)-1]
		}
		doc := l.doc
		if fresh {
			if !keysOnly(l.path) {
				return // an item of a list: another file cannot set it alone
			}
			doc = 0
		}
		toggles = append(toggles, toggle{set: helmValueSet{file: file, doc: doc, path: l.path, value: !b, fresh: fresh}, score: toggleScore(l.path, b, target)})
	}
	for i := len(editable) - 1; i >= 0; i-- {
		leaves, err := p.valuesFileLeaves(editable[i])
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		shared := i < len(editable)-1 && p.sharedValuesFile(editable[i], defaults)
		for _, l := range leaves {
			if shared {
				// Flipped again in the app's last values file, which wins, before
				// it is flipped in the shared file: the delete stays with this
				// app (see helmBuilders).
				add(l, editable[len(editable)-1], true)
			}
			add(l, editable[i], false)
			if i < len(editable)-1 && !shared {
				// Flipped again in the last file if that in place fails.
				add(l, editable[len(editable)-1], true)
			}
		}
	}
	if len(editable) > 0 && editable[0] != defaults {
		leaves, _, err := p.defaultLeaves(defaults)
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		for _, l := range leaves {
			add(l, editable[len(editable)-1], true)
		}
	}
	if len(editable) > 0 {
		// A subchart's own default (the enabled its condition reads) is set
		// under the subchart's key, as a values key change sets it.
		leaves, err := p.subchartDefaultLeaves(path.Dir(defaults))
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		for _, l := range leaves {
			add(l, editable[len(editable)-1], true)
		}
	}
	sort.SliceStable(toggles, func(i, j int) bool { return toggles[i].score < toggles[j].score })
	var builders []candidateBuilder
	for _, t := range toggles {
		if len(builders) == maxToggleCandidates {
			break
		}
		b := p.valuesBuilder([]helmValueSet{t.set})
		b.strategy = strategyValuesToggle
		if t.set.fresh {
			b.strategy = strategyNewToggle
		}
		build := b.build
		strategy := b.strategy
		b.build = func() (*candidate, error) {
			c, err := build()
			if c != nil {
				c.strategy = strategy
			}
			return c, err
		}
		builders = append(builders, b)
	}
	return builders, nil
}

func (p *planner) valuesFileLeaves(file string) ([]valuesLeaf, error) {
	data, err := p.before.read(file)
	if err != nil {
		return nil, err
	}
	return valuesLeaves(file, data)
}

// toggleScore orders values keys by how much they look like the switch of the
// target: lower first.
func toggleScore(p yamledit.Path, value bool, target *object) int {
	score := 0
	last := ""
	if len(p) > 0 {
		last = strings.ToLower(p[len(p)-1].Key)
	}
	switch {
	case value && (last == "enabled" || last == "enable" || last == "create"):
	case !value && (strings.HasPrefix(last, "disable") || strings.HasPrefix(last, "skip")):
	case value:
		score += 2
	default:
		score += 4
	}
	names := []string{strings.ToLower(target.kind), strings.ToLower(target.name)}
	if abbr := kindAbbreviation[target.kind]; abbr != "" {
		names = append(names, abbr)
	}
	named := false
	for _, s := range p[:max(0, len(p)-1)] {
		k := strings.ToLower(s.Key)
		for _, n := range names {
			if k != "" && (strings.Contains(n, k) || strings.Contains(k, n)) {
				named = true
			}
		}
	}
	if !named {
		score++
	}
	return score
}

// kindAbbreviation is how charts commonly name the switch of a kind.
var kindAbbreviation = map[string]string{
	"HorizontalPodAutoscaler": "autoscaling",
	"PodDisruptionBudget":     "pdb",
	"ServiceAccount":          "serviceaccount",
	"NetworkPolicy":           "networkpolicy",
	"ServiceMonitor":          "metrics",
	"PersistentVolumeClaim":   "persistence",
	"Ingress":                 "ingress",
}
