package render

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/hasher"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// Where an edit of a generated ConfigMap's data goes.
const (
	strategyGeneratorLiteral       = "generator literal"
	strategyGeneratorEnvLine       = "generator env file line"
	strategyNewGeneratorLiteral    = "new generator literal"
	strategyRemoveGeneratorLiteral = "removed generator literal"
	strategyRemoveGeneratorEnvLine = "removed generator env file line"
	strategyRemoveGeneratorFile    = "removed generator file"
	strategyGeneratorFile          = "generator file content"
	strategyNewGeneratorMergeEntry = "new generator merge entry"
	strategyNewGeneratorEnvLine    = "new generator env file line"
)

// generatedDataPatch reports whether a change sets data keys of a ConfigMap a
// configMapGenerator makes to strings or removes them (null), and nothing
// else: the change planGenerated makes in the generator's inputs. Anything
// else of a generated object (another field, a Secret) stays refused.
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
		if _, ok := v.(string); !ok && v != nil {
			return false
		}
	}
	return true
}

// keyInput is the one input of the app's generator entries that sets a data key.
type keyInput struct {
	key   string
	entry generatorEntry
	// literal is the index of the literal in the entry's literals, -1 if none.
	literal int
	// file is the index of the files source whose content is the key's
	// value, -1 if none.
	file int
	// envFile and line (from 1) are the env file line, when envFile is set.
	envFile string
	line    int
}

// entryEdit is what planGenerated changes in one generator entry.
type entryEdit struct {
	entry generatorEntry
	// set are new values of literals by index; appended, new literals.
	set      map[int]string
	appended []string
	// removedLiterals and removedFiles are indices of literals and files
	// sources to delete.
	removedLiterals, removedFiles map[int]bool
}

// ops are the edits of the entry's kustomization: values set first, then new
// literals appended (their indices counted before any removal), then items
// removed from the last, so that no edit shifts the index of another. A list
// whose every item goes is removed whole rather than left as "[]".
func (e *entryEdit) ops() []yamledit.Op {
	at := func(field string, i int) yamledit.Path {
		return yamledit.Path{yamledit.K("configMapGenerator"), yamledit.I(e.entry.index), yamledit.K(field), yamledit.I(i)}
	}
	var ops []yamledit.Op
	if e.entry.index < 0 {
		// A new entry (see prepareGenerated), after the kustomization's others.
		entry := yamledit.Path{yamledit.K("configMapGenerator"), yamledit.M("name", e.entry.args.Name)}
		literals := make([]any, len(e.appended))
		for i, lit := range e.appended {
			literals[i] = lit
		}
		return []yamledit.Op{yamledit.Set(entry, yamledit.Mapping{
			{Key: "name", Value: e.entry.args.Name}, {Key: "behavior", Value: e.entry.args.Behavior}, {Key: "literals", Value: literals}})}
	}
	for _, i := range slices.Sorted(maps.Keys(e.set)) {
		ops = append(ops, yamledit.Set(at("literals", i), e.set[i]))
	}
	for k, lit := range e.appended {
		ops = append(ops, yamledit.Set(at("literals", len(e.entry.args.LiteralSources)+k), lit))
	}
	remove := func(field string, removed map[int]bool, all int) {
		if len(removed) == 0 {
			return
		}
		if len(removed) == all {
			ops = append(ops, yamledit.Delete(yamledit.Path{yamledit.K("configMapGenerator"), yamledit.I(e.entry.index), yamledit.K(field)}))
			return
		}
		idx := slices.Sorted(maps.Keys(removed))
		for i := len(idx) - 1; i >= 0; i-- {
			ops = append(ops, yamledit.Delete(at(field, idx[i])))
		}
	}
	remove("literals", e.removedLiterals, len(e.entry.args.LiteralSources)+len(e.appended))
	remove("files", e.removedFiles, len(e.entry.args.FileSources))
	return ops
}

