package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/kukie/kukie-gitops/render/yamledit"
	"github.com/kukie/kukie-gitops/textcut"
)

// Strategies of a Helm app.
const (
	strategyValuesKey    = "values key"
	strategyNewValuesKey = "new values key"
)

// maxHelmCandidates bounds how many values keys one change tries: each try
// renders every app the values file reaches, twice.
const maxHelmCandidates = 24

// fieldChange is one subtree of the target that the change alters: old is what
// the chart renders there now (nil when the field is new), new what it must.
type fieldChange struct {
	path     []string
	old, new any
}

// targetChanges lists the smallest subtrees where before and after differ, each
// with its enclosing subtrees (innermost first): a values key may hold the field
// itself or a structure around it (a resources block, an env list).
func targetChanges(before, after any, at []string, out *[][]fieldChange) {
	bm, bok := before.(map[string]any)
	am, aok := after.(map[string]any)
	if bok && aok {
		for _, k := range unionStrings(slices.Sorted(maps.Keys(bm)), slices.Sorted(maps.Keys(am))) {
			if !equalValues(bm[k], am[k]) {
				targetChanges(bm[k], am[k], append(append([]string(nil), at...), k), out)
			}
		}
		return
	}
	bl, bok := before.([]any)
	al, aok := after.([]any)
	if bok && aok && len(bl) == len(al) {
		for i := range bl {
			if !equalValues(bl[i], al[i]) {
				targetChanges(bl[i], al[i], append(append([]string(nil), at...), strconv.Itoa(i)), out)
			}
		}
		return
	}
	*out = append(*out, []fieldChange{{path: at, old: before, new: after}})
}

