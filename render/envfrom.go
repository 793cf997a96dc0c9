package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// planEnvThroughGenerator plans an env change of a container whose variables
// come through envFrom of a ConfigMap a configMapGenerator makes: the minimal
// edit is then the generator's input (the literal or env file line that
// defines the variable, deleted for an unset), not an env override beside
// it, and the ConfigMap's new hashed name in the pod template rolls the
// workload, which is what makes a container read its envFrom again.
//
// A variable goes to the generator when:
//   - the container has no env entry of that name (one overrides envFrom, and
//     the plan edits it as any env change);
//   - the last envFrom source that defines it is a ConfigMap of the app's
//     render that the generator makes (with the source's prefix taken off to
//     name its key), and no source after it is one the render does not hold
//     (a Secret or ConfigMap from elsewhere may define it too and would win).
//
// The other variables of the change go to an env override of the container,
// as any env change, in the same edit (planEnvMixed). It applies, and is
// true, only when some variable goes to the generator, all of them through
// one ConfigMap, and the ConfigMap is read by nothing else of the app than
// this container's envFrom and env entries reading other keys (a change of
// its data would change them too), and its name carries kustomize's hash
// (disableNameSuffixHash keeps the name, so the pods would not restart and
// read it). Otherwise, or when the generator's edit is refused or does not
// verify, it is false and the whole change goes to the workload's env as
// before. The result's target keeps its name; the ConfigMap's rename is in
// its Renames.
func (p *planner) planEnvThroughGenerator(ctx context.Context, target *object, objs []*object) (*Result, bool, error) {
	e := p.req.Change.Env
	app := p.primary
	ct, ok := findContainer(target.body, target.kind, e.Container)
	if !ok {
		return nil, false, nil
	}
	ns := target.key(app.Namespace).Namespace
	names := append(slices.Sorted(maps.Keys(e.Set)), e.Unset...)
	var cm *object
	data := map[string]any{}
	others := &Env{Container: e.Container, Set: map[string]string{}}
	for _, name := range names {
		v, set := e.Set[name]
		inEnv := false
		for _, env := range items(ct.body, "env") {
			inEnv = inEnv || env["name"] == name
		}
		src, key := envFromSource(ct.body, name, objs, app.Namespace, ns)
		if inEnv || src == nil || src.kind != "ConfigMap" || src.generatedBy != "ConfigMapGenerator" {
			if set {
				others.Set[name] = v
			} else {
				others.Unset = append(others.Unset, name)
			}
			continue
		}
		if cm != nil && src != cm {
			return nil, false, nil
		}
		cm = src
		if set {
			data[key] = v
		} else {
			data[key] = nil
		}
	}
	if cm == nil || !p.onlyReadBy(cm, target, ct, objs, data) {
		return nil, false, nil
	}
	expected := deepCopy(cm.body).(map[string]any)
	cmData, _ := expected["data"].(map[string]any)
	for k, v := range data {
		if v == nil {
			delete(cmData, k)
		} else {
			cmData[k] = v
		}
	}
	mixed := len(others.Set)+len(others.Unset) > 0
	if deepEqual(cm.body, expected) {
		if mixed {
			return nil, false, nil
		}
		return nil, true, &Refusal{Code: CodeNoChange, App: app.Name, Reason: fmt.Sprintf("%s already renders that way (%s): container %s reads those values through envFrom from ConfigMap %s, there is nothing to change", p.req.Target, p.req.Change.describe(), e.Container, cm.name)}
	}
	if newName, err := generatedName(cm, expected); err != nil || newName == cm.name {
		return nil, false, err
	}
	var res *Result
	var err error
	if mixed {
		if ref := p.unsetThroughEnvFrom(target, objs, others.Unset, false); ref != nil {
			return nil, true, ref
		}
		res, err = p.planEnvMixed(ctx, target, cm, expected, data, others)
	} else {
		res, err = p.planGenerated(ctx, cm, expected, data)
	}
	var ref *Refusal
	if errors.As(err, &ref) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	res.Renamed = ""
	return res, true, nil
}

