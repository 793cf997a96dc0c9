package argocd

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadApplications(t *testing.T) {
	app := func(name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: " + name +
			"\n  namespace: argocd\nspec:\n  source:\n    repoURL: https://github.com/acme/deploy\n    path: apps/" + name + "\n"
	}
	fsys := fstest.MapFS{
		"apps/web.yaml":        {Data: []byte(app("web") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n")},
		"apps/api.yml":         {Data: []byte(app("api"))},
		"apps/notes.txt":       {Data: []byte(app("ignored"))},
		"apps/nested/db.yaml":  {Data: []byte(app("nested"))},
		"none/cm.yaml":         {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n")},
		"broken/app.yaml":      {Data: []byte("kind: Application\nmetadata: [\n")},
		"single/only.json":     {Data: []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"solo"}}`)},
		"single/unrelated.txt": {Data: []byte("x")},
	}
	names := func(apps []Application) string {
		var n []string
		for _, a := range apps {
			n = append(n, a.Name)
		}
		return strings.Join(n, ",")
	}
	for name, tc := range map[string]struct{ path, want, err string }{
		"a file":            {path: "apps/web.yaml", want: "web"},
		"a directory":       {path: "apps", want: "api,web"},
		"a json file":       {path: "single/only.json", want: "solo"},
		"no application":    {path: "none", err: "no Argo CD Application found"},
		"a broken manifest": {path: "broken", err: "broken/app.yaml"},
		"a missing path":    {path: "missing.yaml", err: "missing.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			apps, err := ReadApplications(fsys, tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadApplications(%s) = %v, %v; want an error naming %q", tc.path, names(apps), err, tc.err)
				}
				return
			}
			if err != nil || names(apps) != tc.want {
				t.Fatalf("ReadApplications(%s) = %s, %v; want %s", tc.path, names(apps), err, tc.want)
			}
		})
	}
}
