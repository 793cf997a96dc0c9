package render

import (
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
)

// kustNode is one kustomization directory and everything it reads. Every path
// it holds is canonical (symlinks resolved, see tree), as kustomize on disk
// resolves them: a base reached through a symlink is the base itself.
type kustNode struct {
	dir  string // canonical repository-relative directory
	file string // canonical repository-relative kustomization file
	// k is shared with every kustomization file of the same content: read only.
	k *types.Kustomization
	// files are the files this kustomization reads directly (its own file included).
	files []string
	// dirs are kustomization directories it includes (bases and components).
	dirs []string
	// components is the subset of dirs included as components.
	components map[string]bool
	// helmFiles and helmDirs are what its Helm charts (helmCharts) read besides
	// files: the values files it names and the files a chart links to, and each
	// chart's directory with those it links to, all of whose files helm reads,
	// both sorted. Apart from files: the build never gets to
	// read them (see helmChartsRefusal), yet a change of one changes what Argo
	// CD renders.
	helmFiles []string
	helmDirs  []string
}

// findKustomizationFile returns the kustomization file of dir, or "" when there is none.
func (t *tree) findKustomizationFile(dir string) (string, error) {
	var found []string
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := path.Join(dir, name)
		st := t.stat(p)
		if st.err != nil {
			return "", st.err
		}
		if st.kind == kindFile {
			found = append(found, st.canon)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	default:
		var names []string
		for _, name := range konfig.RecognizedKustomizationFileNames() {
			if st := t.stat(path.Join(dir, name)); st.kind == kindFile {
				names = append(names, path.Join(dir, name))
			}
		}
		return "", refuse(CodeRenderFailed, "%s holds several kustomization files (%s); kustomize refuses that", dir, strings.Join(names, ", "))
	}
}

// kustomization parses the kustomization of dir (a canonical path) and resolves the
// paths it references. Results are cached per tree: a base shared by many overlays
// is parsed once.
func (t *tree) kustomization(dir string) (*kustNode, error) {
	t.mu.Lock()
	n, ok := t.kusts[dir]
	t.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := t.parseKustomization(dir)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.kusts[dir] = n
	t.mu.Unlock()
	return n, nil
}

func (t *tree) parseKustomization(dir string) (*kustNode, error) {
	file, err := t.findKustomizationFile(dir)
	if err != nil {
		return nil, err
	}
	if file == "" {
		return nil, refuse(CodeRenderFailed, "%s has no kustomization file (kustomization.yaml, kustomization.yml or Kustomization)", dir)
	}
	data, err := t.readFile(file)
	if err != nil {
		return nil, err
	}
	return t.resolveKustomization(dir, file, data)
}