// planGenerated edits the input of a configMapGenerator that sets each data key
// the patch changes: its literal, its env file line, or, for a key no input
// sets, a new literal of the outermost entry; a removed key's literal or env
// file line is deleted, and a key that is a file's whole content loses that
// file's entry in the generator's files, and the file itself when nothing
// else reads it (stillRead; otherwise it stays, and a warning says it is no
// longer read here and what still reads it).
// Kustomize names the ConfigMap by a hash of its content and rewrites every
// reference to it, so the edit is verified against the before-render with the
// ConfigMap's data and name changed and those references renamed, nothing
// else. A new value of a file's key, a key several entries set, or an input
// other apps read too is refused: the edit could not be made for this key and
// this app alone.
// data holds the keys changed: a string value sets one, nil removes it.
func (p *planner) planGenerated(ctx context.Context, target *object, expected, data map[string]any) (*Result, error) {
	g, err := p.prepareGenerated(target, expected, data)
	if err != nil {
		return nil, err
	}
	build := func() (*candidate, error) { return g.build(p.before) }
	out, err := p.tryCandidates(ctx, []candidateBuilder{{strategy: g.strategy, files: g.files, build: build}}, g.exp)
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
		res.Renamed = g.rename.To
		res.Renames = append(res.Renames, *g.rename)
	}
	return res, nil
}

// generatedEdit is the edit of a generator's inputs that changes the data of
// the ConfigMap it makes, prepared by prepareGenerated.
type generatedEdit struct {
	strategy string
	files    []string
	// build makes the edit on the files of v (the tree before the edit, or
	// with another edit of the same change written).
	build func(v *view) (*candidate, error)
	// exp expects the ConfigMap under its new name with its new data, the
	// references to it renamed.
	exp *renamedExpectation
	// rename is the ConfigMap's, nil when it keeps its name.
	rename *Rename
}

