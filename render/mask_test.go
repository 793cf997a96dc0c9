package render

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

const secretsNearby = `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: s3cr3t-value-1
  dsn: |
    postgres://user:s3cr3t-value-2@db/app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  LOG_LEVEL: info
  api_token: s3cr3t-value-3
  PrivateKey: s3cr3t-value-4
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web:1.0.0
`

func TestMaskFileLines(t *testing.T) {
	out := strings.Join(maskFileLines([]byte(secretsNearby), roleManifest), "")
	for _, v := range []string{"s3cr3t-value-1", "s3cr3t-value-2", "s3cr3t-value-3", "s3cr3t-value-4"} {
		if strings.Contains(out, v) {
			t.Errorf("masked file still shows %s:\n%s", v, out)
		}
	}
	for _, keep := range []string{"password: [redacted]", "api_token: [redacted]", "LOG_LEVEL: info", "name: db", "---", "replicas: 2"} {
		if !strings.Contains(out, keep) {
			t.Errorf("masked file lost %q:\n%s", keep, out)
		}
	}
	if got, want := len(maskFileLines([]byte(secretsNearby), roleManifest)), strings.Count(secretsNearby, "\n"); got != want {
		t.Errorf("masking changed the line count: %d, want %d", got, want)
	}
}

// TestSecretValuesNeverShown edits a document next to a Secret and a ConfigMap and
// requires that no output of Plan shows their values.
func TestSecretValuesNeverShown(t *testing.T) {
	// Put the secrets right after the edited line so they fall in the diff context.
	content := strings.Replace(secretsNearby, "apiVersion: apps/v1", "", 1)
	content = "apiVersion: apps/v1" + content[strings.Index(content, "\nkind: Deployment"):] + "---\n" + secretsNearby[:strings.Index(secretsNearby, "---\napiVersion: apps/v1")]
	repo := testtree.Write(t, map[string]string{"apps/web/all.yaml": content})
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Image: &Image{Container: "web", Tag: "1.0.1"}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if !strings.Contains(res.GitDiff, "kind: Secret") {
		t.Fatalf("the test needs the Secret in the diff context:\n%s", res.GitDiff)
	}
	all := res.GitDiff
	for _, d := range res.ClusterDiff {
		all += d.Diff
		for _, c := range d.Changes {
			all += c.Before + c.After
		}
	}
	for _, w := range res.Warnings {
		all += w.String()
	}
	for _, v := range []string{"s3cr3t-value-1", "s3cr3t-value-2", "s3cr3t-value-3", "s3cr3t-value-4"} {
		if strings.Contains(all, v) {
			t.Errorf("output shows secret value %s:\n%s", v, all)
		}
	}
}

func TestMaskBodyAndDifferences(t *testing.T) {
	secret := &object{apiVersion: "v1", kind: "Secret", name: "db", body: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "db"},
		"data":     map[string]any{"password": "c2VjcmV0"},
	}}
	after := deepCopy(secret.body).(map[string]any)
	after["data"].(map[string]any)["password"] = "bmV3LXNlY3JldA=="
	var diffs []difference
	compareValues(nil, secret.body, after, &diffs, 10)
	lines := strings.Join(describeDifferences(secret, diffs), "\n")
	if strings.Contains(lines, "c2VjcmV0") || strings.Contains(lines, "bmV3LXNlY3JldA") || !strings.Contains(lines, "data.password") {
		t.Fatalf("differences leak or lose the path: %s", lines)
	}
	d := objectDiff("app", objKey{Kind: "Secret", Name: "db"}, secret, &object{apiVersion: "v1", kind: "Secret", name: "db", body: after})
	if strings.Contains(d.Diff, "c2VjcmV0") || strings.Contains(d.Diff, "bmV3LXNlY3JldA") {
		t.Fatalf("object diff leaks a secret:\n%s", d.Diff)
	}
}