// resolveKustomization is the node of the kustomization file of dir whose
// content is data, its references resolved in t: for the tree's own file, or
// for an edit of it (what the edited file would read).
func (t *tree) resolveKustomization(dir, file string, data []byte) (*kustNode, error) {
	n := &kustNode{dir: dir, file: file, files: []string{file}}
	var err error
	if n.k, err = parsedKustomizations.parse(data); err != nil {
		return nil, refuse(CodeRenderFailed, "parse %s: %v", file, err)
	}
	r := refResolver{t: t, n: n}
	for _, res := range n.k.Resources {
		r.fileOrDir(res, "resource")
	}
	for _, c := range n.k.Components {
		if d := r.dir(c, "component"); d != "" {
			if n.components == nil {
				n.components = map[string]bool{}
			}
			n.components[d] = true
		}
	}
	for _, p := range n.k.Patches {
		if p.Path != "" {
			r.file(p.Path, "patch")
		}
	}
	for _, p := range n.k.PatchesStrategicMerge {
		if s := string(p); !isInline(s) {
			r.file(s, "patchesStrategicMerge entry")
		}
	}
	for _, p := range n.k.PatchesJson6902 {
		if p.Path != "" {
			r.file(p.Path, "patchesJson6902 entry")
		}
	}
	for _, f := range n.k.Crds {
		r.file(f, "crds entry")
	}
	for _, f := range n.k.Configurations {
		r.file(f, "configurations entry")
	}
	for _, list := range [][]string{n.k.Generators, n.k.Transformers, n.k.Validators} {
		for _, g := range list {
			if !isInline(g) {
				r.fileOrDir(g, "generator or transformer")
			}
		}
	}
	for _, rep := range n.k.Replacements {
		if rep.Path != "" {
			r.file(rep.Path, "replacements entry")
		}
	}
	if p, ok := n.k.OpenAPI["path"]; ok {
		r.file(p, "openapi path")
	}
	generatorSources := func(s types.KvPairSources) {
		for _, f := range s.FileSources {
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			r.file(f, "generator file")
		}
		for _, f := range s.EnvSources {
			r.file(f, "generator env file")
		}
	}
	for _, g := range n.k.ConfigMapGenerator {
		generatorSources(g.KvPairSources)
	}
	for _, g := range n.k.SecretGenerator {
		generatorSources(g.KvPairSources)
	}
	if r.err != nil {
		return nil, r.err
	}
	r.helmCharts()
	sort.Strings(n.files)
	sort.Strings(n.helmFiles)
	sort.Strings(n.helmDirs)
	n.helmDirs = slices.Compact(n.helmDirs)
	return n, nil
}

// helmCharts records the files the kustomization's Helm charts read, where
// kustomize's chart inflation looks for them: the chart in
// <chartHome>/<name> (chartHome from helmGlobals, "charts" by default, relative
// to the kustomization; <chartHome>/<name>-<version>/<name> for a chart with a
// repo and a version, where helm pulls it to), its values file (valuesFile,
// relative to the kustomization, the chart's values.yaml by default) and its
// additionalValuesFiles. Parsing has folded the older
// helmChartInflationGenerator into helmCharts. A path that cannot name a
// repository file (remote, absolute, outside the repository) is left out: no
// change of the repository reaches it. Nothing is refused here: a missing
// chart or values file is still read (a change that adds it changes the
// render), and the build refuses every chart anyway.
func (r *refResolver) helmCharts() {
	if len(r.n.k.HelmCharts) == 0 {
		return
	}
	home := types.HelmDefaultHome
	if g := r.n.k.HelmGlobals; g != nil && g.ChartHome != "" {
		home = g.ChartHome
	}
	for _, c := range r.n.k.HelmCharts {
		chartHome := home
		if c.Version != "" && c.Repo != "" {
			chartHome = path.Join(home, c.Name+"-"+c.Version)
		}
		if p, ok := r.helmPath(path.Join(chartHome, c.Name)); ok {
			// Helm reads the chart directory on disk, symlinks inside the
			// repository followed: what they name is read too.
			dirs, linked := r.t.reachable(p)
			r.n.helmDirs = append(append(r.n.helmDirs, p), dirs...)
			for f := range linked {
				r.n.helmFiles = append(r.n.helmFiles, f)
			}
		}
		if c.ValuesFile != "" {
			if p, ok := r.helmPath(c.ValuesFile); ok {
				r.n.helmFiles = append(r.n.helmFiles, p)
			}
		}
		for _, f := range c.AdditionalValuesFiles {
			if p, ok := r.helmPath(f); ok {
				r.n.helmFiles = append(r.n.helmFiles, p)
			}
		}
	}
}

// helmPath is the canonical repository path a chart's reference names,
// relative to the kustomization, and whether it names one.
func (r *refResolver) helmPath(ref string) (string, bool) {
	if u, err := url.Parse(ref); ref == "" || (err == nil && u.Scheme != "") {
		return "", false
	}
	p, err := joinRel(r.n.dir, ref)
	if err != nil {
		return "", false
	}
	st := r.t.stat(p)
	if st.err != nil {
		return "", false
	}
	return st.canon, true
}

func isInline(s string) bool {
	return strings.Contains(s, "\n") || strings.HasPrefix(strings.TrimSpace(s), "{")
}

