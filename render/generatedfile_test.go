package render

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// TestRemovedGeneratorFileThroughASymlinkStays: a data key whose files source
// the generator reads through a symlink is removed from the entry, and the
// file stays with a warning saying so: deleting the link would leave the file
// it names, and deleting that file would break every other link to it.
func TestRemovedGeneratorFileThroughASymlinkStays(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"apps/web/kustomization.yaml": "configMapGenerator:\n  - name: web-settings\n    literals:\n      - MODE=fast\n    files:\n      - legacy.conf=conf/legacy.conf\n",
		"apps/web/shared/legacy.conf": "rewrite ^/old /new;\n",
	})
	writeLinks(t, repo, map[string]string{"apps/web/conf/legacy.conf": "../shared/legacy.conf"})
	app := Application{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"}
	objs, err := Render(context.Background(), repo, app)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, o := range objs {
		if o.Manifest["kind"] == "ConfigMap" {
			name, _ = o.Manifest["metadata"].(map[string]any)["name"].(string)
		}
	}
	var change Change
	if err := json.Unmarshal([]byte(`{"patch":{"set":[{"path":"/data/legacy.conf","value":null}]}}`), &change); err != nil {
		t.Fatal(err)
	}
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
		Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: name}, Change: change})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Edits {
		if e.New == nil {
			t.Errorf("the plan removes %s", e.Path)
		}
	}
	found := false
	for _, w := range res.Warnings {
		found = found || (w.Code == "unread_file" && strings.Contains(w.Message, "through a symlink"))
	}
	if !found {
		t.Errorf("no unread_file warning about the symlink: %+v", res.Warnings)
	}
}