// kustomizeSecrets is a Kustomize app that holds a secret value in every shape
// render masks; each value is distinct so a leak names its shape.
var kustomizeSecrets = map[string]string{
	"apps/web/kustomization.yaml": `resources:
  - deployment.yaml
  - settings.yaml
secretGenerator:
  - name: db
    envs:
      - secret.env
    files:
      - tls.key
    literals:
      - "dsn=postgres://app:lit-W4mK8pZ1@db/app"
      - password=lit-Q7rT9vX2
images:
  - name: ghcr.io/example/web
    newTag: 1.0.0
configMapGenerator:
  - literals: [LOG_LEVEL=debug, db_password=cm-lit-H3nB6yU5]
    envs:
      - settings.env
    name: settings
patches:
  - target: {kind: Deployment, name: web}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web}
      spec:
        template:
          spec:
            containers:
              - name: web
                env:
                  - name: SERVICE_TOKEN
                    value: inline-J8cV2xN6
`,
	"apps/web/secret.env":   "# keys for the payment gateway\nAPI_TOKEN=env-F5gL1qS9\nREGION=eu\n",
	"apps/web/settings.env": "FEATURE_X=on\nWEBHOOK_SECRET=cmenv-D2kP7wE4\n",
	"apps/web/tls.key":      "-----BEGIN PRIVATE KEY-----\nfile-Z9aR3tY6\n-----END PRIVATE KEY-----\n",
	"apps/web/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {tier: front}
spec:
  replicas: 3
  selector: {matchLabels: {app: web, tier: front}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web
          env:
            - name: DB_PASSWORD
              value: env-entry-M6uC4hK8
            - name: LOG_FORMAT
              value: json
`,
	"apps/web/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
data:
  api_key: cm-key-B1vN5sQ3
  color: blue
---
apiVersion: v1
kind: Secret
metadata:
  name: manual
stringData:
  token: doc-X8eW2rT7
`,
}

// kustomizeSecretValues are the secret values of kustomizeSecrets.
var kustomizeSecretValues = []string{"lit-Q7rT9vX2", "lit-W4mK8pZ1", "cm-lit-H3nB6yU5", "inline-J8cV2xN6",
	"env-F5gL1qS9", "cmenv-D2kP7wE4", "file-Z9aR3tY6", "env-entry-M6uC4hK8", "cm-key-B1vN5sQ3", "doc-X8eW2rT7"}

// requireNoSecret fails when text shows any of values, clear or base64-encoded (as
// a rendered Secret's data holds them).
// planHidingSecrets plans req and fails t unless its git diff shows each of shows
// (masked lines, so the test sees the secrets' context) and nothing of the result
// shows a value of hidden.
func planHidingSecrets(t *testing.T, req Request, shows, hidden []string) *Result {
	t.Helper()
	res, err := Plan(context.Background(), req)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	for _, s := range shows {
		if !strings.Contains(res.GitDiff, s) {
			t.Errorf("git diff lacks %q; the secrets are not in its context:\n%s", s, res.GitDiff)
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the result", string(out), hidden)
	return res
}

func requireNoSecret(t *testing.T, what, text string, values []string) {
	t.Helper()
	for _, v := range values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(text, form) {
				t.Errorf("%s shows secret %s (as %q):\n%s", what, v, form, text)
			}
		}
	}
}

// TestKustomizeSecretsNeverShown plans an image change in the kustomization, whose
// diff context holds the generators, and an env change on a container that carries
// a secret env entry; no output may show a secret value, in any shape.
func TestKustomizeSecretsNeverShown(t *testing.T) {
	repo := testtree.Write(t, kustomizeSecrets)
	app := []Application{{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"}}
	target := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for name, tc := range map[string]struct {
		change Change
		shows  []string // masked lines the diff must show, so the test sees the secrets' context
	}{
		"image": {Change{Image: &Image{Container: "web", Tag: "1.0.1"}},
			[]string{"      - password=[redacted]\n", "  - literals: [redacted]\n"}},
		"env": {Change{Env: &Env{Container: "web", Set: map[string]string{"LOG_FORMAT": "text"}}},
			[]string{"              value: [redacted]\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			res := planHidingSecrets(t, Request{RepoDir: repo, Apps: app, Target: target, Change: tc.change}, tc.shows, kustomizeSecretValues)
			var diffs string
			for _, d := range res.ClusterDiff {
				diffs += d.Diff
			}
			if !strings.Contains(diffs, "value: '[redacted]'") {
				t.Errorf("the cluster diff lacks the Deployment's env; the test sees no env context:\n%s", diffs)
			}
		})
	}
}

func TestMaskFileLinesShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		role     sourceRole
		in, want string
	}{
		"secret literals keep keys": {roleManifest,
			"secretGenerator:\n- name: a\n  literals:\n  - user=app\n  - 'pass=x=y'\n  - \"tok=v\"\n",
			"secretGenerator:\n- name: a\n  literals:\n  - user=[redacted]\n  - 'pass=[redacted]'\n  - \"tok=[redacted]\"\n"},
		"config literals by name": {roleManifest,
			"configMapGenerator:\n- name: a\n  literals: [LEVEL=info, api_key=k]\n  envs: [a.env]\n",
			"configMapGenerator:\n- name: a\n  literals: [redacted]\n  envs: [a.env]\n"},
		"env entry in a list, crlf": {roleManifest,
			"env:\r\n- name: MY_TOKEN\r\n  # rotated monthly\r\n  value: >-\r\n    abc\r\n    def\r\n- name: HOST\r\n  value: h\r\n",
			"env:\r\n- name: MY_TOKEN\r\n  # rotated monthly\r\n  value: [redacted]\r\n    [redacted]\r\n    [redacted]\r\n- name: HOST\r\n  value: h\r\n"},
		"secret env file": {roleSecretEnv,
			"# comment\nA=1\n\nB=two=2\nNOVALUE",
			"# comment\nA=[redacted]\n\nB=[redacted]\nNOVALUE"},
		"config env file": {roleConfigEnv,
			"COLOR=blue\nDB_PASSWORD=p\n",
			"COLOR=blue\nDB_PASSWORD=[redacted]\n"},
		"secret file": {roleSecretFile,
			"line one\n\n  line two",
			"[redacted]\n\n  [redacted]"},
		"unparsable with a secret": {roleManifest,
			"kind: Secret\ndata: {a: [\n",
			"kind: [redacted]\ndata: [redacted]\n"},
		"plain config stays": {roleManifest,
			"apiVersion: v1\nkind: ConfigMap\ndata:\n  color: blue\n  monkey: x\n",
			"apiVersion: v1\nkind: ConfigMap\ndata:\n  color: blue\n  monkey: x\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := strings.Join(maskFileLines([]byte(tc.in), tc.role), ""); got != tc.want {
				t.Errorf("masked:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// TestGeneratorRolesFollowKustomizations: a file is masked as a generator source
// when a kustomization at or above it names it, before or after the edit.
func TestGeneratorRolesFollowKustomizations(t *testing.T) {
	kusts := map[string][][]byte{
		"apps":     {[]byte("secretGenerator:\n- name: s\n  envs: [web/s.env]\n  files: [k=web/id_rsa]\n")},
		"apps/web": {[]byte("configMapGenerator:\n- name: c\n  env: c.env\n  files: [plain.txt, token.txt]\n")},
	}
	got := generatorRoles([]string{"apps/web/s.env", "apps/web/id_rsa", "apps/web/c.env", "apps/web/plain.txt", "apps/web/token.txt", "apps/web/deploy.yaml"},
		func(dir string) [][]byte { return kusts[dir] })
	want := map[string]sourceRole{"apps/web/s.env": roleSecretEnv, "apps/web/id_rsa": roleSecretFile,
		"apps/web/c.env": roleConfigEnv, "apps/web/token.txt": roleSecretFile}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("roles %v, want %v", got, want)
	}
}

func TestDifferencesMaskNestedSecrets(t *testing.T) {
	dep := &object{apiVersion: "apps/v1", kind: "Deployment", name: "web"}
	container := map[string]any{"name": "web", "env": []any{map[string]any{"name": "DB_PASSWORD", "value": "nested-R5tY7uI9"}}}
	diffs := []difference{
		{segs: []string{"spec", "template", "spec", "containers", "[name=web]"}, want: absent{}, got: container},
		{segs: []string{"spec", "template", "spec", "containers", "[name=web]", "env", "[name=DB_PASSWORD]", "value"}, want: "nested-R5tY7uI9", got: "other-O2pL4kJ6"},
	}
	lines := strings.Join(describeDifferences(dep, diffs), "\n")
	requireNoSecret(t, "differences", lines, []string{"nested-R5tY7uI9", "other-O2pL4kJ6"})
	if !strings.Contains(lines, "DB_PASSWORD") {
		t.Errorf("differences lost the env name: %s", lines)
	}
}

// TestSecretKeysBesideSpecAreMasked: the secret-looking key of a custom resource
// beside its spec (an OpenShift OAuthClient keeps its client secret at the top)
// is masked in a cluster diff, a verification's differences and free text, as a
// file of the object masks it (failed before: the cluster diff showed it, only
// the keys under another one were masked).
func TestSecretKeysBesideSpecAreMasked(t *testing.T) {
	const value = "oauth-client-Z7xQ2w9K"
	client := &object{apiVersion: "oauth.openshift.io/v1", kind: "OAuthClient", name: "console", body: map[string]any{
		"apiVersion": "oauth.openshift.io/v1", "kind": "OAuthClient", "metadata": map[string]any{"name": "console"},
		"secret": value, "grantMethod": "auto", "redirectURIs": []any{"https://console.example.com/auth/callback"}}}
	d := objectDiff("app", objKey{Kind: client.kind, Name: client.name}, nil, client)
	requireNoSecret(t, "the cluster diff", d.Diff, []string{value})
	for _, k := range []string{"secret: '[redacted]'", "grantMethod: auto", "https://console.example.com/auth/callback"} {
		if !strings.Contains(d.Diff, k) {
			t.Errorf("the cluster diff lacks %q:\n%s", k, d.Diff)
		}
	}
	lines := strings.Join(describeDifferences(client, []difference{{segs: []string{"secret"}, want: value, got: "oauth-client-other1"}}), "\n")
	requireNoSecret(t, "the differences", lines, []string{value, "oauth-client-other1"})
	text := MaskText([]ChangedObject{{Object: client.body}}, "denied: secret "+value)
	requireNoSecret(t, "the masked text", text, []string{value})
	file := "apiVersion: oauth.openshift.io/v1\nkind: OAuthClient\nmetadata:\n  name: console\nsecret: " + value + "\ngrantMethod: auto\n"
	got, err := MaskedFile(fstest.MapFS{"client.yaml": {Data: []byte(file)}}, "client.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the masked file", got, []string{value})
}

// TestRefusalsDoNotQuoteSecrets: kustomize quotes a literal it cannot read in its
// error, which becomes the refusal's reason; the reason must not show the value.
func TestRefusalsDoNotQuoteSecrets(t *testing.T) {
	files := map[string]string{}
	for k, v := range kustomizeSecrets {
		files[k] = v
	}
	files["apps/web/kustomization.yaml"] = strings.Replace(files["apps/web/kustomization.yaml"], "- password=lit-Q7rT9vX2", "- lit-Q7rT9vX2", 1)
	repo := testtree.Write(t, files)
	_, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Image: &Image{Container: "web", Tag: "1.0.1"}}})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeRenderFailed || !strings.Contains(ref.Reason, "invalid literal source") {
		t.Fatalf("Plan: %v, want kustomize's refusal of the literal", err)
	}
	requireNoSecret(t, "the refusal", err.Error()+ref.Reason+fmt.Sprint(ref.Attempts), []string{"lit-Q7rT9vX2"})
	if !strings.Contains(ref.Reason, "invalid literal source [redacted]") {
		t.Errorf("reason %q does not say where the value was", ref.Reason)
	}
}

func TestScrubberKeepsErrorIdentity(t *testing.T) {
	s := newScrubber([]string{"hunter22", "x"})
	base := errors.New("open db: password hunter22 rejected")
	err := s.err(fmt.Errorf("render: %w", base))
	if err.Error() != "render: open db: password [redacted] rejected" || !errors.Is(err, base) {
		t.Errorf("scrubbed %q (is base: %v)", err, errors.Is(err, base))
	}
	if got := s.text("base64 " + base64.StdEncoding.EncodeToString([]byte("hunter22")) + ", x marks"); got != "base64 [redacted], x marks" {
		t.Errorf("scrubbed text %q: want the base64 form replaced and short values left", got)
	}
}

func TestMaskTextMasksTheValuesOfTheObjects(t *testing.T) {
	repo := testtree.Write(t, kustomizeSecrets)
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Env: &Env{Container: "web", Set: map[string]string{"LOG_FORMAT": "text"}}}})
	if err != nil {
		t.Fatal(err)
	}
	secret := ChangedObject{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"data": map[string]any{"token": base64.StdEncoding.EncodeToString([]byte("doc-X8eW2rT7"))}}}
	msg := "admission webhook denied: env DB_PASSWORD=env-entry-M6uC4hK8, SERVICE_TOKEN=inline-J8cV2xN6, token doc-X8eW2rT7, LOG_FORMAT=text"
	got := MaskText(append(res.Changed, secret), msg)
	requireNoSecret(t, "masked text", got, kustomizeSecretValues)
	if got != "admission webhook denied: env DB_PASSWORD=[redacted], SERVICE_TOKEN=[redacted], token [redacted], LOG_FORMAT=text" {
		t.Errorf("masked text %q", got)
	}
}