// looksRemote reports whether a kustomize reference names something kustomize would
// fetch over the network (an HTTP file or a git repository).
func looksRemote(ref string) bool {
	if u, err := url.Parse(ref); err == nil && u.Scheme != "" && u.Scheme != "file" {
		return true
	}
	if strings.HasPrefix(ref, "git@") || strings.HasPrefix(ref, "git::") || strings.Contains(ref, "?ref=") ||
		strings.Contains(ref, ".git/") || strings.HasSuffix(ref, ".git") {
		return true
	}
	first, _, _ := strings.Cut(ref, "/")
	return strings.Contains(first, ".") && first != "." && first != ".." && strings.Contains(ref, "/")
}

// refResolver resolves the references of one kustomization; the first problem wins.
type refResolver struct {
	t   *tree
	n   *kustNode
	err error
}

func (r *refResolver) resolve(ref, what string) (string, nodeKind) {
	if r.err != nil {
		return "", kindNone
	}
	if u, err := url.Parse(ref); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		r.err = refuse(CodeRemoteBase, "%s: %s %s is fetched over the network; remote resources are not supported", r.n.file, what, ref)
		return "", kindNone
	}
	p, err := joinRel(r.n.dir, ref)
	if err != nil {
		r.err = err
		return "", kindNone
	}
	st := r.t.stat(p)
	if st.err != nil {
		r.err = st.err
		return "", kindNone
	}
	if st.kind == kindNone {
		if looksRemote(ref) {
			r.err = refuse(CodeRemoteBase, "%s: %s %s is a remote base; remote bases are not supported", r.n.file, what, ref)
		} else {
			r.err = refuse(CodeRenderFailed, "%s: %s %s does not exist in the repository", r.n.file, what, ref)
		}
		return "", kindNone
	}
	return st.canon, st.kind
}

func (r *refResolver) file(ref, what string) {
	p, k := r.resolve(ref, what)
	switch k {
	case kindFile:
		r.n.files = append(r.n.files, p)
	case kindDir:
		r.err = refuse(CodeRenderFailed, "%s: %s %s is a directory, a file is expected", r.n.file, what, ref)
	}
}

func (r *refResolver) dir(ref, what string) string {
	p, k := r.resolve(ref, what)
	switch k {
	case kindDir:
		r.n.dirs = append(r.n.dirs, p)
		return p
	case kindFile:
		r.err = refuse(CodeRenderFailed, "%s: %s %s is a file, a directory is expected", r.n.file, what, ref)
	}
	return ""
}

func (r *refResolver) fileOrDir(ref, what string) {
	p, k := r.resolve(ref, what)
	switch k {
	case kindFile:
		r.n.files = append(r.n.files, p)
	case kindDir:
		r.n.dirs = append(r.n.dirs, p)
	}
}

// kustReach is the closure of a kustomization: every kustomization directory its
// build passes through, and so every file it reads. It is computed for every
// Kustomize Application of a plan, so it holds no more than the visited nodes.
type kustReach struct {
	// nodes in visit order, the root first.
	nodes []*kustNode
	// componentDirs are directories reached as components (and everything below them).
	componentDirs map[string]bool
	// seen indexes the visited directories once there are too many to scan.
	seen map[string]bool
}

// reads reports whether the build reads the repository file f.
func (r *kustReach) reads(f string) bool {
	for _, n := range r.nodes {
		if _, ok := slices.BinarySearch(n.files, f); ok {
			return true
		}
		if _, ok := slices.BinarySearch(n.helmFiles, f); ok {
			return true
		}
		if len(n.helmDirs) > 0 {
			// f or a directory above it: as many lookups as f is deep,
			// however many charts a kustomization lists ("." when a chart's
			// symlinks reach the whole repository).
			for d := f; ; d = path.Dir(d) {
				if _, ok := slices.BinarySearch(n.helmDirs, d); ok {
					return true
				}
				if d == "." || d == "/" {
					break
				}
			}
		}
	}
	return false
}