func unionStrings(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(a, b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// withEnclosing adds to each change the subtrees that enclose it, up to the
// container (or the spec) that holds it.
func withEnclosing(target, expected map[string]any, chains [][]fieldChange) [][]fieldChange {
	for i, chain := range chains {
		p := chain[0].path
		for depth := len(p) - 1; depth >= 1; depth-- {
			up := p[:depth]
			last := up[len(up)-1]
			if last == "containers" || last == "initContainers" || last == "spec" || last == "template" {
				break
			}
			chain = append(chain, fieldChange{path: up, old: lookupPath(target, up), new: lookupPath(expected, up)})
			if _, isIndex := strconv.Atoi(last); isIndex == nil {
				break // a container: the keys inside it are values of their own
			}
		}
		chains[i] = chain
	}
	return chains
}

func lookupPath(v any, p []string) any {
	for _, s := range p {
		switch x := v.(type) {
		case map[string]any:
			v = x[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// valuesLeaf is one node of a values file.
type valuesLeaf struct {
	file  string
	doc   int
	path  yamledit.Path
	value any
	text  string // a scalar's text, as written
	node  *yaml.Node
}

// valuesLeaves lists every node of a values file with its path, in document order.
func valuesLeaves(file string, data []byte) ([]valuesLeaf, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []valuesLeaf
	for doc := 0; ; doc++ {
		var root yaml.Node
		if err := dec.Decode(&root); err != nil {
			break
		}
		if len(root.Content) == 0 {
			continue
		}
		var walk func(n *yaml.Node, p yamledit.Path, depth int)
		walk = func(n *yaml.Node, p yamledit.Path, depth int) {
			if depth > MaxDepth {
				return
			}
			var v any
			if err := n.Decode(&v); err != nil {
				return
			}
			l := valuesLeaf{file: file, doc: doc, path: append(yamledit.Path(nil), p...), value: normalize(v), node: n}
			if n.Kind == yaml.ScalarNode {
				l.text = n.Value
			}
			out = append(out, l)
			switch n.Kind {
			case yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					walk(n.Content[i+1], append(p, yamledit.K(n.Content[i].Value)), depth+1)
				}
			case yaml.SequenceNode:
				for i, c := range n.Content {
					walk(c, append(p, yamledit.I(i)), depth+1)
				}
			case yaml.AliasNode:
				// An alias repeats its anchor: the anchor is the place to edit.
			}
		}
		walk(root.Content[0], nil, 0)
	}
	return out, nil
}

// sameValue reports whether a values node holds what the chart renders: equal
// structures, or a scalar whose text is the rendered scalar (a tag written 1.25
// renders as "1.25").
func sameValue(l valuesLeaf, rendered any) bool {
	if rendered == nil || len(l.path) == 0 {
		return false
	}
	if l.node.Kind == yaml.ScalarNode {
		switch r := rendered.(type) {
		case map[string]any, []any:
			return false
		case string:
			return l.text == r
		default:
			return l.text == fmt.Sprint(r) || equalValues(l.value, rendered)
		}
	}
	return equalValues(l.value, rendered)
}

// withinStringSets are the sets of the scalar leaves a chart writes inside a
// longer string ("redis://{{ .Values.redis.host }}:{{ .Values.redis.port }}/0"):
// a leaf whose text, at some place in the old string, covers all that the
// change alters there is set to what the new string holds in its place (the
// old string's text around it kept). Rendering decides whether the chart
// wrote that key there.
func withinStringSets(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	oldText, ok1 := fc.old.(string)
	newText, ok2 := fc.new.(string)
	if !ok1 || !ok2 || oldText == newText {
		return nil
	}
	prefix, suffix := 0, 0
	for prefix < len(oldText) && prefix < len(newText) && oldText[prefix] == newText[prefix] {
		prefix++
	}
	for suffix < len(oldText)-prefix && suffix < len(newText)-prefix && oldText[len(oldText)-1-suffix] == newText[len(newText)-1-suffix] {
		suffix++
	}
	var out []helmValueSet
	for _, l := range leaves {
		if l.node.Kind != yaml.ScalarNode || len(l.path) == 0 || l.text == "" || l.text == oldText {
			continue
		}
		for i := strings.Index(oldText, l.text); i >= 0; {
			after := len(oldText) - i - len(l.text) // the old text after the leaf's
			if i <= prefix && after <= suffix && i <= len(newText)-after {
				value := newText[i : len(newText)-after]
				if typed, ok := ofLeafType(l, value); ok {
					out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: typed})
				}
				out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: value})
				break
			}
			next := strings.Index(oldText[i+1:], l.text)
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	return out
}

// ofLeafType is rendered, a string the chart rendered from the boolean,
// integer or float leaf l holds ({{ .Values.auth.enabled | quote }}), as a value of
// l's type, when it spells one: the key keeps its type, which a reviewer
// expects and which another template's {{ if }} reads ("false" is true
// there). ok is false when there is no such value; the string itself is
// still tried after it.
func ofLeafType(l valuesLeaf, rendered any) (any, bool) {
	text, isString := rendered.(string)
	if !isString || l.node.Kind != yaml.ScalarNode {
		return nil, false
	}
	switch l.value.(type) {
	case bool:
		if text == "true" || text == "false" {
			return text == "true", true
		}
	case int, int64, uint64:
		if n, err := strconv.ParseInt(text, 10, 64); err == nil && strconv.FormatInt(n, 10) == text {
			return int(n), true
		}
	case float64:
		// As a template prints a float (0.75, 1e-07): a text it cannot print
		// ("2.0", "Inf") is no float the chart rendered.
		if f, err := strconv.ParseFloat(text, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && strconv.FormatFloat(f, 'g', -1, 64) == text {
			return f, true
		}
	}
	return nil, false
}

// helmValueSet is one candidate edit of a values file.
type helmValueSet struct {
	file  string
	doc   int
	path  yamledit.Path
	value any
	fresh bool // the key is new in the file
	// guess: a key the chart's templates read that nothing sets (see
	// unreadKeySets), which only rendering tells right.
	guess bool
}

// helmBuilders finds the values keys that render the target's changed fields:
// nodes of the app's values files (the last file first) that hold what the chart
// renders there now, set to what it must render; for an image, the keys of the
// chart's split (a tag or digest of its own). A key an earlier values file sets
// is then tried as a new key of the app's last values file (which wins over it,
// and which the other apps of a shared file do not read); a value the values
// files do not hold but the chart's defaults do is added to the app's last values
// file at the defaults' key. Each candidate is verified by rendering.
func (p *planner) helmBuilders(target *object, expected map[string]any) ([]candidateBuilder, error) {
	app := p.primary
	editable, defaults, err := p.helmEditableFiles()
	if err != nil {
		return nil, err
	}
	var chains [][]fieldChange
	targetChanges(target.body, expected, nil, &chains)
	chains = withEnclosing(target.body, expected, chains)

	// The leaves of every values file of the app, the last file's first,
	// matched at once: a key holding the whole value in an earlier file comes
	// before a key the last file writes inside a longer string (tried last,
	// see matchLeaves), which is only a guess at what the chart wrote there.
	var all []valuesLeaf
	for i := len(editable) - 1; i >= 0; i-- {
		leaves, err := p.valuesFileLeaves(editable[i])
		if err != nil {
			return nil, withApp(err, app.Name)
		}
		all = append(all, leaves...)
	}

	// Each chain is one changed field: all of them must change, so a candidate
	// sets one key per chain; with several chains (an env change of several
	// variables) the keys found first for each are combined.
	setsFor := func(chain []fieldChange) ([]helmValueSet, error) {
		var sets []helmValueSet
		for _, fc := range chain {
			sets = append(sets, matchLeaves(all, fc)...)
		}
		// A key an earlier file sets may be set again in the app's last file,
		// which wins: the edit then stays with this app. Where the earlier file
		// is shared (see sharedValuesFile), that comes first, as a person
		// changing one environment would write it: an edit of the shared file
		// would reach every release that reads it, those of other clusters
		// too, which this plan cannot render. Else the key is changed where
		// it is set, and set again in the last file only if that fails.
		if len(editable) > 1 {
			last := editable[len(editable)-1]
			var ordered, later []helmValueSet
			for _, s := range sets {
				if s.file == last {
					ordered = append(ordered, s)
					continue
				}
				again := s
				again.file, again.doc, again.fresh = last, 0, true
				if p.sharedValuesFile(s.file, defaults) && keysOnly(s.path) {
					ordered = append(ordered, again, s)
				} else {
					ordered = append(ordered, s)
					later = append(later, again)
				}
			}
			sets = append(ordered, later...)
		}
		if len(editable) > 0 && (len(editable) > 1 || editable[0] != defaults) {
			leaves, _, err := p.defaultLeaves(defaults)
			if err != nil {
				return nil, withApp(err, app.Name)
			}
			sets = append(sets, freshSets(leaves, chain, editable[len(editable)-1])...)
		}
		// A value only a subchart vendored under charts/ holds by default is
		// set under the subchart's key in the app's last values file.
		if len(editable) > 0 {
			leaves, err := p.subchartDefaultLeaves(path.Dir(defaults))
			if err != nil {
				return nil, withApp(err, app.Name)
			}
			sets = append(sets, freshSets(leaves, chain, editable[len(editable)-1])...)
		}
		return dedupeSets(sets), nil
	}
	var perChain [][]helmValueSet
	for _, chain := range chains {
		sets, err := setsFor(chain)
		if err != nil {
			return nil, err
		}
		perChain = append(perChain, sets)
	}
	// One builder per candidate of the first chain, the other chains taking their
	// first candidate: the common case is a single chain.
	var builders []candidateBuilder
	for i, first := range firstChain(perChain) {
		if i == maxHelmCandidates {
			break
		}
		sets := []helmValueSet{first}
		for _, others := range perChain[1:] {
			sets = append(sets, others[0])
		}
		builders = append(builders, p.valuesBuilder(sets))
	}
	// An env change that adds, removes or renames variables changes several
	// items of the list: the key that holds the whole list (a mapping of names
	// to values, see envMapSets) is one edit for all of them, tried after the
	// keys of single items.
	if envChain, ok := envListChange(target.body, expected, chains); ok {
		sets, err := setsFor(envChain)
		if err != nil {
			return nil, err
		}
		for _, s := range sets {
			builders = append(builders, p.valuesBuilder([]helmValueSet{s}))
		}
	}
	guesses, err := p.unreadKeyBuilders(target, all, editable, defaults, chains, perChain, maxHelmCandidates-len(builders))
	if err != nil {
		return nil, err
	}
	return append(builders, guesses...), nil
}

// unreadKeyBuilders are the last candidates of a Helm change: keys the chart's
// templates read that no values file nor default sets, added to the app's last
// values file (see helmrefs.go), for the first changed field, the other fields
// taking their first candidate. At most room of them, and maxUnreadKeyGuesses.
// fileLeaves are the leaves of the app's values files, read already.
func (p *planner) unreadKeyBuilders(target *object, fileLeaves []valuesLeaf, editable []string, defaults string, chains [][]fieldChange, perChain [][]helmValueSet, room int) ([]candidateBuilder, error) {
	if room <= 0 || len(editable) == 0 || len(chains) == 0 {
		return nil, nil
	}
	for _, others := range perChain[1:] {
		if len(others) == 0 {
			return nil, nil
		}
	}
	refs := p.chartRefs(target.kind)
	if len(refs) == 0 {
		return nil, nil
	}
	leaves, err := p.appValuesLeaves(fileLeaves, defaults)
	if err != nil {
		return nil, withApp(err, p.primary.Name)
	}
	refs = unreadRefs(refs, leaves)
	var builders []candidateBuilder
	for _, s := range unreadKeySets(refs, chains[0], editable[len(editable)-1], min(room, maxUnreadKeyGuesses)) {
		sets := []helmValueSet{s}
		for _, others := range perChain[1:] {
			sets = append(sets, others[0])
		}
		builders = append(builders, p.valuesBuilder(sets))
	}
	return builders, nil
}

// chartRefs are the .Values paths the templates of the primary Helm app's
// chart and of its subcharts read (see chartValuesRefs), kind the target's:
// those vendored under its charts/, and those its Chart.lock pins, fetched as
// the render fetches them.
func (p *planner) chartRefs(kind string) []valuesRef {
	ch, err := p.appChart()
	if err != nil {
		// The render loaded it; a chart that cannot be read again here has
		// no keys to guess, and the other candidates' outcome stands.
		return nil
	}
	subs := ch.Dependencies()
	if len(ch.Metadata.Dependencies) > 0 {
		// The render fetched them within the bound of the chart's archives,
		// so a bound of their own holds them again. ch is left as it is: a
		// chart from a Helm repository is the plan's one copy. One that
		// cannot be had again only has no keys to guess.
		archives := newArchiveBudget()
		if fetched, err := fetchDependencies(p.ctx, ch, p.primary.Path, &archives); err == nil {
			subs = slices.Concat(subs, fetched)
		}
	}
	budget := newRefBudget()
	return chartValuesRefs(ch, subs, nil, kind, &budget, 0)
}

// appChart is the primary Helm app's chart as its templates are written: the
// chart directory of the repository (with the subcharts vendored under its
// charts/), or the chart it deploys from a Helm repository.
func (p *planner) appChart() (*chart.Chart, error) {
	if p.primary.Chart != nil {
		return p.remoteChart()
	}
	root, ok := cleanRel(p.primary.Path)
	if !ok {
		return nil, refuse(CodePathEscape, "application %s: path %q leaves the repository", p.primary.Name, p.primary.Path)
	}
	canon, err := p.t.canonical(root)
	if err != nil {
		return nil, err
	}
	ch, _, err := loadChart(p.before, canon)
	return ch, err
}

// appValuesLeaves are the leaves of every values the primary Helm app reads:
// those of its values files (fileLeaves), the chart's defaults and those of
// its vendored subcharts.
func (p *planner) appValuesLeaves(fileLeaves []valuesLeaf, defaults string) ([]valuesLeaf, error) {
	all := slices.Clone(fileLeaves)
	l, _, err := p.defaultLeaves(defaults)
	if err != nil {
		return nil, err
	}
	all = append(all, l...)
	sub, err := p.subchartDefaultLeaves(path.Dir(defaults))
	if err != nil {
		return nil, err
	}
	return append(all, sub...), nil
}

// subchartDefaultLeaves returns the values leaves of the default values of each
// chart vendored under the charts/ of the chart at root (a directory or an
// archive), each
// under the key the parent's values give it: its alias in the parent's
// dependencies, else its name.
func (p *planner) subchartDefaultLeaves(root string) ([]valuesLeaf, error) {
	if p.primary.Chart != nil {
		return p.remoteSubchartLeaves()
	}
	dir := path.Join(root, "charts")
	if k, _ := p.before.kind(dir); k != kindDir {
		return nil, nil
	}
	names, err := p.before.list(dir)
	if err != nil {
		return nil, nil
	}
	var deps []*chart.Dependency
	if data, err := p.before.read(path.Join(root, "Chart.yaml")); err == nil {
		var meta struct {
			Dependencies []struct{ Name, Alias string } `yaml:"dependencies"`
		}
		if yaml.Unmarshal(data, &meta) == nil {
			for _, d := range meta.Dependencies {
				deps = append(deps, &chart.Dependency{Name: d.Name, Alias: d.Alias})
			}
		}
	}
	keys := subchartKeys(deps)
	var out []valuesLeaf
	budget := newArchiveBudget()
	for _, n := range names {
		sub := path.Join(dir, n)
		values := path.Join(sub, "values.yaml")
		var name string
		var data []byte
		if k, _ := p.before.kind(sub); k == kindFile && subchartArchive(path.Join("charts", n)) {
			// An archive, as helm dependency build leaves it: expanded within
			// the bound a render's archives have.
			archive, err := p.before.read(sub)
			if err != nil {
				return nil, err
			}
			if _, err := checkChartArchive(sub, archive, &budget); err != nil {
				return nil, err
			}
			ch, err := loader.LoadArchive(bytes.NewReader(archive))
			if err != nil {
				continue
			}
			for _, f := range ch.Raw {
				if f.Name == "values.yaml" {
					name, data, values = ch.Name(), f.Data, sub+" (values.yaml)"
				}
			}
			// The file came out of the archive, past the reader's bounds.
			if scan := scanYAML(values, data); scan.err != nil {
				return nil, scan.err
			}
		} else if k, _ := p.before.kind(values); k == kindFile {
			meta, err := p.before.read(path.Join(sub, "Chart.yaml"))
			if err != nil {
				continue
			}
			var m struct{ Name string }
			if yaml.Unmarshal(meta, &m) != nil {
				continue
			}
			if data, err = p.before.read(values); err != nil {
				return nil, err
			}
			name = m.Name
		}
		if name == "" || data == nil {
			continue
		}
		leaves, err := subchartLeaves(keys(name), values, data)
		if err != nil {
			return nil, err
		}
		out = append(out, leaves...)
	}
	return out, nil
}

// subchartKeys gives, for a subchart's name, the keys its parent's values give
// it, one for each dependency of deps (the parent's) naming it: the entry's
// alias, else its name. A chart the parent depends on twice, under two
// aliases, is rendered twice, each copy reading its defaults under its own
// key; a chart no dependency names is rendered under its name.
func subchartKeys(deps []*chart.Dependency) func(name string) []string {
	byName := map[string][]string{}
	for _, d := range deps {
		if d == nil {
			continue
		}
		key := d.Name
		if d.Alias != "" {
			key = d.Alias
		}
		if !slices.Contains(byName[d.Name], key) {
			byName[d.Name] = append(byName[d.Name], key)
		}
	}
	return func(name string) []string {
		if keys, ok := byName[name]; ok {
			return keys
		}
		return []string{name}
	}
}

// subchartLeaves are the leaves of a subchart's default values (data, read from
// file), under each of keys, the keys its parent's values give it.
func subchartLeaves(keys []string, file string, data []byte) ([]valuesLeaf, error) {
	leaves, err := valuesLeaves(file, data)
	if err != nil {
		return nil, err
	}
	var out []valuesLeaf
	for _, key := range keys {
		for _, l := range leaves {
			if len(l.path) == 0 {
				continue
			}
			l.path = append(yamledit.Path{yamledit.K(key)}, l.path...)
			out = append(out, l)
		}
	}
	return out, nil
}

// remoteChart is the chart the primary app deploys from a Helm repository,
// fetched once a plan (the render fetches it through the same source).
func (p *planner) remoteChart() (*chart.Chart, error) {
	p.remoteOnce.Do(func() {
		p.remote, _, p.remoteErr = fetchAppChart(p.ctx, p.primary)
	})
	return p.remote, p.remoteErr
}

// chartValues returns the values.yaml of a chart loaded from an archive,
// checked against the bounds of a file: it came out of the archive, past the
// reader's bounds.
func chartValues(ch *chart.Chart, file string) ([]byte, bool, error) {
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" {
			if scan := scanYAML(file, f.Data); scan.err != nil {
				return nil, false, scan.err
			}
			return f.Data, true, nil
		}
	}
	return nil, false, nil
}

// defaultLeaves returns the leaves of the primary app's chart defaults, and
// whether it has any: the file defaults of the repository, or the values.yaml
// of the chart it deploys from a Helm repository.
func (p *planner) defaultLeaves(defaults string) ([]valuesLeaf, bool, error) {
	if p.primary.Chart == nil {
		if k, _ := p.before.kind(defaults); k != kindFile {
			return nil, false, nil
		}
		leaves, err := p.valuesFileLeaves(defaults)
		return leaves, err == nil, err
	}
	ch, err := p.remoteChart()
	if err != nil {
		return nil, false, err
	}
	data, ok, err := chartValues(ch, defaults)
	if err != nil || !ok {
		return nil, false, err
	}
	leaves, err := valuesLeaves(defaults, data)
	return leaves, err == nil, err
}

// remoteSubchartLeaves are the default values of the charts vendored in the
// archive of the chart the primary app deploys from a Helm repository, as
// subchartDefaultLeaves has them of a chart of the repository.
func (p *planner) remoteSubchartLeaves() ([]valuesLeaf, error) {
	ch, err := p.remoteChart()
	if err != nil {
		return nil, err
	}
	keys := subchartKeys(ch.Metadata.Dependencies)
	var out []valuesLeaf
	for _, sub := range ch.Dependencies() {
		file := fmt.Sprintf("chart %s, charts/%s (values.yaml)", p.primary.Chart, sub.Name())
		data, ok, err := chartValues(sub, file)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		leaves, err := subchartLeaves(keys(sub.Name()), file, data)
		if err != nil {
			return nil, err
		}
		out = append(out, leaves...)
	}
	return out, nil
}

// firstChain is the candidates of the first chain when every other chain has
// one too, else none: a candidate must change every field.
func firstChain(perChain [][]helmValueSet) []helmValueSet {
	if len(perChain) == 0 {
		return nil
	}
	for _, others := range perChain[1:] {
		if len(others) == 0 {
			return nil
		}
	}
	return perChain[0]
}

// envListChange is the change of the whole env list of one container when the
// chains change several of its items (or one item's name): nil when the chains
// hold one change of the list already or anything besides env items.
func envListChange(target, expected map[string]any, chains [][]fieldChange) ([]fieldChange, bool) {
	var at []string
	for _, chain := range chains {
		p := chain[0].path
		i := slices.Index(p, "env")
		if i < 0 || i == len(p)-1 {
			return nil, false
		}
		if at == nil {
			at = p[:i+1]
		} else if !slices.Equal(at, p[:i+1]) {
			return nil, false
		}
	}
	if at == nil {
		return nil, false
	}
	return []fieldChange{{path: at, old: lookupPath(target, at), new: lookupPath(expected, at)}}, true
}

// sharedValuesFile reports whether a values file of the primary Helm app is
// read by other releases too: the chart's own values.yaml (defaults), the
// defaults of every release of the chart, or a file another app of the plan
// reads.
func (p *planner) sharedValuesFile(file, defaults string) bool {
	return file == defaults || p.deployedBy(file) != ""
}

// keysOnly reports whether a values path names keys alone, no list item: only
// such a key can be set again in another file (Helm replaces a list whole).
func keysOnly(p yamledit.Path) bool {
	for _, s := range p {
		if s.Key == "" {
			return false
		}
	}
	return true
}

// helmEditableFiles returns the values files an edit of the primary Helm app
// may change (its own values files, in order) and the chart's defaults file.
func (p *planner) helmEditableFiles() (editable []string, defaults string, err error) {
	app := p.primary
	root, _ := cleanRel(app.Path)
	editable, err = helmValueFiles(p.before, app, root)
	if err != nil {
		return nil, "", withApp(err, app.Name)
	}
	if app.Chart != nil {
		// A chart from a Helm repository: its defaults are in the fetched
		// archive, never a file to edit.
		return editable, fmt.Sprintf("chart %s (values.yaml)", app.Chart), nil
	}
	defaults = path.Join(root, "values.yaml")
	if canon, err := p.t.canonical(defaults); err == nil {
		defaults = canon
	}
	if len(editable) == 0 {
		// With no values file of its own, the chart's values are the app's.
		if k, _ := p.before.kind(defaults); k == kindFile {
			editable = []string{defaults}
		}
	}
	return editable, defaults, nil
}

// matchLeaves returns the edits that set the leaves holding fc.old to fc.new,
// and, for an image, the tag, digest or repository keys of the chart's split;
// then, for another field, those of the leaves written inside the string it
// holds (withinStringSets), tried last.
func matchLeaves(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	out := matchWholeLeaves(leaves, fc)
	if len(fc.path) > 0 && fc.path[len(fc.path)-1] == "image" {
		// An image's name and tag have keys of their own (see there); the
		// registry a chart writes before them is no tag.
		return out
	}
	return append(out, withinStringSets(leaves, fc)...)
}

// matchWholeLeaves is matchLeaves but for the leaves a chart writes inside a
// longer string.
func matchWholeLeaves(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	var out []helmValueSet
	for _, l := range leaves {
		if sameValue(l, fc.old) {
			if typed, ok := ofLeafType(l, fc.new); ok {
				out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: typed})
			}
			out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: fc.new})
		}
	}
	if len(fc.path) > 0 && fc.path[len(fc.path)-1] == "env" {
		return append(out, envMapSets(leaves, fc)...)
	}
	if len(fc.path) > 0 && (fc.path[len(fc.path)-1] == "annotations" || fc.path[len(fc.path)-1] == "labels") {
		out = append(out, metadataMapSets(leaves, fc)...)
	}
	out = append(out, emptyCollectionSets(leaves, fc)...)
	if len(fc.path) == 0 || fc.path[len(fc.path)-1] != "image" {
		return out
	}
	oldImg, ok1 := fc.old.(string)
	newImg, ok2 := fc.new.(string)
	if !ok1 || !ok2 {
		return out
	}
	o, n := parseImageRef(oldImg), parseImageRef(newImg)
	for _, l := range leaves {
		if l.node.Kind != yaml.ScalarNode || len(l.path) == 0 {
			continue
		}
		key := l.path[len(l.path)-1].Key
		parent := l.path[:len(l.path)-1]
		switch {
		case o.tag != "" && l.text == o.tag && n.tag != "":
			out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: n.tag})
		case o.digest != "" && l.text == o.digest && n.digest != "":
			out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: n.digest})
		case (key == "repository" || key == "image" || key == "name") && o.name != "" &&
			(l.text == o.name || strings.HasSuffix(o.name, "/"+l.text)):
			// The chart's own default tag (often its appVersion): the tag or
			// digest key beside the repository is new.
			if n.tag != "" && o.tag != n.tag {
				out = append(out, helmValueSet{file: l.file, doc: l.doc, path: append(append(yamledit.Path(nil), parent...), yamledit.K("tag")), value: n.tag, fresh: true})
			}
			if n.digest != "" && o.digest != n.digest {
				out = append(out, helmValueSet{file: l.file, doc: l.doc, path: append(append(yamledit.Path(nil), parent...), yamledit.K("digest")), value: n.digest, fresh: true})
			}
		}
	}
	return out
}

