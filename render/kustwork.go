package render

import (
	"encoding/json"
	"os"

	"sigs.k8s.io/kustomize/api/types"
)

// MaxTransformedBytes bounds the work of kustomize's transformers in one build:
// each byte a kustomization's transformers set (name prefix and suffix,
// namespace, labels, annotations, images, patches with a target, transformer
// configurations) counted once for every resource of the kustomization it may
// apply to. Kustomize sets every such value on every resource it selects, and
// checks each plain string it sets by parsing it again, so this work is the
// product of the two, done after the build has read everything: past the render's
// deadline nothing stops it, and it holds the one kustomize slot the service's
// every build waits for. A few kilobytes of patches over a thousand resources
// are far below it; a megabyte annotation on every resource is not.
const MaxTransformedBytes = 16 << 20

// transformWork is the transformer work of one kustomization's build.
type transformWork struct {
	docs int // resources the build holds, each base counted once per inclusion
	work int // bytes its transformers and those of its bases set, as MaxTransformedBytes counts them
	// heaviest is the kustomization file whose transformers contribute the most
	// to work: bytes of values set on each of docs resources.
	heaviest              string
	heavyBytes, heavyDocs int
	heavyShare            int
}

// checkTransformWork refuses a Kustomize build whose transformers would set more
// than MaxTransformedBytes (see there) before kustomize runs, naming the
// kustomization that contributes the most. The Application's own settings o and
// components apply to the root kustomization. The graph was checked by
// reachKustomization: it has no cycle and passes through at most MaxKustomizations
// kustomizations.
//
// Resources are counted only when the transformers set enough for it to matter:
// a build whose transformers set little even on as many resources as a render
// may read reads nothing here. Counting reads the resource files the build reads
// too, but no more of them than one render may read: past that, the build is
// refused for what it reads.
func (t *tree) checkTransformWork(root string, o KustomizeOptions, components []string) error {
	var extraDirs []string
	for _, c := range components {
		if d, err := joinRel(root, c); err == nil {
			if d, err = t.canonical(d); err == nil {
				extraDirs = append(extraDirs, d)
			}
		}
	}
	extraBytes := applicationTransformerBytes(o)
	most := &transformEstimate{t: t, memo: map[string]*transformWork{}}
	if most.of(root, extraDirs, extraBytes).work <= MaxTransformedBytes {
		return nil
	}
	counted := &transformEstimate{t: t, memo: map[string]*transformWork{}, countDocs: true}
	w := counted.of(root, extraDirs, extraBytes)
	if counted.readBytes > MaxRenderBytes || w.work <= MaxTransformedBytes {
		return nil
	}
	return refuse(CodeTooLarge, "kustomization %s: its transformers would set about %d bytes over the resources they apply to (those of %s: %d bytes, each set on up to %d resources), at most %d",
		root, w.work, w.heaviest, w.heavyBytes, w.heavyDocs, MaxTransformedBytes)
}

// transformEstimate computes the transformer work of builds of one tree. Without
// countDocs, every kustomization holds as many resources as a render may read.
type transformEstimate struct {
	t         *tree
	memo      map[string]*transformWork
	countDocs bool
	readBytes int // bytes of resource files read to count their documents
}

// of computes the transformer work of the build of dir, with more components and
// transformer bytes for the root. A base's transformers apply to the base's
// resources; a component's to everything its including kustomization holds.
func (e *transformEstimate) of(dir string, extraComponents []string, extraBytes int) *transformWork {
	root := len(extraComponents) > 0 || extraBytes > 0
	if w, ok := e.memo[dir]; ok && !root {
		return w
	}
	t := e.t
	n, err := t.kustomization(dir)
	if err != nil {
		return &transformWork{} // the build reports it
	}
	w := &transformWork{}
	generated := len(n.k.ConfigMapGenerator) + len(n.k.SecretGenerator)
	if e.countDocs {
		for _, r := range n.k.Resources {
			if f, ok := t.fileOf(n.dir, r); ok && e.readBytes <= MaxRenderBytes {
				read := t.readScanned(f)
				e.readBytes += len(read.data)
				w.docs += read.scan.docs
			}
		}
	}
	type component struct {
		file  string
		bytes int
	}
	var components []component
	include := func(d string, asComponent bool) {
		c := e.of(d, nil, 0)
		w.docs += c.docs
		w.work = saturatingAdd(w.work, c.work)
		if c.heavyShare > w.heavyShare {
			w.heaviest, w.heavyBytes, w.heavyDocs, w.heavyShare = c.heaviest, c.heavyBytes, c.heavyDocs, c.heavyShare
		}
		if cn, err := t.kustomization(d); err == nil && asComponent {
			components = append(components, component{cn.file, transformerBytes(t, cn)})
		}
	}
	for _, d := range n.dirs {
		include(d, n.components[d])
	}
	for _, d := range extraComponents {
		include(d, true)
	}
	// A render reads no more documents than this; what it generates it adds.
	most := generated + MaxRenderDocuments
	if e.countDocs {
		w.docs = min(w.docs+generated, most)
	} else {
		w.docs = most
	}
	w.add(n.file, transformerBytes(t, n)+extraBytes)
	for _, c := range components {
		// Counted over the component's own resources already; it applies to
		// all of this kustomization's too.
		w.add(c.file, c.bytes)
	}
	if !root {
		e.memo[dir] = w
	}
	return w
}