// TestCandidateLogLineDoesNotQuoteSecrets: an app that reads the edited file but
// cannot render (kustomize quotes its bad literal) fails the first candidate; the
// debug line about that candidate leaves before Plan scrubs its answer.
func TestCandidateLogLineDoesNotQuoteSecrets(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"apps/web/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - name: web\n          image: ghcr.io/example/web:1.0.0\n",
		"apps/web/kustomization.yaml":   "resources: [deployment.yaml]\n",
		"apps/other/kustomization.yaml": "resources: [../web]\nsecretGenerator:\n  - name: db\n    literals:\n      - lit-K4dS8fG2\n",
	})
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(context.Background())
	_, err := Plan(ctx, Request{RepoDir: repo, App: "web",
		Apps: []Application{{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"},
			{Name: "other", Path: "apps/other", SourceType: SourceKustomize, Namespace: "other"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Image: &Image{Container: "web", Tag: "1.0.1"}}})
	if !strings.Contains(logs.String(), "cannot be rendered") {
		t.Fatalf("no log line about the app that cannot render (Plan: %v):\n%s", err, logs.String())
	}
	requireNoSecret(t, "the log", logs.String(), []string{"lit-K4dS8fG2"})
	if err != nil {
		requireNoSecret(t, "the answer", err.Error(), []string{"lit-K4dS8fG2"})
	}
}

// TestSecretValuesOfEveryShape: the values scrubbed from free text are the values
// the diffs mask, in every shape, generator sources included.
func TestSecretValuesOfEveryShape(t *testing.T) {
	s := treeScrubber(t, kustomizeSecrets)
	// The DSN literal's password counts on its own too.
	all := strings.Join(append(kustomizeSecretValues, "postgres://app:lit-W4mK8pZ1@db/app"), " | ")
	got := s.text(all)
	requireNoSecret(t, "scrubbed text", got, kustomizeSecretValues)
	for _, keep := range []string{"LOG_LEVEL", "debug", "blue", "REGION=eu", "json"} {
		if s.text(keep) != keep {
			t.Errorf("scrubbing changes %q, which is no secret", keep)
		}
	}
}

// treeScrubber is what a plan scrubs its free text with once it has read every
// one of files.
func treeScrubber(t *testing.T, files map[string]string) *scrubber {
	t.Helper()
	tr, err := openTree(testtree.Write(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for p := range files {
		if _, err := tr.readFile(p); err != nil {
			t.Fatal(err)
		}
	}
	return newScrubber(tr.secretValues(nil))
}

// TestDiffShowsAChangedSecretLine: an edit that changes only a secret value shows
// its line changed, the value masked on both sides; masked alike, the two lines
// were equal and the diff showed a file header without a hunk.
func TestDiffShowsAChangedSecretLine(t *testing.T) {
	old := "secretGenerator:\n  - name: db\n    literals:\n      - password=old-s3cr3t\n      - user=app\n"
	next := strings.Replace(old, "old-s3cr3t", "new-s3cr3t", 1)
	for name, tc := range map[string]struct {
		path     string
		old, new string
		role     sourceRole
		want     []string
	}{
		"a secretGenerator literal": {"kustomization.yaml", old, next, roleManifest,
			[]string{"@@ -1,5 +1,5 @@", "-      - password=[redacted]\n", "+      - password=[redacted]\n", "       - user=[redacted]\n"}},
		"a secretGenerator env file": {"db.env", "password=old-s3cr3t\nuser=app\n", "password=new-s3cr3t\nuser=app\n", roleSecretEnv,
			[]string{"-password=[redacted]\n", "+password=[redacted]\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			out := gitDiff([]FileEdit{{Path: tc.path, Old: []byte(tc.old), New: []byte(tc.new)}}, map[string]sourceRole{tc.path: tc.role})
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("diff lacks %q:\n%s", w, out)
				}
			}
			for _, v := range []string{"old-s3cr3t", "new-s3cr3t"} {
				if strings.Contains(out, v) {
					t.Errorf("diff shows the secret %s:\n%s", v, out)
				}
			}
		})
	}
}

// TestSecretDataIsScrubbedDecodedToo: a Secret's data holds its values in
// base64, and a message may quote either form (a rendered Secret's field, or the
// value a container reads); both are scrubbed from free text, whether the
// value is in a Secret's manifest or set by a JSON 6902 patch of a Secret,
// inline, in a patch file, or as a whole data mapping (failed before: only the
// base64 form of a manifest's or a patch's value was scrubbed, and nothing of a
// data mapping a patch adds).
func TestSecretDataIsScrubbedDecodedToo(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	files := map[string]string{
		"apps/web/kustomization.yaml": "resources:\n- secret.yaml\npatches:\n" +
			"- target: {kind: Secret, name: db}\n  patch: |-\n    - op: add\n      path: /data/inline\n      value: " + enc("inline-patch-Q4w8") + "\n" +
			"- target: {kind: Secret, name: db}\n  path: replace.yaml\n" +
			"patchesJson6902:\n- target: {version: v1, kind: Secret, name: db}\n  path: whole.yaml\n",
		"apps/web/secret.yaml":  "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: " + enc("manifest-data-K2p9") + "\n",
		"apps/web/replace.yaml": "- op: replace\n  path: /data/password\n  value: " + enc("patch-file-M7x3") + "\n",
		"apps/web/whole.yaml":   "- op: add\n  path: /data\n  value:\n    token: " + enc("patch-map-T5z1") + "\n",
	}
	s := treeScrubber(t, files)
	for _, v := range []string{"manifest-data-K2p9", "inline-patch-Q4w8", "patch-file-M7x3", "patch-map-T5z1"} {
		for _, form := range []string{v, enc(v)} {
			if got := s.text("denied: " + form); got != "denied: [redacted]" {
				t.Errorf("scrubbed text %q, want %q (of %s) replaced", got, form, v)
			}
		}
	}
}

// TestRefusalsDoNotQuoteTheApplicationsSecrets: what an Application sets itself
// (a secret-looking Helm parameter, its valuesObject) is masked in its cluster
// diff, and is scrubbed from a refusal's reason as a values file's would be: a
// parameter Helm cannot parse is quoted whole, and a chart's fail message may
// quote a value (failed before: both reasons showed the value).
func TestRefusalsDoNotQuoteTheApplicationsSecrets(t *testing.T) {
	files := map[string]string{
		"chart/Chart.yaml": "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"chart/templates/check.yaml": "{{ if .Values.db.password }}{{ fail (printf \"db.password %s is not accepted\" .Values.db.password) }}{{ end }}\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n",
	}
	repo := testtree.Write(t, files)
	for name, tc := range map[string]struct {
		helm   HelmOptions
		secret string
	}{
		"a parameter Helm cannot parse": {HelmOptions{Parameters: []HelmParameter{{Name: "db.password", Value: "{kk-param-S4v1,x"}}}, "{kk-param-S4v1,x"},
		"a valuesObject value quoted":   {HelmOptions{Values: "db:\n  password: kk-object-R8m2\n", ValuesField: "valuesObject"}, "kk-object-R8m2"},
		"a parameter quoted":            {HelmOptions{Parameters: []HelmParameter{{Name: "db.password", Value: "kk-param-T3n7"}}}, "kk-param-T3n7"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.helm.ReleaseName = "probe"
			app := Application{Name: "probe", Path: "chart", SourceType: SourceHelm, Helm: tc.helm}
			_, err := Render(context.Background(), repo, app)
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("Render: %v, want a refusal", err)
			}
			requireNoSecret(t, "the refusal", err.Error()+ref.Reason, []string{tc.secret, strings.ReplaceAll(tc.secret, ",", `\,`)})
			_, err = Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
				Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "probe"}, Change: Change{Replicas: &Replicas{Count: 2}}})
			if err == nil {
				t.Fatal("Plan rendered the chart that fails")
			}
			requireNoSecret(t, "the plan's refusal", err.Error(), []string{tc.secret, strings.ReplaceAll(tc.secret, ",", `\,`)})
		})
	}
}

