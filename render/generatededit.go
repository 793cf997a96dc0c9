package render

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// Where an edit of a generated ConfigMap's data goes.
const (
	strategyGeneratorLiteral    = "generator literal"
	strategyGeneratorEnvLine    = "generator env file line"
	strategyNewGeneratorLiteral = "new generator literal"
)

// generatedDataPatch reports whether a change sets data keys of a ConfigMap a
// configMapGenerator makes to strings, and nothing else: the change
// planGenerated makes in the generator's inputs. Anything else of a generated
// object (a removal, another field, a Secret) stays refused.
func generatedDataPatch(o *object, c Change) bool {
	if o.generatedBy != "ConfigMapGenerator" || c.Patch == nil {
		return false
	}
	doc, err := c.Patch.document()
	if err != nil || len(doc) != 1 {
		return false
	}
	data, ok := doc["data"].(map[string]any)
	if !ok || len(data) == 0 {
		return false
	}
	for _, v := range data {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// keyInput is the one input of the app's generator entries that sets a data key.
type keyInput struct {
	entry generatorEntry
	// literal is the index of the literal in the entry's literals, -1 if none.
	literal int
	// envFile and line (from 1) are the env file line, when envFile is set.
	envFile string
	line    int
}

// planGenerated edits the input of a configMapGenerator that sets each data key
// the patch changes: its literal, its env file line, or, for a key no input
// sets, a new literal of the outermost entry. Kustomize names the ConfigMap by
// a hash of its content and rewrites every reference to it, so the edit is
// verified against the before-render with the ConfigMap's data and name
// changed and those references renamed, nothing else. A key a file holds,
// that several entries set, or whose input other apps read too is refused as
// before: the edit could not be made for this key and this app alone.
func (p *planner) planGenerated(ctx context.Context, target *object, expected map[string]any) (*Result, error) {
	app := p.primary
	gens := p.generatorEntries(app, target)
	if len(gens) == 0 {
		return nil, p.generatedRefusal(app, target)
	}
	doc, err := p.req.Change.Patch.document()
	if err != nil {
		return nil, err
	}
	data, _ := doc["data"].(map[string]any)
	ops := map[string][]yamledit.Op{}
	envFiles := map[string][]byte{}
	appended := map[string]int{}
	strategy := ""
	for _, key := range sortedKeys(data) {
		value := data[key].(string)
		in, ok := p.generatedKeyInput(gens, key)
		if !ok {
			return nil, p.generatedRefusal(app, target)
		}
		var file, s string
		switch {
		case in.envFile != "":
			file, s = in.envFile, strategyGeneratorEnvLine
			src, ok := envFiles[file]
			if !ok {
				if src, err = p.t.readFile(file); err != nil {
					return nil, err
				}
			}
			if envFiles[file], ok = setEnvLine(src, in.line, value); !ok {
				return nil, p.generatedRefusal(app, target)
			}
		case in.literal >= 0:
			file, s = in.entry.file, strategyGeneratorLiteral
			ops[file] = append(ops[file], yamledit.Set(yamledit.Path{yamledit.K("configMapGenerator"), yamledit.I(in.entry.index), yamledit.K("literals"), yamledit.I(in.literal)}, key+"="+value))
		default:
			file, s = in.entry.file, strategyNewGeneratorLiteral
			// An index equal to the length appends.
			at := fmt.Sprintf("%s#%d", file, in.entry.index)
			n := len(in.entry.args.LiteralSources) + appended[at]
			appended[at]++
			ops[file] = append(ops[file], yamledit.Set(yamledit.Path{yamledit.K("configMapGenerator"), yamledit.I(in.entry.index), yamledit.K("literals"), yamledit.I(n)}, key+"="+value))
		}
		if p.sharedInput(file) {
			return nil, p.generatedRefusal(app, target)
		}
		if strategy == "" || strategy == s {
			strategy = s
		} else {
			strategy += ", " + s
		}
	}
	newName, err := generatedName(target, expected)
	if err != nil {
		return nil, err
	}
	renamed := map[string]any(deepCopy(expected).(map[string]any))
	if meta, ok := renamed["metadata"].(map[string]any); ok {
		meta["name"] = newName
	}
	oldKey := target.key(app.Namespace)
	newKey := oldKey
	newKey.Name = newName
	exp := &renamedExpectation{primary: app.Name, oldKey: oldKey, newKey: newKey, expected: renamed}
	build := func() (*candidate, error) {
		c := &candidate{strategy: strategy, files: map[string][]byte{}}
		for file, src := range envFiles {
			c.files[file] = src
		}
		for _, file := range sortedKeys(ops) {
			out, ws, err := p.editFile(p.before, file, 0, ops[file]...)
			if err != nil {
				return nil, err
			}
			c.files[file] = out
			c.warnings = append(c.warnings, ws...)
		}
		return c, nil
	}
	files := append(sortedKeys(ops), sortedKeys(envFiles)...)
	out, err := p.tryCandidates(ctx, []candidateBuilder{{strategy: strategy, files: files, build: build}}, exp)
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
	if newName != target.name {
		res.Renamed = newName
	}
	return res, nil
}

// generatedKeyInput finds the one input of the generator entries that sets key,
// or, when none does, the outermost entry for a new literal (literal -1, no env
// file). It is false when a file entry sets the key, when several entries or
// several lines of its env files do, or when the key is new and the outermost
// entry is not of the app's own kustomization.
func (p *planner) generatedKeyInput(gens []generatorEntry, key string) (keyInput, bool) {
	var found []keyInput
	for _, g := range gens {
		for _, src := range g.args.FileSources {
			k, _, named := strings.Cut(src, "=")
			if !named {
				k = path.Base(src)
			}
			if k == key {
				return keyInput{}, false
			}
		}
		for i, lit := range g.args.LiteralSources {
			if k, _, ok := strings.Cut(lit, "="); ok && k == key {
				found = append(found, keyInput{entry: g, literal: i})
			}
		}
		for _, env := range append(append([]string(nil), g.args.EnvSources...), g.args.EnvSource) {
			if env == "" {
				continue
			}
			f := path.Join(g.dir, env)
			for _, line := range p.envFileLines(f, key) {
				found = append(found, keyInput{entry: g, literal: -1, envFile: f, line: line})
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], true
	case 0:
		return keyInput{entry: gens[0], literal: -1}, true
	}
	return keyInput{}, false
}

// envFileLines are the lines (from 1) of a kustomize env file that set key, as
// kustomize reads them: leading space trimmed, comments and blank lines
// skipped, the key everything before the first "=".
func (p *planner) envFileLines(file, key string) []int {
	data, err := p.t.readFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for n, line := range bytes.Split(data, []byte("\n")) {
		if n == 0 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		line = bytes.TrimLeft(bytes.TrimRight(line, "\r"), " \t\v\f")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if k, _, _ := bytes.Cut(line, []byte("=")); string(k) == key {
			out = append(out, n+1)
		}
	}
	return out
}

// setEnvLine replaces the value of line n (from 1) of an env file, keeping
// everything up to its first "=" and its line ending. A value with a line
// break cannot be one line: false.
func setEnvLine(src []byte, n int, value string) ([]byte, bool) {
	if strings.ContainsAny(value, "\r\n") {
		return nil, false
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	if n < 1 || n > len(lines) {
		return nil, false
	}
	line := lines[n-1]
	body := bytes.TrimRight(line, "\r\n")
	ending := line[len(body):]
	var b bytes.Buffer
	for _, l := range lines[:n-1] {
		b.Write(l)
	}
	if i := bytes.IndexByte(body, '='); i >= 0 {
		b.Write(body[:i+1])
	} else {
		b.Write(body)
		b.WriteByte('=')
	}
	b.WriteString(value)
	b.Write(ending)
	for _, l := range lines[n:] {
		b.Write(l)
	}
	return b.Bytes(), true
}

// sharedInput reports whether an app other than the primary one reads file:
// its generator input is then not the app's alone to change.
func (p *planner) sharedInput(file string) bool {
	f := p.t.key(file)
	for _, a := range p.apps {
		if a.Name != p.primary.Name && p.reaches(a, f) {
			return true
		}
	}
	return false
}

// generatedName is the name kustomize gives the generated ConfigMap target
// once its content is expected: its name before the hash suffix, followed by
// kustomize's own hash of expected under that name. A target whose name ends
// in no hash of its content (disableNameSuffixHash) keeps its name.
func generatedName(target *object, expected map[string]any) (string, error) {
	base, suffix, ok := cutLast(target.name, "-")
	if !ok {
		return target.name, nil
	}
	h, err := configMapHash(target.body, base)
	if err != nil {
		return "", err
	}
	if h != suffix {
		return target.name, nil
	}
	h, err = configMapHash(expected, base)
	if err != nil {
		return "", err
	}
	return base + "-" + h, nil
}

// configMapHash is kustomize's name hash of a ConfigMap body named name.
func configMapHash(body map[string]any, name string) (string, error) {
	m := deepCopy(body).(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	meta["name"] = name
	n, err := kyaml.FromMap(m)
	if err != nil {
		return "", fmt.Errorf("hash ConfigMap %s: %w", name, err)
	}
	h, err := (&hasher.Hasher{}).Hash(n)
	if err != nil {
		return "", fmt.Errorf("hash ConfigMap %s: %w", name, err)
	}
	return h, nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// renamedExpectation: the generated ConfigMap oldKey is now newKey with the
// expected body, every reference of the primary app's objects to it names the
// new name, and everything else stays.
type renamedExpectation struct {
	primary        string
	oldKey, newKey objKey
	expected       map[string]any
}

func (e *renamedExpectation) expect(app Application, before map[objKey]*object) (map[objKey]*object, error) {
	if app.Name != e.primary {
		return before, nil
	}
	t, ok := before[e.oldKey]
	if !ok {
		return nil, fmt.Errorf("target %s vanished from the before-render", e.oldKey)
	}
	out := make(map[objKey]*object, len(before))
	for k, o := range before {
		if k == e.oldKey {
			continue
		}
		out[k] = o
		if k.Namespace != e.oldKey.Namespace {
			continue
		}
		if body, changed := renameConfigMapRefs(o, e.oldKey.Name, e.newKey.Name); changed {
			cp := *o
			cp.body = body
			out[k] = &cp
		}
	}
	cp := *t
	cp.name, cp.body = e.newKey.Name, e.expected
	out[e.newKey] = &cp
	return out, nil
}

func (e *renamedExpectation) extra(_ Application, added map[objKey]*object) []string {
	return unexpectedObjects(added)
}

// renameConfigMapRefs is o's body with the references of its pod spec to the
// ConfigMap from renamed to to (volumes, projected sources, env valueFrom
// configMapKeyRef, envFrom configMapRef), the ones references.go knows and
// kustomize rewrites; false when it has none.
func renameConfigMapRefs(o *object, from, to string) (map[string]any, bool) {
	podPath := podSpecPath(o.kind)
	v, ok := getPath(o.body, podPath)
	if pod, isMap := v.(map[string]any); !ok || !isMap || pod["containers"] == nil {
		return nil, false
	}
	body := deepCopy(o.body).(map[string]any)
	v, _ = getPath(body, podPath)
	pod := v.(map[string]any)
	changed := false
	rename := func(m map[string]any, keys ...string) {
		parent, ok := getPath(m, keys[:len(keys)-1])
		pm, isMap := parent.(map[string]any)
		if ok && isMap && pm[keys[len(keys)-1]] == from {
			pm[keys[len(keys)-1]] = to
			changed = true
		}
	}
	for _, vol := range items(pod, "volumes") {
		rename(vol, "configMap", "name")
		for _, s := range items(vol, "projected", "sources") {
			rename(s, "configMap", "name")
		}
	}
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		for _, c := range items(pod, list) {
			for _, env := range items(c, "env") {
				rename(env, "valueFrom", "configMapKeyRef", "name")
			}
			for _, env := range items(c, "envFrom") {
				rename(env, "configMapRef", "name")
			}
		}
	}
	return body, changed
}
