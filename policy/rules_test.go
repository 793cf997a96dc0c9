package policy

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/render"
)

const pinned = "ghcr.io/acme/migrate@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// ruleFiles is a repository of a kustomize app (shop) and a directory app (plain),
// each breaking some rules; the line each breaks one at is noted in the tests.
var ruleFiles = map[string]string{
	"apps/shop/kustomization.yaml": `namePrefix: shop-
resources:
- deployment.yaml
- rbac.yaml
secretGenerator:
- name: db
  literals:
  - password=hunter2
`,
	"apps/shop/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
      - name: migrate
        image: ` + pinned + `
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: kube-system
`,
	"apps/shop/rbac.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: admins
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: Group
  name: ops
  apiGroup: rbac.authorization.k8s.io
---
apiVersion: v1
kind: Secret
metadata:
  name: token
stringData:
  token: s3cr3t-value
`,
	"apps/plain/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: shop
---
apiVersion: v1
kind: Pod
metadata:
  name: debug
  namespace: shop
spec:
  containers:
  - name: sh
    image: busybox
`,
}

const allRules = `rules:
  image_digest: {level: error}
  image_registries: {level: error, allowed: [ghcr.io/acme]}
  namespaces: {level: error, allowed: [shop]}
  secret_values: {level: error}
  denied_kinds:
    level: error
    kinds:
    - {kind: ClusterRoleBinding, role_ref: cluster-admin}
`

func renderApp(t *testing.T, dir string, app render.Application) App {
	t.Helper()
	objs, err := render.Render(context.Background(), dir, app)
	if err != nil {
		t.Fatal(err)
	}
	return App{Name: app.Name, Namespace: app.Namespace, Objects: objs}
}

var (
	shopApp  = render.Application{Name: "shop", Path: "apps/shop", SourceType: render.SourceKustomize, Namespace: "shop"}
	plainApp = render.Application{Name: "plain", Path: "apps/plain", SourceType: render.SourceDirectory, Namespace: "shop"}
)

// spots lists findings as "rule path:line".
func spots(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s:%d", f.Rule, f.Path, f.Line))
	}
	sort.Strings(out)
	return out
}

func TestEvaluateFindsEachRuleAtItsManifestLine(t *testing.T) {
	dir := testtree.Write(t, ruleFiles)
	c, err := Parse([]byte(allRules))
	if err != nil {
		t.Fatal(err)
	}
	fsys := os.DirFS(dir)
	cases := map[string]struct {
		app  render.Application
		want []string
	}{
		"kustomize": {shopApp, []string{
			"denied_kinds apps/shop/rbac.yaml:8",
			"image_digest apps/shop/deployment.yaml:13",
			"image_registries apps/shop/deployment.yaml:13",
			"namespaces apps/shop/deployment.yaml:19",
			"secret_values apps/shop/kustomization.yaml:7",
			"secret_values apps/shop/rbac.yaml:18",
		}},
		"directory": {plainApp, []string{
			"image_digest apps/plain/all.yaml:15",
			"image_registries apps/plain/all.yaml:15",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			found := c.Evaluate(renderApp(t, dir, tc.app), fsys)
			if got := spots(found); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, f := range found {
				if f.Level != LevelError || f.App != tc.app.Name || f.Object == "" {
					t.Errorf("finding %+v", f)
				}
				for _, secret := range []string{"hunter2", "s3cr3t-value"} {
					if strings.Contains(f.Message, secret) {
						t.Errorf("finding shows a Secret value: %+v", f)
					}
				}
			}
		})
	}
}

func TestEvaluateNothingWithoutRules(t *testing.T) {
	dir := testtree.Write(t, ruleFiles)
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if found := c.Evaluate(renderApp(t, dir, shopApp), os.DirFS(dir)); len(found) != 0 {
		t.Fatalf("findings %v with no rule on", spots(found))
	}
}

func TestEvaluateRuleDetails(t *testing.T) {
	dir := testtree.Write(t, ruleFiles)
	app := renderApp(t, dir, shopApp)
	cases := map[string]struct {
		config string
		want   []string
	}{
		"a registry allows its own path only": {"rules:\n  image_registries: {level: warning, allowed: [ghcr.io/acm, docker.io/library]}\n",
			[]string{"image_registries apps/shop/deployment.yaml:10"}},
		"docker.io allows Docker Hub's short names": {"rules:\n  image_registries: {level: warning, allowed: [docker.io, ghcr.io]}\n", nil},
		"a namespace pattern":                       {"rules:\n  namespaces: {level: notice, allowed: [\"sh*\", kube-*]}\n", nil},
		"a denied kind by group": {"rules:\n  denied_kinds: {level: error, kinds: [{kind: ClusterRoleBinding, group: rbac.authorization.k8s.io}]}\n",
			[]string{"denied_kinds apps/shop/rbac.yaml:2"}},
		"another group is not denied": {"rules:\n  denied_kinds: {level: error, kinds: [{kind: ClusterRoleBinding, group: \"\"}]}\n", nil},
		"a binding of another role":   {"rules:\n  denied_kinds: {level: error, kinds: [{kind: ClusterRoleBinding, role_ref: view}]}\n", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			got := spots(c.Evaluate(app, os.DirFS(dir)))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSecretValuesFindsPlainEnvValuesOfSecretLookingNames: secret_values also
// finds a container's env variable of a secret-looking name given its value in
// plain text, in any pod template (a Deployment's, a CronJob's job template's
// init containers), written in the document or by a kustomize patch, at the
// rule's level and the variable's line when the document spells it, never
// quoting the value. A flag (REDIS_AUTH: "true"), an empty value, a value
// from a Secret and a name that looks like no secret's are not findings.
func TestSecretValuesFindsPlainEnvValuesOfSecretLookingNames(t *testing.T) {
	dir := testtree.Write(t, map[string]string{
		"apps/env/all.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - name: LOG_LEVEL
          value: info
        - name: REDIS_AUTH
          value: "true"
        - name: API_TOKEN
          value: ""
        - name: SESSION_SECRET
          valueFrom:
            secretKeyRef: {name: web, key: cookie-signing}
        - name: DB_PASSWORD
          value: plain-Pw4x9
        - name: DATABASE_URL
          value: postgres://app:plain-Url5k1@db:5432/app
        - name: CACHE_URL
          value: redis://cache:6379/0
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  namespace: shop
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          initContainers:
          - name: migrate
            image: nginx:1.27
            env:
            - name: apiKey
              value: plain-Key7q2
          containers:
          - name: report
            image: nginx:1.27
`,
		"apps/patched/kustomization.yaml": `resources:
- deployment.yaml
patches:
- patch: |-
    - op: add
      path: /spec/template/spec/containers/0/env
      value: [{name: STRIPE_API_KEY, value: plain-Sk3m8}]
  target: {kind: Deployment, name: api}
`,
		"apps/patched/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  template:
    spec:
      containers:
      - name: api
        image: nginx:1.27
`,
	})
	c, err := Parse([]byte("rules:\n  secret_values: {level: warning}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := os.DirFS(dir)
	for name, tc := range map[string]struct {
		app  render.Application
		want []string
		in   []string
	}{
		"in the documents": {render.Application{Name: "env", Path: "apps/env", SourceType: render.SourceDirectory, Namespace: "shop"},
			[]string{"secret_values apps/env/all.yaml:23", "secret_values apps/env/all.yaml:25", "secret_values apps/env/all.yaml:45"},
			[]string{"container web: env DB_PASSWORD looks like a secret", "container migrate: env apiKey looks like a secret",
				"container web: env DATABASE_URL holds a secret (a URL's password or a private key)"}},
		"by a kustomize patch": {render.Application{Name: "patched", Path: "apps/patched", SourceType: render.SourceKustomize, Namespace: "shop"},
			[]string{"secret_values apps/patched/deployment.yaml:9"},
			[]string{"container api: env STRIPE_API_KEY looks like a secret"}},
	} {
		t.Run(name, func(t *testing.T) {
			found := c.Evaluate(renderApp(t, dir, tc.app), fsys)
			if got := spots(found); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			var messages []string
			for _, f := range found {
				if f.Level != LevelWarning || f.Rule != RuleSecretValues {
					t.Errorf("finding %+v, want a secret_values warning", f)
				}
				for _, v := range []string{"plain-Pw4x9", "plain-Key7q2", "plain-Sk3m8", "plain-Url5k1"} {
					if strings.Contains(f.Message, v) {
						t.Errorf("finding shows the value: %+v", f)
					}
				}
				messages = append(messages, f.Message)
			}
			for _, w := range tc.in {
				if !strings.Contains(strings.Join(messages, "\n"), w) {
					t.Errorf("findings lack %q:\n%s", w, strings.Join(messages, "\n"))
				}
			}
		})
	}
}