// planEnvMixed plans an env change some of whose variables the generator of
// ConfigMap cm defines (data, its keys changed to make cm's body expected)
// and the others (others) go to an env override of the target's container:
// one edit of both, each candidate location of the override (as an env
// change of those variables alone would try them) with the generator's edit
// on top, verified against the before-render with the target's env changed,
// the ConfigMap renamed with its new data and the references to it renamed.
func (p *planner) planEnvMixed(ctx context.Context, target, cm *object, expected, data map[string]any, others *Env) (*Result, error) {
	app := p.primary
	g, err := p.prepareGenerated(cm, expected, data)
	if err != nil {
		return nil, err
	}
	change := Change{Env: others}
	want, err := expectedAfter(target, change)
	if err != nil {
		return nil, withApp(err, app.Name)
	}
	if deepEqual(target.body, want) {
		// The env already holds the other variables as asked.
		return p.planGenerated(ctx, cm, expected, data)
	}
	override := p.withChange(change)
	envBuilders, err := override.kustomizeBuilders(target, want)
	if err != nil {
		return nil, err
	}
	exp := &mixedEnvExpectation{
		env:       &changeExpectation{primary: app.Name, target: target.key(app.Namespace), expected: want},
		generated: g.exp,
	}
	var builders []candidateBuilder
	for _, b := range envBuilders {
		strategy := g.strategy + ", " + b.strategy
		files := append(append([]string(nil), g.files...), b.files...)
		builders = append(builders, candidateBuilder{strategy: strategy, files: files, build: func() (*candidate, error) {
			ec, err := b.build()
			if err != nil {
				return nil, err
			}
			gc, err := g.build(p.before.with(ec.files))
			if err != nil {
				return nil, err
			}
			c := &candidate{strategy: strategy, files: map[string][]byte{}, created: map[string]bool{}}
			for f, data := range ec.files {
				k := p.t.key(f)
				c.files[k] = data
				c.created[k] = ec.created[f]
			}
			for f, data := range gc.files {
				c.files[p.t.key(f)] = data
			}
			c.warnings = append(append(c.warnings, ec.warnings...), gc.warnings...)
			return c, nil
		}})
	}
	out, err := p.tryCandidates(ctx, builders, exp)
	if err != nil {
		return nil, err
	}
	if out.winner == nil {
		return nil, p.noVerifiedEdit(target, out)
	}
	res, err := p.result(out.winner, out.verified, out.attempts)
	if err != nil {
		return nil, err
	}
	if g.rename != nil {
		res.Renames = append(res.Renames, *g.rename)
	}
	return res, nil
}

// withChange is a planner of the same plan for another change of the same
// target: the locations a part of the change would be tried at.
func (p *planner) withChange(c Change) *planner {
	req := p.req
	req.Change = c
	return &planner{ctx: p.ctx, req: req, t: p.t, primary: p.primary, apps: p.apps, r: p.r, before: p.before, reachCache: map[string]*reachCall{}}
}

// mixedEnvExpectation: the target's env changes as env expects, and the
// generated ConfigMap as generated does, the target's reference to it
// included.
type mixedEnvExpectation struct {
	env       *changeExpectation
	generated *renamedExpectation
}

func (e *mixedEnvExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	out, err := e.env.expect(app, before)
	if err != nil {
		return nil, err
	}
	return e.generated.expect(app, out)
}

func (e *mixedEnvExpectation) extra(_ Application, added map[objKey]*object) []string {
	return unexpectedObjects(added)
}

// envFromSource is the object of objs through whose envFrom entry the
// container ct gets variable name, with the data key it reads: the last entry
// whose object defines it (a configMapRef's ConfigMap or a secretRef's Secret,
// by its keys, its prefix taken off); nil when no entry does, or when an
// entry after it names an object objs does not hold (which may define it too).
func envFromSource(ct map[string]any, name string, objs []*object, destination, ns string) (*object, string) {
	find := func(kind, ref string) *object {
		for _, o := range objs {
			if k := o.key(destination); k.Group == "" && k.Kind == kind && k.Namespace == ns && k.Name == ref {
				return o
			}
		}
		return nil
	}
	var src *object
	key := ""
	unknown := false
	for _, from := range items(ct, "envFrom") {
		k, ok := strings.CutPrefix(name, str(from, "prefix"))
		var o *object
		switch {
		case str(from, "configMapRef", "name") != "":
			o = find("ConfigMap", str(from, "configMapRef", "name"))
		case str(from, "secretRef", "name") != "":
			o = find("Secret", str(from, "secretRef", "name"))
		}
		if o == nil {
			unknown = true
			continue
		}
		if ok && definesKey(o, k) {
			src, key, unknown = o, k, false
		}
	}
	if unknown {
		return nil, ""
	}
	return src, key
}