// emptyCollectionSets sets, to the new value of a field the chart renders
// nothing at now, each empty mapping or list of the values under a key of the
// field's name: the chart then writes the field only when that key holds
// something ("with .Values.resources", as helm create writes resources,
// nodeSelector, tolerations and affinity, with resources: {} as the default),
// so no value now rendered names the key. Rendering decides whether the chart
// reads it there.
func emptyCollectionSets(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	if fc.old != nil || len(fc.path) == 0 {
		return nil
	}
	kind := yaml.MappingNode
	switch fc.new.(type) {
	case map[string]any:
	case []any:
		kind = yaml.SequenceNode
	default:
		return nil
	}
	var out []helmValueSet
	for _, l := range leaves {
		if len(l.path) == 0 || l.node.Kind != kind || len(l.node.Content) > 0 || l.path[len(l.path)-1].Key != fc.path[len(fc.path)-1] {
			continue
		}
		out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: fc.new})
	}
	return out
}

// freshSets are the sets of chain that defaults' leaves match, written as new
// keys of the app's last values file: the value is held where the app cannot
// edit it (the chart's or a subchart's defaults), and the last file wins.
func freshSets(leaves []valuesLeaf, chain []fieldChange, last string) []helmValueSet {
	var out []helmValueSet
	for _, fc := range chain {
		for _, s := range matchLeaves(leaves, fc) {
			s.file, s.doc, s.fresh = last, 0, true
			out = append(out, s)
		}
	}
	return out
}

