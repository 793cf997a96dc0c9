package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/gobwas/glob"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// manifestFile is the file name filter of Argo CD's directory source.
var manifestFile = regexp.MustCompile(`^.*\.(yaml|yml|json|jsonnet)$`)

// skipRenderingMarker excludes a file from a directory app, as in Argo CD.
const skipRenderingMarker = "+argocd:skip-file-rendering"

// directoryMatcher decides which files a Directory app reads, as Argo CD does:
// manifest extensions only (unless disableExtensionFilter), subdirectories only
// with recurse, include/exclude globs matched against the path relative to the
// app path.
type directoryMatcher struct {
	root             string
	recurse          bool
	anyExtension     bool
	include, exclude *glob.Pattern
}

func newDirectoryMatcher(app Application) (*directoryMatcher, error) {
	root, ok := cleanRel(app.Path)
	if !ok {
		return nil, refuse(CodePathEscape, "application %s: path %q leaves the repository", app.Name, app.Path)
	}
	m := &directoryMatcher{root: root, recurse: app.Directory.Recurse, anyExtension: app.Directory.DisableExtensionFilter}
	var err error
	if app.Directory.Include != "" {
		if m.include, err = glob.Compile(app.Directory.Include); err != nil {
			return nil, refuse(CodeInvalidRequest, "application %s: include glob %q: %v", app.Name, app.Directory.Include, err)
		}
	}
	if app.Directory.Exclude != "" {
		if m.exclude, err = glob.Compile(app.Directory.Exclude); err != nil {
			return nil, refuse(CodeInvalidRequest, "application %s: exclude glob %q: %v", app.Name, app.Directory.Exclude, err)
		}
	}
	return m, nil
}

// matches reports whether the repository file rel is one of the app's manifests
// (before looking at its content).
func (m *directoryMatcher) matches(rel string) bool {
	var within string
	if m.root == "." {
		within = rel
	} else {
		var ok bool
		within, ok = strings.CutPrefix(rel, m.root+"/")
		if !ok {
			return false
		}
	}
	if !m.recurse && strings.Contains(within, "/") {
		return false
	}
	if !m.manifestName(rel) {
		return false
	}
	if m.exclude != nil && m.exclude.Match(within) {
		return false
	}
	if m.include != nil && !m.include.Match(within) {
		return false
	}
	return true
}

// manifestName reports whether a file's name may be a manifest's: one of the
// manifest extensions, or any name once the extension filter is off.
func (m *directoryMatcher) manifestName(rel string) bool {
	return m.anyExtension || manifestFile.MatchString(path.Base(rel))
}

// linked returns the real paths of the app's files that it reads under another
// name, through a symlink inside the repository. Only symlinks and what lies
// below them are looked at: every other file keeps its path relative to the
// app's real directory, where the matcher is rooted to decide about it.
func (m *directoryMatcher) linked(t *tree) (map[string]bool, error) {
	var out map[string]bool
	var walk func(dir string, viaLink bool) error
	walk = func(dir string, viaLink bool) error {
		st := t.stat(dir)
		if st.err != nil || st.kind != kindDir {
			return st.err // a missing path is refused when the app renders
		}
		listing := t.listDir(st.canon, st.real)
		if listing.err != nil {
			return listing.err
		}
		for _, name := range listing.names {
			mode := listing.modes[name]
			link := mode&fs.ModeSymlink != 0
			if !link && !viaLink && !(mode.IsDir() && m.recurse) {
				continue
			}
			p := path.Join(dir, name)
			e := t.stat(p)
			switch {
			case e.err != nil:
				return e.err
			case e.kind == kindDir && m.recurse:
				if err := walk(p, viaLink || link); err != nil {
					return err
				}
			case e.kind == kindFile && (viaLink || link) && m.matches(p):
				if out == nil {
					out = map[string]bool{}
				}
				out[e.canon] = true
			}
		}
		return nil
	}
	return out, walk(m.root, false)
}