// add counts bytes of values of file set on each resource of w.
func (w *transformWork) add(file string, bytes int) {
	share := saturatingMul(bytes, w.docs)
	w.work = saturatingAdd(w.work, share)
	if share > w.heavyShare {
		w.heaviest, w.heavyBytes, w.heavyDocs, w.heavyShare = file, bytes, w.docs, share
	}
}

// fileOf resolves ref from dir to the canonical path of a file, if it is one.
func (t *tree) fileOf(dir, ref string) (string, bool) {
	p, err := joinRel(dir, ref)
	if err != nil {
		return "", false
	}
	st := t.stat(p)
	return st.canon, st.err == nil && st.kind == kindFile
}

// transformerBytes is how many bytes of values n's transformers set on each
// resource they select. A patch without a target applies to the one resource it
// names, which costs what reading it did, so it is not counted.
func transformerBytes(t *tree, n *kustNode) int {
	k := n.k
	b := len(k.NamePrefix) + len(k.NameSuffix) + len(k.Namespace) + mapBytes(k.CommonLabels) + mapBytes(k.CommonAnnotations)
	for _, l := range k.Labels {
		b += mapBytes(l.Pairs)
	}
	for _, img := range k.Images {
		b += len(img.Name) + len(img.NewName) + len(img.NewTag) + len(img.TagSuffix) + len(img.Digest)
	}
	patch := func(p types.Patch) int {
		if p.Patch != "" {
			return len(p.Patch)
		}
		return t.fileBytes(n.dir, p.Path)
	}
	for _, p := range k.Patches {
		if p.Target != nil {
			b += patch(p)
		}
	}
	for _, p := range k.PatchesJson6902 {
		b += patch(p)
	}
	for _, tr := range k.Transformers {
		if isInline(tr) {
			b += len(tr)
		} else {
			b += t.fileBytes(n.dir, tr)
		}
	}
	return b
}

// fileBytes is the size of the file ref names from dir, 0 when it names none or
// cannot be read (the build reports why). It reads no file: the size on disk.
func (t *tree) fileBytes(dir, ref string) int {
	p, ok := t.fileOf(dir, ref)
	if !ok {
		return 0
	}
	info, err := os.Stat(t.stat(p).real)
	if err != nil {
		return 0
	}
	return int(min(info.Size(), MaxFileSize+1))
}

func mapBytes(m map[string]string) int {
	b := 0
	for k, v := range m {
		b += len(k) + len(v)
	}
	return b
}

// applicationTransformerBytes is what an Application's own kustomize settings
// add to the transformers of its root kustomization.
func applicationTransformerBytes(o KustomizeOptions) int {
	b := len(o.NamePrefix) + len(o.NameSuffix) + len(o.Namespace) + mapBytes(o.CommonLabels) + mapBytes(o.CommonAnnotations)
	for _, img := range o.Images {
		b += len(img)
	}
	if len(o.Patches) > 0 {
		if data, err := json.Marshal(o.Patches); err == nil {
			b += len(data)
		}
	}
	return b
}

// saturated is where the sums saturate instead of overflowing: far above any
// bound, far below the largest int.
const saturated = 1 << 50

func saturatingAdd(a, b int) int {
	return min(a+b, saturated) // both at most saturated: no overflow
}

func saturatingMul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > saturated/b {
		return saturated
	}
	return a * b
}
