package render

import (
	"bytes"
	"fmt"
	"path"
	"strings"
)

// maxUnreadScan bounds the files a target-not-found refusal looks into for the
// target's manifest: it is a hint on a refusal, never worth a large read.
const maxUnreadScan = 200

// unreadHolders says which files of the app's own folders hold a manifest of the
// wanted object that the app does not read, and why not: the usual reason an
// object someone sees in the repository is not where a plan looks (a file left
// out of a kustomization's resources, a Directory app's include, exclude or
// recurse settings). Files that cannot be read or parsed are passed over.
func (p *planner) unreadHolders(app Application, want objKey) []string {
	var found []string
	scanned := 0
	look := func(file, why string) bool {
		if scanned == maxUnreadScan || len(found) == 3 {
			return false
		}
		scanned++
		data, err := p.t.readFile(file)
		if err != nil {
			return true
		}
		objs, err := parseManifestFile(file, data)
		if err != nil {
			return true
		}
		for _, o := range objs {
			if o.kind == want.Kind && groupOf(o.apiVersion) == want.Group && o.name == want.Name {
				found = append(found, fmt.Sprintf("%s holds %s %s, but %s", file, o.kind, o.name, why))
				break
			}
		}
		return true
	}
	switch app.SourceType {
	case SourceDirectory:
		m, err := newDirectoryMatcher(app)
		if err != nil {
			return nil
		}
		p.walkFiles(m.root, func(f string) bool {
			if !m.manifestName(f) {
				return true
			}
			why := m.leftOut(app, f)
			if why == "" {
				data, err := p.t.readFile(f)
				if err != nil || !bytes.Contains(data, []byte(skipRenderingMarker)) {
					return true
				}
				why = "it carries " + skipRenderingMarker + ", so Argo CD skips it"
			}
			return look(f, why)
		})
	case SourceKustomize:
		r := p.reach(app).kust
		if r == nil {
			return nil
		}
		for _, n := range r.nodes {
			names, err := p.t.readDir(n.dir)
			if err != nil {
				continue
			}
			for _, name := range names {
				f := path.Join(n.dir, name)
				if f == n.file || !manifestFile.MatchString(name) || strings.HasSuffix(name, ".jsonnet") || r.reads(f) {
					continue
				}
				if st := p.t.stat(f); st.err != nil || st.kind != kindFile {
					continue
				}
				if !look(f, fmt.Sprintf("no kustomization of the app lists it (add it to the resources of %s)", n.file)) {
					return found
				}
			}
		}
	}
	return found
}

// maxUnreadEntries bounds the directory entries walkFiles looks at.
const maxUnreadEntries = 5000

// walkFiles calls fn for each file below dir, in listing order, until fn
// returns false or maxUnreadEntries entries were seen; a directory reached
// again through a symlink is entered once.
func (p *planner) walkFiles(dir string, fn func(string) bool) {
	seen := map[string]bool{}
	entries := 0
	var walk func(dir string) bool
	walk = func(dir string) bool {
		st := p.t.stat(dir)
		if st.err != nil || st.kind != kindDir || seen[st.canon] {
			return true
		}
		seen[st.canon] = true
		names, err := p.t.readDir(dir)
		if err != nil {
			return true
		}
		for _, name := range names {
			if entries++; entries > maxUnreadEntries {
				return false
			}
			f := path.Join(dir, name)
			switch st := p.t.stat(f); {
			case st.err != nil:
			case st.kind == kindDir:
				if !walk(f) {
					return false
				}
			case st.kind == kindFile:
				if !fn(f) {
					return false
				}
			}
		}
		return true
	}
	walk(dir)
}

// leftOut says which setting of a Directory app leaves out the manifest file f
// below its root, "" when the app reads it.
func (m *directoryMatcher) leftOut(app Application, f string) string {
	within := strings.TrimPrefix(f, m.root+"/")
	if m.root == "." {
		within = f
	}
	switch {
	case !m.recurse && strings.Contains(within, "/"):
		return "it is in a subdirectory and " + sourceSettings(app) + ".directory.recurse is off"
	case m.exclude != nil && m.exclude.Match(within):
		return fmt.Sprintf("%s.directory.exclude %q leaves it out", sourceSettings(app), app.Directory.Exclude)
	case m.include != nil && !m.include.Match(within):
		return fmt.Sprintf("%s.directory.include %q does not take it in", sourceSettings(app), app.Directory.Include)
	}
	return ""
}