// envMapSets returns the edits for a container's env list that a chart renders
// from a values mapping of names to values ("range $k, $v := .Values.env"), the
// common shape besides a list passed through: each mapping whose every key is a
// variable of the old list with its value, or an empty mapping under a key
// naming env, set to the mapping the new list needs (a variable removed goes,
// one added joins, one changed changes). Variables the mapping does not hold
// (those the chart writes itself) are left to the chart; rendering decides
// whether the mapping was the right one.
func envMapSets(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	oldVars, ok1 := envValues(fc.old)
	newVars, ok2 := envValues(fc.new)
	if !ok1 || !ok2 {
		return nil
	}
	return heldMappingSets(leaves, "env", oldVars, func(held map[string]string) map[string]any {
		want := keptOf(held, newVars)
		for k, v := range newVars {
			if _, was := oldVars[k]; !was {
				want[k] = v
			}
		}
		for k := range oldVars {
			if _, kept := newVars[k]; !kept {
				if _, in := held[k]; !in {
					// A variable a values file before this one or the chart's
					// defaults give: null removes the key from what is merged.
					want[k] = nil
				}
			}
		}
		return want
	})
}

// metadataMapSets returns the edits for labels or annotations that a chart
// renders from a values mapping beside its own ("toYaml .Values.podAnnotations"):
// each mapping whose every key the rendered mapping holds with its value, or an
// empty mapping under a key naming them (podAnnotations: {}, labels: {}), set to
// the mapping the change needs (a key removed goes, one added joins, one changed
// changes). Keys the mapping does not hold are the chart's own; rendering decides
// whether the mapping was the right one.
func metadataMapSets(leaves []valuesLeaf, fc fieldChange) []helmValueSet {
	word := strings.TrimSuffix(fc.path[len(fc.path)-1], "s")
	oldMap, ok1 := stringMap(fc.old)
	newMap, ok2 := stringMap(fc.new)
	if !ok1 || !ok2 {
		return nil
	}
	return heldMappingSets(leaves, word, oldMap, func(held map[string]string) map[string]any {
		want := keptOf(held, newMap)
		for k, v := range newMap {
			if old, was := oldMap[k]; !was || old != v {
				want[k] = v
			}
		}
		return want
	})
}