// prepareGenerated prepares the edit planGenerated verifies (see there).
func (p *planner) prepareGenerated(target *object, expected, data map[string]any) (*generatedEdit, error) {
	app := p.primary
	gens := p.generatorEntries(app, target)
	if len(gens) == 0 {
		return nil, p.generatedRefusal(app, target, "")
	}
	entries := map[string]*entryEdit{}
	envEdits := map[string]map[int]*string{}
	fileContents := map[string][]byte{}
	var warnings []Warning
	var strategies []string
	var inputs []keyInput
	// dropped are the files sources the edit deletes from their entries.
	var dropped []keyInput
	for _, key := range slices.Sorted(maps.Keys(data)) {
		_, set := data[key].(string)
		ins, ok := p.generatedKeyInputs(gens, key, set)
		if !ok && set {
			return nil, p.generatedRefusal(app, target, fmt.Sprintf("the entry whose value of data key %s wins sets it more than once", key))
		}
		if !ok {
			return nil, p.generatedRefusal(app, target, fmt.Sprintf("no input of the generator that a plan reads sets data key %s", key))
		}
		inputs = append(inputs, ins...)
	}
	for _, in := range inputs {
		key := in.key
		value, set := data[key].(string)
		if set && p.othersMayRead(in.inputFile()) {
			// The input of an inner entry another app may read too (one of
			// the plan, or a base's, see othersMayRead) stays as it is: the
			// app's outermost entry, whose merge wins, sets the key, or a new
			// behavior: merge entry of the app's own kustomization.
			outer := gens[0]
			root := p.reach(app).kust.nodes[0]
			switch {
			case (in.entry.file != outer.file || in.entry.index != outer.index) && !p.othersMayRead(outer.file):
				in = keyInput{key: key, entry: outer, literal: -1, file: -1}
			case outer.file != root.file && p.sharedInput(root.file) == "":
				in = keyInput{key: key, literal: -1, file: -1, entry: generatorEntry{file: root.file, dir: root.dir, index: -1,
					args: types.GeneratorArgs{Name: outer.args.Name, Behavior: "merge"}}}
			}
		}
		if set && in.literal < 0 && in.file < 0 && in.envFile == "" && in.entry.index >= 0 {
			// A new key of an entry that reads env files goes on a line of its
			// last one, where a person adds it, rather than in a literals
			// block beside them. Not of a file another generator entry reads
			// too (a worker's ConfigMap beside the api's): the line would be
			// that one's key as well, and a literal is the entry's alone.
			if env := lastEnvFile(in.entry); env != "" && !p.othersMayRead(env) && !p.readByOtherEntry(env, in.entry) {
				in.envFile, in.line = env, 0
			}
		}
		at := fmt.Sprintf("%s#%d", in.entry.file, in.entry.index)
		e := entries[at]
		if e == nil && in.envFile == "" {
			e = &entryEdit{entry: in.entry, set: map[int]string{}, removedLiterals: map[int]bool{}, removedFiles: map[int]bool{}}
			entries[at] = e
		}
		var file, s string
		switch {
		case in.envFile != "":
			file, s = in.envFile, strategyGeneratorEnvLine
			switch {
			case !set:
				s = strategyRemoveGeneratorEnvLine
			case in.line == 0:
				s = strategyNewGeneratorEnvLine
			}
			if set && strings.ContainsAny(value, "\r\n") {
				return nil, p.generatedRefusal(app, target, fmt.Sprintf("the new value of data key %s has a line break, and an env file line holds one line", key))
			}
			if envEdits[file] == nil {
				envEdits[file] = map[int]*string{}
			}
			if set && in.line == 0 {
				// A line appended to the file: line -1 for the first, -2 for the
				// next (see editEnvLines).
				line := key + "=" + value
				envEdits[file][-1-appendedLines(envEdits[file])] = &line
			} else if set {
				envEdits[file][in.line] = &value
			} else {
				envEdits[file][in.line] = nil
			}
		case in.file >= 0 && set:
			file, s = path.Join(in.entry.dir, fileSourcePath(in.entry.args.FileSources[in.file])), strategyGeneratorFile
			fileContents[file] = []byte(value)
		case in.file >= 0:
			file, s = in.entry.file, strategyRemoveGeneratorFile
			e.removedFiles[in.file] = true
			dropped = append(dropped, in)
		case in.literal >= 0 && set:
			file, s = in.entry.file, strategyGeneratorLiteral
			e.set[in.literal] = key + "=" + value
		case in.literal >= 0:
			file, s = in.entry.file, strategyRemoveGeneratorLiteral
			e.removedLiterals[in.literal] = true
		case in.entry.index < 0:
			file, s = in.entry.file, strategyNewGeneratorMergeEntry
			e.appended = append(e.appended, key+"="+value)
		default:
			file, s = in.entry.file, strategyNewGeneratorLiteral
			e.appended = append(e.appended, key+"="+value)
		}
		if other := p.sharedInput(file); other != "" {
			return nil, p.generatedRefusal(app, target, fmt.Sprintf("%s, the input of data key %s, is read by application %s too", file, key, other))
		}
		if !slices.Contains(strategies, s) {
			strategies = append(strategies, s)
		}
	}
	strategy := strings.Join(strategies, ", ")
	newName, err := generatedName(target, expected)
	if err != nil {
		return nil, err
	}
	if newName == target.name {
		w, err := p.unrolledReaders(target, gens)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	renamed := map[string]any(deepCopy(expected).(map[string]any))
	if meta, ok := renamed["metadata"].(map[string]any); ok {
		meta["name"] = newName
	}
	oldKey := target.key(app.Namespace)
	newKey := oldKey
	newKey.Name = newName
	exp := &renamedExpectation{primary: app.Name, oldKey: oldKey, newKey: newKey, expected: renamed}
	ops := map[string][]yamledit.Op{}
	for _, at := range slices.Sorted(maps.Keys(entries)) {
		e := entries[at]
		if eo := e.ops(); len(eo) > 0 {
			ops[e.entry.file] = append(ops[e.entry.file], eo...)
		}
	}
	build := func(v *view) (*candidate, error) {
		c := &candidate{strategy: strategy, files: map[string][]byte{}, warnings: append([]Warning(nil), warnings...)}
		for file, edits := range envEdits {
			src, err := v.read(file)
			if err != nil {
				return nil, err
			}
			out, ok := editEnvLines(src, edits)
			if !ok {
				return nil, p.generatedRefusal(app, target, "an env file line to edit is not in the file")
			}
			c.files[file] = out
		}
		for file, content := range fileContents {
			c.files[file] = content
		}
		for _, file := range slices.Sorted(maps.Keys(ops)) {
			out, ws, err := p.editFile(v, file, 0, ops[file]...)
			if err != nil {
				return nil, err
			}
			c.files[file] = out
			c.warnings = append(c.warnings, ws...)
		}
		judged := map[string]bool{}
		for _, in := range dropped {
			f := path.Join(in.entry.dir, fileSourcePath(in.entry.args.FileSources[in.file]))
			if _, edited := c.files[f]; edited || judged[f] {
				continue
			}
			judged[f] = true
			kept := p.stillRead(f, c.files)
			if kept == "" {
				c.files[f] = nil
				continue
			}
			c.warnings = append(c.warnings, Warning{
				Code:        "unread_file",
				Where:       f,
				Message:     fmt.Sprintf("no longer read by the configMapGenerator entry %q of %s, whose data key %s it was; the file stays, since %s", in.entry.args.Name, in.entry.file, in.key, kept),
				Alternative: "delete the file once nothing reads it",
			})
		}
		return c, nil
	}
	files := append(append(slices.Sorted(maps.Keys(ops)), slices.Sorted(maps.Keys(envEdits))...), slices.Sorted(maps.Keys(fileContents))...)
	for _, in := range dropped {
		files = append(files, path.Join(in.entry.dir, fileSourcePath(in.entry.args.FileSources[in.file])))
	}
	g := &generatedEdit{strategy: strategy, files: files, build: build, exp: exp}
	if newName != target.name {
		g.rename = &Rename{
			App: app.Name, APIVersion: target.apiVersion, Kind: target.kind, Namespace: oldKey.Namespace,
			From: target.name, To: newName, Generator: generatorOf(gens),
		}
	}
	return g, nil
}

// generatorOf names the entry of gens that creates the object (the others
// merge into it or replace it).
func generatorOf(gens []generatorEntry) string {
	g := gens[len(gens)-1]
	for _, e := range gens {
		if e.args.Behavior == "" || e.args.Behavior == "create" {
			g = e
			break
		}
	}
	return fmt.Sprintf("configMapGenerator %q of %s", g.args.Name, g.file)
}

// generatedKeyInputs are the inputs of the generator entries that an edit of
// key changes. A new value goes to the input of the outermost entry that sets
// the key, whose merge wins over the entries inside it, or, when none does, to a
// new literal of the outermost entry (literal and file -1, no env file). A
// removal deletes every input that sets the key, since each inner one would
// show through. An entry of behavior replace hides the entries inside it.
// False when the entry a value goes to sets the key more than once, or when
// no input the plan reads sets a key to remove.
func (p *planner) generatedKeyInputs(gens []generatorEntry, key string, set bool) ([]keyInput, bool) {
	var found []keyInput
	for _, g := range gens {
		var here []keyInput
		for i, src := range g.args.FileSources {
			k, _, named := strings.Cut(src, "=")
			if !named {
				k = path.Base(src)
			}
			if k == key {
				here = append(here, keyInput{key: key, entry: g, literal: -1, file: i})
			}
		}
		for i, lit := range g.args.LiteralSources {
			if k, _, ok := strings.Cut(lit, "="); ok && k == key {
				here = append(here, keyInput{key: key, entry: g, literal: i, file: -1})
			}
		}
		for _, f := range envFiles(g.dir, g.args.KvPairSources) {
			for _, line := range p.envFileLines(f, key) {
				here = append(here, keyInput{key: key, entry: g, literal: -1, file: -1, envFile: f, line: line})
			}
		}
		if set && len(here) > 0 {
			return here, len(here) == 1
		}
		found = append(found, here...)
		if g.args.Behavior == "replace" {
			break
		}
	}
	if set {
		return []keyInput{{key: key, entry: gens[0], literal: -1, file: -1}}, true
	}
	return found, len(found) > 0
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

// editEnvLines edits lines of an env file by number (from 1): a value
// replaces everything after the line's first "=", keeping its line ending; nil
// deletes the line with its ending. A value with a line break cannot be one
// line, and a line beyond the file cannot be edited: false. Negative numbers
// are whole lines appended (-1 first, see appendedLines).
func editEnvLines(src []byte, edits map[int]*string) ([]byte, bool) {
	if n := appendedLines(edits); n > 0 {
		// Lines appended (whole KEY=value lines at -1, -2, …), after the
		// file's last line, in that order.
		rest := maps.Clone(edits)
		for i := 1; i <= n; i++ {
			delete(rest, -i)
		}
		out, ok := editEnvLines(src, rest)
		if !ok {
			return nil, false
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		for i := 1; i <= n; i++ {
			add := edits[-i]
			if add == nil || strings.ContainsAny(*add, "\r\n") {
				return nil, false
			}
			out = append(out, *add+"\n"...)
		}
		return out, true
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	var b bytes.Buffer
	for n, line := range lines {
		v, edited := edits[n+1]
		switch {
		case !edited:
			b.Write(line)
		case v == nil:
		case strings.ContainsAny(*v, "\r\n"):
			return nil, false
		default:
			body := bytes.TrimRight(line, "\r\n")
			if i := bytes.IndexByte(body, '='); i >= 0 {
				b.Write(body[:i+1])
			} else {
				b.Write(body)
				b.WriteByte('=')
			}
			b.WriteString(*v)
			b.Write(line[len(body):])
		}
	}
	for n := range edits {
		if n < 1 || n > len(lines) {
			return nil, false
		}
	}
	return b.Bytes(), true
}

// stillRead says what reads the repository file f once the kustomizations
// edited (new contents by path) are written, "" when nothing does and the
// file can go with the edit: the kustomizations of the primary app (an
// edited one as edited: another entry or kustomization may list the same
// file), and every other app of the repository by its reach. A file the plan
// does not know every reader of, or reached through a symlink (deleting it
// would break, or not delete, what the link names), is kept, and the reason
// says why.
func (p *planner) stillRead(f string, edited map[string][]byte) string {
	rel, ok := cleanRel(f)
	if !ok {
		return "it lies outside the repository"
	}
	st := p.t.stat(rel)
	switch {
	case st.err != nil || st.kind != kindFile:
		return "it is not a regular file of the repository"
	case st.canon != rel || st.dangling:
		return "the generator reads it through a symlink"
	}
	for _, a := range p.apps {
		if a.Name != p.primary.Name && p.reaches(a, rel) {
			return fmt.Sprintf("application %s reads it", a.Name)
		}
	}
	r := p.reach(p.primary)
	if r.err != nil || r.kust == nil {
		return fmt.Sprintf("what else application %s reads is not known", p.primary.Name)
	}
	for _, n := range r.kust.nodes {
		files := n.files
		if data, ok := edited[n.file]; ok {
			after, err := p.t.resolveKustomization(n.dir, n.file, data)
			if err != nil {
				return fmt.Sprintf("what the edited %s reads is not known", n.file)
			}
			files = after.files
			sort.Strings(files)
		}
		if _, ok := slices.BinarySearch(files, rel); ok {
			if _, ok := edited[n.file]; ok {
				return fmt.Sprintf("%s still reads it", n.file)
			}
			return fmt.Sprintf("%s reads it", n.file)
		}
	}
	return ""
}

// appendedLines counts the lines editEnvLines appends: edits -1, -2, ….
func appendedLines(edits map[int]*string) int {
	n := 0
	for {
		if _, ok := edits[-1-n]; !ok {
			return n
		}
		n++
	}
}

// othersMayRead reports whether a generator input may be read by another app
// than the primary one: one of the plan reads it (sharedInput), or it lies
// outside the folder of the app's own kustomization, in a base or component,
// which is there to be shared, often by the overlays of other environments
// that another cluster's Argo CD deploys and this plan does not render.
func (p *planner) othersMayRead(file string) bool {
	if p.sharedInput(file) != "" {
		return true
	}
	return !inOverlayFolder(p.reach(p.primary).kust, p.t.key(file))
}

// inOverlayFolder reports whether file (a canonical path) is the app's own
// kustomization's: the kustomization of the build whose folder holds it most
// closely is the app's, not a base or component in a folder of its own, even
// one below the app's (an app at the repository's root including base/).
func inOverlayFolder(reach *kustReach, file string) bool {
	owner, longest := -1, -1
	for i, n := range reach.nodes {
		if n.dir != "." && !strings.HasPrefix(file, n.dir+"/") {
			continue
		}
		l := len(n.dir)
		if n.dir == "." {
			l = 0
		}
		if l > longest {
			owner, longest = i, l
		}
	}
	return owner == 0
}

// readByOtherEntry reports whether file is an input (an env file, a files
// source) of a generator entry of the primary app's build other than g, a
// configMapGenerator entry: of another ConfigMap, or of a Secret.
func (p *planner) readByOtherEntry(file string, g generatorEntry) bool {
	r := p.reach(p.primary).kust
	if r == nil {
		return true
	}
	reads := func(n *kustNode, a types.GeneratorArgs) bool {
		srcs := envFiles(n.dir, a.KvPairSources)
		for _, f := range a.FileSources {
			srcs = append(srcs, path.Join(n.dir, fileSourcePath(f)))
		}
		return slices.Contains(srcs, file)
	}
	for _, n := range r.nodes {
		for i, c := range n.k.ConfigMapGenerator {
			if (n.file != g.file || i != g.index) && reads(n, c.GeneratorArgs) {
				return true
			}
		}
		for _, s := range n.k.SecretGenerator {
			if reads(n, s.GeneratorArgs) {
				return true
			}
		}
	}
	return false
}

// envFiles are the env files a generator's sources read (envs, then the
// older env), joined to dir, the kustomization's folder, in kustomize's order.
func envFiles(dir string, s types.KvPairSources) []string {
	var out []string
	for _, e := range append(slices.Clone(s.EnvSources), s.EnvSource) {
		if e != "" {
			out = append(out, path.Join(dir, e))
		}
	}
	return out
}

// lastEnvFile is the last env file a generator entry reads, "" when it reads
// none.
func lastEnvFile(g generatorEntry) string {
	envs := envFiles(g.dir, g.args.KvPairSources)
	if len(envs) == 0 {
		return ""
	}
	return envs[len(envs)-1]
}

// sharedInput is the first app other than the primary one that reads file:
// its generator input is then not the app's alone to change.
func (p *planner) sharedInput(file string) string { return p.deployedBy(file) }

// inputFile is the file an edit of the input changes: its env file, its files
// source's file, else the entry's kustomization (a literal).
func (in keyInput) inputFile() string {
	switch {
	case in.envFile != "":
		return in.envFile
	case in.file >= 0:
		return path.Join(in.entry.dir, fileSourcePath(in.entry.args.FileSources[in.file]))
	}
	return in.entry.file
}

// fileSourcePath is the file a configMapGenerator files source reads
// ("key=path" or "path").
func fileSourcePath(src string) string {
	if _, f, named := strings.Cut(src, "="); named {
		return f
	}
	return src
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

// unrolledReaders warns, for a generated ConfigMap that keeps its name when
// its data changes (generatorOptions or the entry's options set
// disableNameSuffixHash), that the workloads of the app that read it are not
// rolled by the edit: a container reads env and envFrom values when it
// starts, and mounted files follow after the kubelet's sync (never through
// subPath), so the new data reaches running pods only when they restart.
func (p *planner) unrolledReaders(target *object, gens []generatorEntry) ([]Warning, error) {
	app := p.primary
	objs, err := p.render(p.before, app)
	if err != nil {
		return nil, err
	}
	want := target.key(app.Namespace)
	var readers []string
	for _, o := range objs {
		k := o.key(app.Namespace)
		for _, r := range namedReferences(o, k.Namespace) {
			if r.key == want {
				readers = append(readers, o.kind+" "+o.name)
				break
			}
		}
	}
	if len(readers) == 0 {
		return nil, nil
	}
	who := readers[0] + ", which reads it, is"
	if len(readers) > 1 {
		who = strings.Join(readers, ", ") + ", which read it, are"
	}
	return []Warning{{
		Code:        "no_rollout",
		Where:       gens[0].file,
		Message:     fmt.Sprintf("ConfigMap %s keeps its name (disableNameSuffixHash), so %s not restarted by the change: containers read env and envFrom values when they start, and mounted files change only after the kubelet's sync (never through subPath)", target.name, who),
		Alternative: "restart the workloads after the sync (kubectl rollout restart), or let kustomize suffix the name with its hash",
	}}, nil
}