// files lists the app's manifest files in the view, in walk order.
func (m *directoryMatcher) files(v *view) ([]string, error) {
	k, err := v.kind(m.root)
	if err != nil {
		return nil, err
	}
	if k != kindDir {
		return nil, refuse(CodeRenderFailed, "application path %s is not a directory in the repository", m.root)
	}
	var out []string
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := v.list(dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := path.Join(dir, n)
			k, err := v.kind(p)
			if err != nil {
				return err
			}
			switch {
			case k == kindDir && m.recurse:
				if err := walk(p); err != nil {
					return err
				}
			case k == kindFile && m.matches(p):
				out = append(out, p)
			}
		}
		return nil
	}
	if err := walk(m.root); err != nil {
		return nil, err
	}
	return out, nil
}

// renderDirectory reads a Directory app's objects the way Argo CD's repo server does.
func renderDirectory(v *view, app Application) ([]*object, error) {
	m, err := newDirectoryMatcher(app)
	if err != nil {
		return nil, err
	}
	files, err := m.files(v)
	if err != nil {
		return nil, err
	}
	var objs []*object
	for _, f := range files {
		if strings.HasSuffix(f, ".jsonnet") {
			return nil, refuse(CodeUnsupportedSource, "%s: jsonnet files are not supported", f)
		}
		data, err := v.read(f)
		if err != nil {
			return nil, err
		}
		// Objects name the real file, the one an edit changes, whatever symlink
		// the app reads it through.
		f = v.t.key(f)
		if bytes.Contains(data, []byte(skipRenderingMarker)) {
			continue
		}
		fileObjs, err := parseManifestFile(f, data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, fileObjs...)
	}
	return objs, nil
}

// parseManifestFile returns the objects of one YAML or JSON manifest file. A file
// that does not parse is an error when it looks like a manifest and is skipped
// otherwise, as Argo CD does.
func parseManifestFile(file string, data []byte) ([]*object, error) {
	docs, err := yamledit.Documents(data)
	if err != nil {
		if errors.Is(err, yamledit.ErrAliasBomb) {
			return nil, refuse(CodeAliasBomb, "%s: YAML aliases expand beyond the allowed bound", file)
		}
		if looksLikeManifest(data) {
			return nil, refuse(CodeRenderFailed, "parse %s: %v", file, err)
		}
		return nil, nil
	}
	var objs []*object
	seen := 0
	for _, d := range docs {
		if d.Empty {
			continue
		}
		if strings.HasSuffix(file, ".json") && seen > 0 {
			return nil, refuse(CodeRenderFailed, "%s: found several objects; only single objects are allowed in JSON files", file)
		}
		seen++
		// Argo CD deploys the items of a document with an items list (a List of
		// any kind) and drops a List whose items are null, as for Helm output.
		if list, isList := d.Object["items"].([]any); isList {
			for i, it := range list {
				m, _ := it.(map[string]any)
				o, ok := newObject(m)
				if !ok {
					return nil, refuse(CodeRenderFailed, "%s: document %d (line %d): item %d of the List has no apiVersion or kind", file, d.Index+1, d.Line, i+1)
				}
				o.file, o.doc, o.item = file, d.Index, i
				objs = append(objs, o)
			}
			continue
		}
		if isNullList(d.Object) {
			continue
		}
		o, ok := newObject(d.Object)
		if !ok {
			if looksLikeManifest(data) {
				return nil, refuse(CodeRenderFailed, "%s: document %d (line %d) has no apiVersion or kind", file, d.Index+1, d.Line)
			}
			return nil, nil
		}
		o.file, o.doc = file, d.Index
		objs = append(objs, o)
	}
	return objs, nil
}

func looksLikeManifest(data []byte) bool {
	return bytes.Contains(data, []byte("apiVersion:")) && bytes.Contains(data, []byte("kind:")) &&
		bytes.Contains(data, []byte("metadata:")) || bytes.Contains(data, []byte(`"apiVersion"`))
}

func describeDoc(file string, doc int) string {
	return fmt.Sprintf("%s (document %d)", file, doc+1)
}