// heldMappingSets sets, to what want makes of it, each values mapping of scalars
// that could be the source of a rendered mapping whose values were old: every key
// it holds is in old with the same value, or it is empty under a key whose name
// holds word (env: {}, podAnnotations: {}).
func heldMappingSets(leaves []valuesLeaf, word string, old map[string]string, want func(held map[string]string) map[string]any) []helmValueSet {
	var out []helmValueSet
	for _, l := range leaves {
		if l.node.Kind != yaml.MappingNode || len(l.path) == 0 {
			continue
		}
		held, ok := scalarMapping(l.node)
		if !ok {
			continue
		}
		if len(held) == 0 && !strings.Contains(strings.ToLower(l.path[len(l.path)-1].Key), word) {
			continue
		}
		matches := true
		for k, v := range held {
			if o, in := old[k]; !in || o != v {
				matches = false
				break
			}
		}
		if matches {
			out = append(out, helmValueSet{file: l.file, doc: l.doc, path: l.path, value: want(held)})
		}
	}
	return out
}

// keptOf is the part of a held mapping the new rendered mapping keeps, with its
// new values.
func keptOf(held, newMap map[string]string) map[string]any {
	kept := map[string]any{}
	for k := range held {
		if v, in := newMap[k]; in {
			kept[k] = v
		}
	}
	return kept
}