// TestAppSecretValuesOfInlinePatches: the secret values of an Application's
// inline kustomize patches are scrubbed as a kustomization's are, and a
// parameter whose secret-looking name sets a word (auth.enabled=true) is not
// scrubbed from every message that uses the word.
func TestAppSecretValuesOfInlinePatches(t *testing.T) {
	app := Application{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Kustomize: KustomizeOptions{Patches: []map[string]any{
		{"target": map[string]any{"kind": "Secret", "name": "db"}, "patch": "- op: replace\n  path: /stringData/password\n  value: kk-app-patch-W1\n"},
		{"target": map[string]any{"kind": "Deployment"}, "patch": "- op: add\n  path: /spec/template/spec/containers/0/env/-\n  value: {name: API_TOKEN, value: kk-app-patch-W2}\n"},
	}}, Helm: HelmOptions{Parameters: []HelmParameter{{Name: "auth.enabled", Value: "true"}}}}
	s := newScrubber(appSecretValues([]Application{app}))
	if got := s.text("denied: kk-app-patch-W1, kk-app-patch-W2, true"); got != "denied: [redacted], [redacted], true" {
		t.Errorf("scrubbed text %q", got)
	}
}

// TestRevertRefusalsDoNotQuoteSecrets: a revert's refusal is scrubbed of the
// secret values of the files it read, as a plan's is (failed before: kustomize's
// "invalid literal source" quoted a secretGenerator literal in the reason).
func TestRevertRefusalsDoNotQuoteSecrets(t *testing.T) {
	files := map[string]string{}
	for k, v := range kustomizeSecrets {
		files[k] = v
	}
	apps := []Application{{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"}}
	orig, err := Plan(context.Background(), Request{RepoDir: testtree.Write(t, files), Apps: apps,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	origDir := testtree.Write(t, files)
	for _, e := range orig.Edits {
		files[e.Path] = string(e.New)
	}
	files["apps/web/kustomization.yaml"] = strings.Replace(files["apps/web/kustomization.yaml"], "- password=lit-Q7rT9vX2", "- lit-Q7rT9vX2", 1)
	_, err = Revert(context.Background(), RevertRequest{RepoDir: testtree.Write(t, files), Apps: apps, App: "web", OriginalDir: origDir, Edits: orig.Edits})
	var ref *Refusal
	if !errors.As(err, &ref) || !strings.Contains(err.Error()+ref.Reason+fmt.Sprint(ref.Attempts), "invalid literal source") {
		t.Fatalf("Revert: %v, want kustomize's refusal of the literal", err)
	}
	requireNoSecret(t, "the revert's refusal", err.Error()+ref.Reason+fmt.Sprint(ref.Attempts), []string{"lit-Q7rT9vX2"})
}

// TestConfigMapBinaryDataIsScrubbedDecodedToo: a ConfigMap's binaryData holds
// its values in base64 as a Secret's data does; the value of a secret-looking
// key is scrubbed from free text in both forms, from its file, a JSON 6902
// patch of it and the object alike (failed before: only the base64 form).
func TestConfigMapBinaryDataIsScrubbedDecodedToo(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("binary-key-P3q8"))
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keys\nbinaryData:\n  signing.key: " + enc + "\n"
	patched := base64.StdEncoding.EncodeToString([]byte("binary-patch-N6v2"))
	s := treeScrubber(t, map[string]string{"apps/web/keys.yaml": doc, "apps/web/kustomization.yaml": "resources: [keys.yaml]\npatches:\n" +
		"- target: {kind: ConfigMap, name: keys}\n  patch: |-\n    - op: replace\n      path: /binaryData/signing.key\n      value: " + patched + "\n"})
	if got := s.text("denied: binary-patch-N6v2"); got != "denied: [redacted]" {
		t.Errorf("scrubbed text %q, want the patched value replaced", got)
	}
	obj := ChangedObject{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "binaryData": map[string]any{"signing.key": enc}}}
	for _, form := range []string{"binary-key-P3q8", enc} {
		if got := s.text("denied: " + form); got != "denied: [redacted]" {
			t.Errorf("scrubbed text %q, want %q replaced", got, form)
		}
		if got := MaskText([]ChangedObject{obj}, "denied: "+form); got != "denied: [redacted]" {
			t.Errorf("masked text %q, want %q replaced", got, form)
		}
	}
}
