package render

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// maxManifestScan bounds how many YAML files applicationManifest reads.
const maxManifestScan = 2_000

// applicationManifest finds where the repository defines the Argo CD
// Application app names (an app-of-apps keeps its children's manifests in
// Git): "file, the document at line n", or "" when no YAML file of the
// repository defines it (within maxManifestScan files and the plan's read
// bounds). The name is render's ("namespace/name", a source or cluster suffix
// dropped); an Application manifest without a namespace matches any.
func (p *planner) applicationManifest(app string) string {
	key, _, _ := strings.Cut(app, " (")
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		ns, name = "", key
	}
	scanned := 0
	var found string
	var walk func(dir string) bool
	walk = func(dir string) bool {
		names, err := p.before.list(dir)
		if err != nil {
			return false
		}
		for _, n := range names {
			if strings.HasPrefix(n, ".") {
				continue // .git and the like hold no manifests Argo CD reads
			}
			rel := path.Join(dir, n)
			k, err := p.before.kind(rel)
			if err != nil {
				continue
			}
			if k == kindDir {
				if !walk(rel) {
					return false
				}
				continue
			}
			if ext := path.Ext(n); k != kindFile || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			if scanned++; scanned > maxManifestScan {
				return false
			}
			data, err := p.before.read(rel)
			if err != nil {
				return false // a bound of the plan: stop reading
			}
			if !bytes.Contains(data, []byte("Application")) || !bytes.Contains(data, []byte(name)) {
				continue
			}
			docs, err := yamledit.Documents(data)
			if err != nil {
				continue
			}
			for _, d := range docs {
				o, ok := newObject(d.Object)
				if !ok || !strings.HasPrefix(o.apiVersion, "argoproj.io/") || o.kind != "Application" || o.name != name || (ns != "" && o.namespace != "" && o.namespace != ns) {
					continue
				}
				found = fmt.Sprintf("%s, the document at line %d", rel, d.Line)
				return false
			}
		}
		return true
	}
	walk(".")
	return found
}