// stringMap reads a rendered mapping of strings (labels, annotations); nil is
// the empty mapping.
func stringMap(v any) (map[string]string, bool) {
	if v == nil {
		return map[string]string{}, true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

// envValues reads an env list whose entries are all a name and a literal value;
// ok is false for any other shape (valueFrom, a missing name).
func envValues(v any) (map[string]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(list))
	for _, it := range list {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		value, isString := m["value"].(string)
		if name == "" || !isString || len(m) != 2 {
			return nil, false
		}
		out[name] = value
	}
	return out, true
}

// scalarMapping reads a mapping node whose values are all scalars, as written.
func scalarMapping(n *yaml.Node) (map[string]string, bool) {
	out := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode {
			return nil, false
		}
		out[k.Value] = v.Value
	}
	return out, true
}

func dedupeSets(sets []helmValueSet) []helmValueSet {
	seen := map[string]bool{}
	var out []helmValueSet
	for _, s := range sets {
		k := fmt.Sprintf("%s\x00%d\x00%s\x00%v", s.file, s.doc, s.path, s.value)
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

// valuesBuilder edits the values files of sets, each key set byte-minimally.
func (p *planner) valuesBuilder(sets []helmValueSet) candidateBuilder {
	strategy := strategyValuesKey
	var files []string
	guess := false
	for _, s := range sets {
		if s.fresh {
			strategy = strategyNewValuesKey
		}
		guess = guess || s.guess
		files = append(files, s.file)
	}
	return candidateBuilder{
		strategy: strategy,
		files:    files,
		guess:    guess,
		build: func() (*candidate, error) {
			c := &candidate{strategy: strategy, files: map[string][]byte{}}
			for _, s := range sets {
				c.keys = append(c.keys, s.describe())
				v := p.before
				if len(c.files) > 0 {
					v = p.before.with(c.files)
				}
				out, ws, err := p.editFile(v, s.file, s.doc, yamledit.SetSorted(s.path, valuesValue(s.value)))
				if err != nil {
					return nil, err
				}
				c.files[s.file] = out
				c.warnings = append(c.warnings, ws...)
			}
			return c, nil
		},
	}
}

// maxSetValueText bounds the value a set's description shows: enough to tell
// two candidates of one key apart, not a values block whole.
const maxSetValueText = 120

// describe names what a candidate sets, for the reason of an attempt: the key
// alone does not tell two candidates of one key apart (an env mapping set to
// two different mappings, an integer and the same number as a string). The
// value is shown as JSON, masked as a values file is (by key: a password's
// value, an env variable named like a secret), and cut short.
func (s helmValueSet) describe() string {
	at := make([]string, len(s.path))
	for i, seg := range s.path {
		at[i] = seg.Key
		if seg.Key == "" {
			at[i] = fmt.Sprintf("[%d]", seg.Index)
		}
	}
	masked := maskValueIn(valuesGroup, "", at, valuesValue(s.value), nil)
	if n := len(s.path); n >= 2 && s.path[n-1].Key == "value" && s.path[n-2].Key == "" {
		// The value of a list's item by its index (env[1].value): the item's
		// name, which says whether it is a secret (DB_PASSWORD), is not in
		// the path, as of a JSON patch's (see envValueByIndex).
		masked = redacted
	}
	text, err := json.Marshal(masked)
	if err != nil {
		return s.path.String()
	}
	return s.path.String() + " to " + textcut.Cut(string(text), maxSetValueText)
}

// valuesGroup stands for Helm values where masking asks an object's group:
// values have no schema, so their secrets are masked by key.
const valuesGroup = "values.helm.sh"

// valuesValue is a rendered value as the YAML editor writes it.
func valuesValue(v any) any {
	switch x := v.(type) {
	case int64:
		return int(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = valuesValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = valuesValue(e)
		}
		return out
	}
	return v
}

// helmOverride says where the Application itself sets a value the target
// renders, when no values file edit verified: Argo CD passes values,
// valuesObject and parameters after every values file, so they win.
func helmOverride(app Application, target, expected map[string]any) string {
	var chains [][]fieldChange
	targetChanges(target, expected, nil, &chains)
	var olds []string
	for _, c := range chains {
		fc := c[0]
		switch v := fc.old.(type) {
		case string:
			olds = append(olds, v)
			if len(fc.path) > 0 && fc.path[len(fc.path)-1] == "image" {
				if r := parseImageRef(v); r.tag != "" {
					olds = append(olds, r.tag)
				}
			}
		case int64, float64, bool:
			olds = append(olds, fmt.Sprint(v))
		}
	}
	for _, prm := range app.Helm.Parameters {
		for _, o := range olds {
			if prm.Value == o {
				return fmt.Sprintf("the Application sets it in %s.parameters (%s=%s), which Argo CD applies after every values file", helmSettings(app), prm.Name, prm.Value)
			}
		}
	}
	if app.Helm.Values != "" {
		leaves, _ := valuesLeaves(helmSettings(app)+"."+app.Helm.ValuesField, []byte(app.Helm.Values))
		for _, l := range leaves {
			for _, o := range olds {
				if l.node.Kind == yaml.ScalarNode && l.text == o {
					return fmt.Sprintf("the Application sets it in %s.%s (%s), which Argo CD applies after every values file", helmSettings(app), app.Helm.ValuesField, l.path)
				}
			}
		}
		// A mapping of them the chart renders (env, labels, annotations) that a
		// new key joins.
		for _, chain := range withEnclosing(target, expected, chains) {
			for _, fc := range chain {
				for _, s := range matchLeaves(leaves, fc) {
					if !s.fresh {
						return fmt.Sprintf("the Application sets it in %s.%s (%s), which Argo CD applies after every values file", helmSettings(app), app.Helm.ValuesField, s.path)
					}
				}
			}
		}
	}
	return ""
}

// helmSettings names an app's helm settings in its Application.
func helmSettings(app Application) string { return sourceSettings(app) + ".helm" }

// noValuesKeyReason is the refusal reason of a Helm change no values key can
// hold: no values file of the app nor the chart's defaults holds what the chart
// renders now at the changed fields, so its templates write them.
func (p *planner) noValuesKeyReason(target *object) string {
	files := "no values file"
	editable, _, err := p.helmEditableFiles()
	if err == nil && len(editable) > 0 {
		files = strings.Join(editable, ", ")
	}
	if c := p.primary.Chart; c != nil && err == nil && len(editable) == 0 {
		return fmt.Sprintf("application %s deploys chart %s and reads no values file of this repository, so nothing here can express %s for %s: give it a values file of this repository (a \"$values/...\" file of a ref source of it) or change the Application",
			p.primary.Name, c, p.req.Change.describe(), p.req.Target)
	}
	expected, err := expectedAfter(target, p.req.Change)
	var fields []string
	if err == nil {
		var chains [][]fieldChange
		targetChanges(target.body, expected, nil, &chains)
		for _, c := range chains {
			f := strings.Join(c[0].path, ".")
			if c[0].old == nil {
				f += " (not rendered now)"
			}
			fields = append(fields, f)
		}
	}
	return fmt.Sprintf("no values edit can express %s for %s: no key of the values of application %s (%s, and the chart's defaults) holds what the chart renders at %s, so only its templates decide it; change the chart, or make it read a value there",
		p.req.Change.describe(), p.req.Target, p.primary.Name, files, strings.Join(fields, ", "))
}

// helmDigestNote says, of a digest change of a Helm app that no values edit
// expresses, which values keys the chart has for the container's image when
// none of them is a digest: the chart then renders no digest whatever a values
// file says, and a person has to add one to the chart (or set a tag). It is ""
// for any other change, and when a digest key is there (its templates may not
// read it, which the attempts already say).
func (p *planner) helmDigestNote(target *object) string {
	c := p.req.Change.Image
	if c == nil || c.Digest == "" || p.primary.SourceType != SourceHelm {
		return ""
	}
	ct, ok := findContainer(target.body, target.kind, c.Container)
	if !ok {
		return ""
	}
	img, _ := ct.body["image"].(string)
	name := parseImageRef(img).name
	if name == "" {
		return ""
	}
	editable, defaults, err := p.helmEditableFiles()
	if err != nil {
		return ""
	}
	leaves, _, err := p.defaultLeaves(defaults)
	if err != nil {
		return ""
	}
	for _, f := range editable {
		if k, _ := p.before.kind(f); k != kindFile || slices.ContainsFunc(leaves, func(l valuesLeaf) bool { return l.file == f }) {
			continue
		}
		data, err := p.before.read(f)
		if err != nil {
			return ""
		}
		l, _ := valuesLeaves(f, data)
		leaves = append(leaves, l...)
	}
	if sub, err := p.subchartDefaultLeaves(path.Dir(defaults)); err == nil {
		leaves = append(leaves, sub...)
	}
	// The mappings that hold the image's name (its repository) are the image's.
	var parents []yamledit.Path
	for _, l := range leaves {
		if l.node.Kind != yaml.ScalarNode || len(l.path) < 2 {
			continue
		}
		key := l.path[len(l.path)-1].Key
		if (key == "repository" || key == "image" || key == "name") && (l.text == name || strings.HasSuffix(name, "/"+l.text)) {
			parent := l.path[:len(l.path)-1]
			if !slices.ContainsFunc(parents, func(q yamledit.Path) bool { return q.String() == parent.String() }) {
				parents = append(parents, parent)
			}
		}
	}
	if len(parents) == 0 {
		return ""
	}
	var keys, files []string
	for _, parent := range parents {
		for _, l := range leaves {
			if len(l.path) != len(parent)+1 || l.path[:len(parent)].String() != parent.String() {
				continue
			}
			if strings.Contains(strings.ToLower(l.path[len(parent)].Key), "digest") {
				return ""
			}
			if k := l.path.String(); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			if !slices.Contains(files, l.file) {
				files = append(files, l.file)
			}
		}
	}
	sort.Strings(keys)
	return fmt.Sprintf("the chart has no digest key for image %s: its values give %s (%s) and no digest beside them, so no values edit renders a digest; add a digest key its templates read (%s.digest, say) to the chart, or change the tag instead",
		name, strings.Join(keys, ", "), strings.Join(files, ", "), parents[0])
}