// linearVisitLimit is the number of nodes up to which visited scans them: a
// closure is usually an overlay, its bases and a few components, and a map per
// Application costs more than the scan.
const linearVisitLimit = 32

// visited reports whether dir is one of the nodes, and records it as one.
func (r *kustReach) visited(dir string) bool {
	if r.seen == nil {
		for _, n := range r.nodes {
			if n.dir == dir {
				return true
			}
		}
		if len(r.nodes) < linearVisitLimit {
			return false
		}
		r.seen = make(map[string]bool, 2*len(r.nodes))
		for _, n := range r.nodes {
			r.seen[n.dir] = true
		}
	}
	if r.seen[dir] {
		return true
	}
	r.seen[dir] = true
	return false
}

// maxKustomizationDepth bounds how deep bases may nest.
const maxKustomizationDepth = 64

// reachKustomization computes the closure of the kustomization at root, and
// refuses a graph kustomize could not build in bounded time: a cycle, bases
// nested too deep, or a build passing through more than MaxKustomizations
// kustomizations. Kustomize builds a base once for every time it is included, so
// a few dozen directories that each include the next two twice over make a build
// of millions; the count is of builds, each included directory counted once per
// inclusion. The Application's own components are resolved from the real
// directory of root, as kustomize resolves everything its kustomization names.
func (t *tree) reachKustomization(root string, extraComponents []string) (*kustReach, error) {
	root, err := t.canonical(root)
	if err != nil {
		return nil, err
	}
	reach := &kustReach{}
	// builds is, per visited directory, how many kustomizations its build
	// passes through (itself included), saturated just past the bound.
	builds := map[string]int{}
	var stack []string // the inclusion path to the directory being visited
	var visit func(dir string, viaComponent bool) (int, error)
	visit = func(dir string, viaComponent bool) (int, error) {
		dir, err := t.canonical(dir)
		if err != nil {
			return 0, err
		}
		if i := slices.Index(stack, dir); i >= 0 {
			return 0, refuse(CodeRenderFailed, "kustomization cycle: %s", strings.Join(append(slices.Clone(stack[i:]), dir), " includes "))
		}
		if len(stack) > maxKustomizationDepth {
			return 0, refuse(CodeTooLarge, "kustomization %s: bases nest more than %d levels deep", dir, maxKustomizationDepth)
		}
		if viaComponent {
			if reach.componentDirs == nil {
				reach.componentDirs = map[string]bool{}
			}
			reach.componentDirs[dir] = true
		}
		if reach.visited(dir) {
			return builds[dir], nil
		}
		if len(reach.nodes) >= MaxKustomizations {
			return 0, refuse(CodeTooLarge, "kustomization %s: the build passes through more than %d kustomization directories, at most %d", root, MaxKustomizations, MaxKustomizations)
		}
		n, err := t.kustomization(dir)
		if err != nil {
			return 0, err
		}
		reach.nodes = append(reach.nodes, n)
		stack = append(stack, dir)
		total := 1
		for _, d := range n.dirs {
			b, err := visit(d, viaComponent || n.components[d])
			if err != nil {
				return 0, err
			}
			total = min(total+b, MaxKustomizations+1)
		}
		stack = stack[:len(stack)-1]
		builds[dir] = total
		return total, nil
	}
	total, err := visit(root, false)
	if err != nil {
		return nil, err
	}
	for _, c := range extraComponents {
		p, err := joinRel(root, c)
		if err != nil {
			return nil, err
		}
		stack = append(stack[:0], root)
		b, err := visit(p, true)
		if err != nil {
			return nil, err
		}
		total = min(total+b, MaxKustomizations+1)
	}
	if total > MaxKustomizations {
		return nil, refuse(CodeTooLarge, "kustomization %s: the build passes through more than %d kustomizations (each base counted once for every time it is included), at most %d", root, MaxKustomizations, MaxKustomizations)
	}
	return reach, nil
}