// secretEnvRefusal refuses an env change that sets a variable container ct of
// target reads from a Secret (an env entry's secretKeyRef, or envFrom of a
// Secret of the render that defines it): the value would be written into the
// repository in clear, in place of the Secret's. It names the Secret and the
// key, never a value.
func (p *planner) secretEnvRefusal(target *object, objs []*object) *Refusal {
	e := p.req.Change.Env
	app := p.primary
	ct, ok := findContainer(target.body, target.kind, e.Container)
	if !ok {
		return nil
	}
	ns := target.key(app.Namespace).Namespace
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		from := ""
		inEnv := false
		for _, env := range items(ct.body, "env") {
			if env["name"] != name {
				continue
			}
			inEnv = true
			if ref := str(env, "valueFrom", "secretKeyRef", "name"); ref != "" {
				from = fmt.Sprintf("key %s of Secret %s (env valueFrom secretKeyRef)", str(env, "valueFrom", "secretKeyRef", "key"), ref)
			}
		}
		if !inEnv {
			if src, key := envFromSource(ct.body, name, objs, app.Namespace, ns); src != nil && src.kind == "Secret" {
				from = fmt.Sprintf("key %s of Secret %s (envFrom)", key, src.name)
			}
		}
		if from != "" {
			return &Refusal{Code: CodeSecret, App: app.Name, Reason: fmt.Sprintf("container %s of %s reads %s from %s: setting it in the env would write its value into the repository in clear instead of the Secret's; change the Secret's data where it is kept (a secret store, or the input of its secretGenerator, which this service never edits)", e.Container, p.req.Target, name, from)}
		}
	}
	return nil
}

// definesKey reports whether a ConfigMap or Secret has key among its data (a
// Secret's stringData too); a Secret's values are never read.
func definesKey(o *object, key string) bool {
	for _, field := range []string{"data", "binaryData", "stringData"} {
		if m, ok := o.body[field].(map[string]any); ok {
			if _, has := m[key]; has {
				return true
			}
		}
	}
	return false
}

// onlyReadBy reports whether nothing of the app's render reads ConfigMap cm
// but container ct of target: through its envFrom, or env entries that read
// keys data does not change.
func (p *planner) onlyReadBy(cm, target *object, ct container, objs []*object, data map[string]any) bool {
	app := p.primary
	want := cm.key(app.Namespace)
	at := strings.Join(podSpecPath(target.kind), ".") + "." + ct.list + "[" + str(ct.body, "name") + "]"
	for _, o := range objs {
		k := o.key(app.Namespace)
		for _, r := range namedReferences(o, k.Namespace) {
			if r.key != want {
				continue
			}
			if o != target {
				return false
			}
			if strings.HasPrefix(r.field, at+".envFrom[") {
				continue
			}
			env, ok := strings.CutPrefix(r.field, at+".env[")
			if !ok {
				return false
			}
			env = strings.TrimSuffix(env, "]")
			for _, entry := range items(ct.body, "env") {
				if entry["name"] != env {
					continue
				}
				if _, changed := data[str(entry, "valueFrom", "configMapKeyRef", "key")]; changed {
					return false
				}
			}
		}
	}
	return true
}

// envFromUnsetRefusal refuses an env change that unsets only variables the
// container still gets through envFrom, which the plan could not edit at their
// source (planEnvThroughGenerator): an env change cannot take away what
// envFrom gives, so "already renders that way" would be false. It names the
// source and key, and how to remove the key there; nil when some variable is
// not from envFrom.
func (p *planner) envFromUnsetRefusal(target *object, objs []*object) *Refusal {
	e := p.req.Change.Env
	if len(e.Set) > 0 || len(e.Unset) == 0 {
		return nil
	}
	return p.unsetThroughEnvFrom(target, objs, e.Unset, true)
}

// unsetThroughEnvFrom refuses unsetting the variables of names that the
// container gets through envFrom and has no env entry for (see
// envFromUnsetRefusal); with every, only when all of names are such, nil
// otherwise; without, naming those that are, nil when none is.
func (p *planner) unsetThroughEnvFrom(target *object, objs []*object, names []string, every bool) *Refusal {
	e := p.req.Change.Env
	app := p.primary
	ct, ok := findContainer(target.body, target.kind, e.Container)
	if !ok {
		return nil
	}
	ns := target.key(app.Namespace).Namespace
	var from []string
	code := CodeNoChange
	for _, name := range names {
		inEnv := false
		for _, env := range items(ct.body, "env") {
			inEnv = inEnv || env["name"] == name
		}
		src, key := envFromSource(ct.body, name, objs, app.Namespace, ns)
		if src == nil || inEnv {
			if every {
				return nil
			}
			continue
		}
		hint := fmt.Sprintf("with a patch of the ConfigMap setting /data/%s to null", key)
		switch {
		case src.kind == "Secret":
			hint = "where the Secret's data is kept"
		case src.generatedBy != "":
			code = CodeGenerated
		}
		from = append(from, fmt.Sprintf("%s through envFrom from %s %s (key %s; remove it %s, which changes it for everything that reads it)", name, src.kind, src.name, key, hint))
	}
	if len(from) == 0 {
		return nil
	}
	return &Refusal{Code: code, App: app.Name, Reason: fmt.Sprintf("container %s of %s reads %s: its env has no entry to remove, and an env entry cannot unset what envFrom gives", e.Container, p.req.Target, strings.Join(from, "; "))}
}
