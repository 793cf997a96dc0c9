package render

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// goldenInput is the input repository and request of the golden case name, with
// edit applied to both (the request's Applications mirror the manifests).
func goldenInput(t *testing.T, name string, edit func(files map[string]string, req *goldenRequest)) (map[string]string, goldenRequest) {
	t.Helper()
	dir := filepath.Join(goldenRoot, name)
	req := readGoldenRequest(t, dir)
	files := map[string]string{}
	for p, data := range relSnapshot(t, filepath.Join(dir, "input")) {
		files[p] = string(data)
	}
	edit(files, &req)
	return files, req
}

// replaceOnce replaces old in files[name], failing when it is not there.
func replaceOnce(t *testing.T, files map[string]string, name, old, new string) {
	t.Helper()
	if !strings.Contains(files[name], old) {
		t.Fatalf("%s lacks %q:\n%s", name, old, files[name])
	}
	files[name] = strings.Replace(files[name], old, new, 1)
}

// TestHelmValuesSecretsNeverShown plans changes of Helm apps whose values (a values
// file, an Application's valuesObject, its values string) hold secret-looking keys
// next to the edited line: no output shows their values, and the lines the change
// edits are shown.
func TestHelmValuesSecretsNeverShown(t *testing.T) {
	const secrets = "apiKey: vals-K3y9Qa2x\ndb:\n  password: vals-P4ss7Wd1\n  host: db.prod\n"
	for name, tc := range map[string]struct {
		golden string
		edit   func(t *testing.T, files map[string]string, req *goldenRequest)
		change Change
		hidden []string
		shows  []string
	}{
		"a values file": {golden: "helm-app-of-apps-values-object",
			edit: func(t *testing.T, files map[string]string, _ *goldenRequest) {
				replaceOnce(t, files, "envs/prod/values.yaml", "image:\n  tag: \"1.25.4\"\n", "image:\n  tag: \"1.25.4\"\n"+secrets)
			},
			change: Change{Image: &Image{Container: "web", Tag: "1.25.5"}},
			hidden: []string{"vals-P4ss7Wd1", "vals-K3y9Qa2x"},
			shows:  []string{"+  tag: \"1.25.5\"\n", " apiKey: [redacted]\n", "   password: [redacted]\n"}},
		"a values file with a kind and an apiVersion": {golden: "helm-app-of-apps-values-object",
			edit: func(t *testing.T, files map[string]string, _ *goldenRequest) {
				replaceOnce(t, files, "envs/prod/values.yaml", "image:\n  tag: \"1.25.4\"\n", "image:\n  tag: \"1.25.4\"\n"+secrets+"apiVersion: v1\nkind: Database\n")
			},
			change: Change{Image: &Image{Container: "web", Tag: "1.25.5"}},
			hidden: []string{"vals-P4ss7Wd1", "vals-K3y9Qa2x"},
			shows:  []string{"+  tag: \"1.25.5\"\n", " apiKey: [redacted]\n", "   password: [redacted]\n"}},
		"an Application's valuesObject": {golden: "helm-app-of-apps-values-object",
			edit: func(t *testing.T, files map[string]string, req *goldenRequest) {
				replaceOnce(t, files, "argocd/apps/web.yaml", "            memory: 256Mi\n", "            memory: 256Mi\n        auth:\n          token: vobj-T0k3n5x1\n          enabled: true\n")
				req.Apps[0].Helm.Values = "auth:\n  enabled: true\n  token: vobj-T0k3n5x1\n" + req.Apps[0].Helm.Values
			},
			change: Change{Resources: &Resources{Container: "web", Limits: map[string]string{"cpu": "1"}}},
			hidden: []string{"vobj-T0k3n5x1"},
			shows:  []string{"+            cpu: \"1\"\n", "           token: [redacted]\n"}},
		"an Application's values string": {golden: "helm-app-of-apps-values",
			edit: func(t *testing.T, files map[string]string, req *goldenRequest) {
				replaceOnce(t, files, "argocd/apps/web.yaml", "          tag: \"1.25.5\"\n", "          tag: \"1.25.5\"\n        db:\n          password: vstr-Q8wE3rT5\n")
				req.Apps[0].Helm.Values = strings.Replace(req.Apps[0].Helm.Values, "  tag: \"1.25.5\"\n", "  tag: \"1.25.5\"\ndb:\n  password: vstr-Q8wE3rT5\n", 1)
			},
			change: Change{Image: &Image{Container: "web", Tag: "1.25.6"}},
			hidden: []string{"vstr-Q8wE3rT5"},
			shows:  []string{"+          tag: \"1.25.6\"\n", "           password: [redacted]\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			files, req := goldenInput(t, tc.golden, func(files map[string]string, req *goldenRequest) { tc.edit(t, files, req) })
			planHidingSecrets(t, Request{RepoDir: testtree.Write(t, files), Apps: req.Apps, App: req.App, Target: req.Target, Change: tc.change}, tc.shows, tc.hidden)
		})
	}
}

// requireMaskedFile reads file of fsys as read_repo_file shows it for apps and
// fails unless it shows none of hidden, all of kept, and the file's line count.
func requireMaskedFile(t *testing.T, fsys fstest.MapFS, file string, hidden, kept []string, apps []Application) {
	t.Helper()
	got, err := MaskedFile(fsys, file, apps)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the masked file", got, hidden)
	for _, k := range kept {
		if !strings.Contains(got, k) {
			t.Errorf("masked file lacks %q:\n%s", k, got)
		}
	}
	if strings.Count(got, "\n") != strings.Count(string(fsys[file].Data), "\n") {
		t.Errorf("masking changed the line count:\n%s", got)
	}
}

// TestMaskedFileHidesSecretKeys: read_repo_file masks the scalar value of a
// secret-looking key in a Helm values file, an Application's valuesObject and
// values string, and a custom resource; never a boolean, a null, an empty value,
// a key that names a secret instead of holding one, or a built-in kind's fields.
func TestMaskedFileHidesSecretKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		file, doc string
		hidden    []string
		kept      []string
	}{
		"a values file": {file: "values.yaml",
			doc: "replicaCount: 3\nimage:\n  tag: \"1.2.3\"\ndb:\n  password: hunter2hunter2\n  host: db\napiKey: abcdefgh123\n" +
				"tokens:\n  - tok-one-1234\n  - tok-two-5678\nadminPassword: 918273\nauth:\n  enabled: false\n  password: \"\"\n  existingSecret: db-creds\n" +
				"serviceAccount:\n  automountServiceAccountToken: false\ntolerations:\n  - key: dedicated\n    operator: Equal\n    value: gpu\n" +
				"affinity:\n  podAntiAffinity:\n    topologyKey: kubernetes.io/hostname\ntls:\n  key: |\n    -----BEGIN PRIVATE KEY-----\n    pem-body-0192\n" +
				"secrets:\n  STRIPE: sk_live_x\n  nested: {deep: deep-s3cret-7}\n  list: [list-s3cret-8]\n  enabled: true\n  none: null\n  empty: \"\"\n" +
				"credentials: {user: cred-user-9, pass: hunter2x}\nllm:\n  maxTokens: 4096\n  tokenizer: bpe\n  tokenTTL: 3600\n  passwordMinLength: 12\nauthor: jane\n",
			hidden: []string{"hunter2hunter2", "abcdefgh123", "tok-one-1234", "tok-two-5678", "918273", "pem-body-0192",
				"sk_live_x", "deep-s3cret-7", "list-s3cret-8", "cred-user-9", "hunter2x"},
			kept: []string{"replicaCount: 3", "tag: \"1.2.3\"", "password: [redacted]", "host: db", "enabled: false", "password: \"\"",
				"existingSecret: db-creds", "automountServiceAccountToken: false", "key: dedicated", "topologyKey: kubernetes.io/hostname", "  key: [redacted]",
				"  STRIPE: [redacted]", "  enabled: true", "  none: null", "  empty: \"\"", "maxTokens: 4096", "tokenizer: bpe", "tokenTTL: 3600",
				"passwordMinLength: 12", "author: jane"}},
		"a values file's limits": {file: "values.yaml",
			doc:  "llm:\n  maxTokens:\n    input: 1000\n    output: 500\n  numSecrets: 2\n",
			kept: []string{"    input: 1000", "    output: 500", "numSecrets: 2"}},
		"an environment's values file": {file: "envs/prod/values-prod.yaml",
			doc:    "# prod\nimage: {tag: \"2.0\"}\nredis:\n  auth:\n    password: 'quoted-s3cret'\n",
			hidden: []string{"quoted-s3cret"}, kept: []string{"image: {tag: \"2.0\"}", "password: [redacted]"}},
		"an Application's valuesObject": {file: "argocd/apps/web.yaml",
			doc: "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  sources:\n  - repoURL: https://example.com/charts\n" +
				"    helm:\n      valuesObject:\n        replicaCount: 2\n        db: {password: flow-s3cret-1}\n        apiKey: obj-s3cret-2\n",
			hidden: []string{"flow-s3cret-1", "obj-s3cret-2"}, kept: []string{"replicaCount: 2", "apiKey: [redacted]", "repoURL: https://example.com/charts"}},
		"an Application's values string": {file: "argocd/apps/web.yaml",
			doc: "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    helm:\n      values: |\n" +
				"        replicaCount: 2\n        db:\n          password: str-s3cret-1\n      parameters:\n      - name: image.tag\n        value: \"1.0\"\n",
			hidden: []string{"str-s3cret-1"}, kept: []string{"replicaCount: 2", "          password: [redacted]", "value: \"1.0\""}},
		"an Application's quoted values string": {file: "app.yaml",
			doc:    "apiVersion: argoproj.io/v1alpha1\nkind: Application\nspec:\n  source:\n    helm:\n      values: \"replicaCount: 2\\ntoken: q-s3cret-1\\n\"\n",
			hidden: []string{"q-s3cret-1"}},
		"a kustomization's inline Helm values": {file: "kustomization.yaml",
			doc: "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nhelmCharts:\n- name: redis\n  valuesInline:\n" +
				"    replicas: 2\n    auth: {password: inline-s3cret-1}\n",
			hidden: []string{"inline-s3cret-1"}, kept: []string{"- name: redis", "replicas: 2"}},
		"a custom resource": {file: "db.yaml",
			doc: "apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: db\n  annotations: {auth-mode: basic}\nspec:\n  replicas: 2\n  image: postgres:16\n" +
				"  auth:\n    password: cr-s3cret-1\n    passwordSecretRef: {name: db, key: password}\n  secretName: db-tls\n",
			hidden: []string{"cr-s3cret-1"}, kept: []string{"replicas: 2", "image: postgres:16", "auth-mode: basic", "password: [redacted]",
				"passwordSecretRef: {name: db, key: password}", "secretName: db-tls"}},
		"a custom resource's key and value settings": {file: "gateway.yaml",
			doc: "apiVersion: example.com/v1\nkind: Gateway\nmetadata:\n  name: gw\nspec:\n  settings:\n  - key: API_TOKEN\n    value: kv-s3cret-1\n" +
				"  - {key: LOG_LEVEL, value: debug}\n  tolerations:\n  - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}\n",
			hidden: []string{"kv-s3cret-1"}, kept: []string{"  - key: API_TOKEN", "    value: [redacted]", "{key: LOG_LEVEL, value: debug}", "{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}"}},
		"a built-in kind": {file: "deploy.yaml",
			doc: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      automountServiceAccountToken: true\n" +
				"      volumes:\n      - name: tls\n        secret:\n          secretName: web-tls\n          items:\n          - key: tls.key\n            path: tls.key\n",
			kept: []string{"automountServiceAccountToken: true", "secretName: web-tls", "- key: tls.key"}},
	} {
		t.Run(name, func(t *testing.T) {
			requireMaskedFile(t, fstest.MapFS{tc.file: {Data: []byte(tc.doc)}}, tc.file, tc.hidden, tc.kept, nil)
			if values := strings.Join(fileSecretValues([]byte(tc.doc), roleManifest), "\n"); len(tc.hidden) > 0 && !strings.Contains(values, tc.hidden[0]) {
				t.Errorf("free text is not scrubbed of %s: the secret values are %q", tc.hidden[0], values)
			}
		})
	}
}

// TestObjectsMaskSecretKeysOfCustomResources: a cluster diff and a verification's
// differences mask the scalar value of a secret-looking key of a custom resource
// (an Application's valuesObject and values string among them), and leave the
// fields of built-in kinds, booleans and references shown.
func TestObjectsMaskSecretKeysOfCustomResources(t *testing.T) {
	db := &object{apiVersion: "example.com/v1", kind: "Database", name: "db", body: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Database",
		"metadata": map[string]any{"name": "db", "labels": map[string]any{"auth": "ldap"}},
		"spec": map[string]any{"replicas": int64(2), "image": "postgres:16",
			"maxTokens": int64(4096), "tokenizer": "bpe", "author": "jane",
			"secrets": map[string]any{"STRIPE": "sk_live_x", "nested": map[string]any{"deep": "cr-deep-s3cret5"}, "enabled": true},
			"auth": map[string]any{"password": "cr-obj-s3cret1", "enabled": true, "apiKeys": []any{"cr-list-s3cret2"},
				"passwordSecretRef": map[string]any{"name": "db", "key": "password"}}}}}
	app := &object{apiVersion: "argoproj.io/v1alpha1", kind: "Application", name: "web", body: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"source": map[string]any{"helm": map[string]any{
			"values": "replicaCount: 2\ndb:\n  password: app-str-s3cret3\n",
			"valuesObject": map[string]any{"replicaCount": int64(2), "token": "app-obj-s3cret4",
				"credentials": map[string]any{"pass": "app-cred-s3cret6"}}}}}}}
	dep := &object{apiVersion: "apps/v1", kind: "Deployment", name: "web", body: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"automountServiceAccountToken": false,
			"volumes": []any{map[string]any{"name": "tls", "secret": map[string]any{"secretName": "web-tls"}}}}}}}}
	hidden := []string{"cr-obj-s3cret1", "cr-list-s3cret2", "app-str-s3cret3", "app-obj-s3cret4", "sk_live_x", "cr-deep-s3cret5", "app-cred-s3cret6"}
	var shown strings.Builder
	for _, o := range []*object{db, app, dep} {
		d := objectDiff("app", objKey{Kind: o.kind, Name: o.name}, nil, o)
		shown.WriteString(d.Diff)
	}
	requireNoSecret(t, "the cluster diff", shown.String(), hidden)
	for _, k := range []string{"replicas: 2", "image: postgres:16", "auth: ldap", "enabled: true", "password: '[redacted]'", "key: password",
		"replicaCount: 2", "    password: [redacted]", "token: '[redacted]'", "automountServiceAccountToken: false", "secretName: web-tls",
		"maxTokens: 4096", "tokenizer: bpe", "author: jane", "STRIPE: '[redacted]'", "deep: '[redacted]'"} {
		if !strings.Contains(shown.String(), k) {
			t.Errorf("the cluster diff lacks %q:\n%s", k, shown.String())
		}
	}
	diffs := []difference{
		{segs: []string{"spec", "auth", "password"}, want: "cr-obj-s3cret1", got: "cr-obj-other5"},
		{segs: []string{"spec", "auth", "apiKeys", "[0]"}, want: "cr-list-s3cret2", got: "cr-list-other6"},
		{segs: []string{"spec", "replicas"}, want: int64(2), got: int64(3)},
	}
	lines := strings.Join(describeDifferences(db, diffs), "\n")
	requireNoSecret(t, "the differences", lines, append(hidden, "cr-obj-other5", "cr-list-other6"))
	if !strings.Contains(lines, "spec.replicas: expected 2, rendered 3") || !strings.Contains(lines, "spec.auth.password") {
		t.Errorf("the differences lost what changed:\n%s", lines)
	}
	text := MaskText([]ChangedObject{{Object: db.body}, {Object: app.body}}, "denied: "+strings.Join(hidden, ", "))
	requireNoSecret(t, "the masked text", text, hidden)
}

// TestClusterDiffListsAChangeOfAMaskedValue: a change of a value the cluster diff
// masks (a custom resource's password, a Secret's data) is still listed among the
// changes, masked on both sides; masked objects alone would show no change.
func TestClusterDiffListsAChangeOfAMaskedValue(t *testing.T) {
	for name, tc := range map[string]struct {
		apiVersion, kind string
		before, after    map[string]any
		path             string
	}{
		"a custom resource's password": {"example.com/v1", "Database",
			map[string]any{"spec": map[string]any{"auth": map[string]any{"password": "old-cr-s3cret1"}, "replicas": int64(2)}},
			map[string]any{"spec": map[string]any{"auth": map[string]any{"password": "new-cr-s3cret2"}, "replicas": int64(2)}},
			"spec.auth.password"},
		"a Secret's data": {"v1", "Secret",
			map[string]any{"data": map[string]any{"password": "b2xkLXNlY3JldDE="}},
			map[string]any{"data": map[string]any{"password": "bmV3LXNlY3JldDI="}},
			"data.password"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := func(body map[string]any) *object {
				body["apiVersion"], body["kind"], body["metadata"] = tc.apiVersion, tc.kind, map[string]any{"name": "db"}
				return &object{apiVersion: tc.apiVersion, kind: tc.kind, name: "db", body: body}
			}
			d := objectDiff("app", objKey{Kind: tc.kind, Name: "db"}, obj(tc.before), obj(tc.after))
			want := []FieldChange{{Path: tc.path, Before: redacted, After: redacted}}
			if len(d.Changes) != 1 || d.Changes[0] != want[0] {
				t.Errorf("changes %+v, want %+v", d.Changes, want)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			requireNoSecret(t, "the cluster diff", string(out), []string{"old-cr-s3cret1", "new-cr-s3cret2", "b2xkLXNlY3JldDE=", "bmV3LXNlY3JldDI="})
		})
	}
}

// TestSecretKeyByItsWords: a key is secret by its last word, not by a word
// inside another (tokenizer, author), and a plural one holds secrets under it
// (secrets: {STRIPE: x}), unless a counting word makes it a number of them
// (maxTokens: {input: 1000} is shown).
func TestSecretKeyByItsWords(t *testing.T) {
	for key, want := range map[string]keySecrecy{
		"maxTokens": notSecret, "minPasswords": notSecret, "numSecrets": notSecret, "tokenizer": notSecret, "author": notSecret, "tokenTTL": notSecret,
		"passwordMinLength": notSecret, "existingSecret": notSecret, "secretName": notSecret,
		"passwordSecretRef": notSecret, "tokenFile": notSecret, "authUrl": notSecret, "authType": notSecret,
		"topologyKey": notSecret, "monkey": notSecret, "cacheKey": notSecret, "keys": notSecret, "passthrough": notSecret,
		"x-kubernetes-patch-merge-key": notSecret,
		"password":                     valueSecret, "adminPassword": valueSecret, "clientSecret": valueSecret, "apiKey": valueSecret,
		"API_KEY": valueSecret, "APIKey": valueSecret, "authToken": valueSecret, "db.password": valueSecret,
		"tls.key": valueSecret, "privateKey": valueSecret, "signing-key": valueSecret, "key": valueSecret,
		"apikey": valueSecret, "dsn": valueSecret, "passphrase": valueSecret, "OAuthToken": valueSecret, "DB_PASSWD": valueSecret,
		"auth": scalarSecret, "authorization": scalarSecret, "proxyAuth": scalarSecret,
		"secrets": groupSecret, "credentials": everySecret, "dbPasswords": groupSecret, "tokens": groupSecret,
		"apiKeys": groupSecret, "extraSecrets": groupSecret,
	} {
		if got := secretKey(key, nil); got != want {
			t.Errorf("secretKey(%q) = %d, want %d", key, got, want)
		}
	}
	for _, key := range []string{"maxTokens", "tokenizer", "author", "tokenTTL", "passwordMinLength", "secrets", "apiKeys"} {
		if secretKey(key, nil).scalar() {
			t.Errorf("a scalar value of %s is masked", key)
		}
	}
	if got := secretKey("key", []string{"key", "operator", "value"}); got != notSecret {
		t.Errorf("a toleration's key is secret (%d)", got)
	}
}

// TestPlanShowsAChangeOfAFieldNamedLikeASecret: patching a custom resource's
// maxTokens shows both values in the git diff and the cluster diff, while a
// plural secret key beside it (credentials) stays masked.
func TestPlanShowsAChangeOfAFieldNamedLikeASecret(t *testing.T) {
	files, req := goldenInput(t, "patch-directory-custom-resource", func(files map[string]string, _ *goldenRequest) {
		replaceOnce(t, files, "agents/support.yaml", "  temperature: 0.2\n",
			"  temperature: 0.2\n  credentials:\n    user: admin\n    pass: hunter2x\n    rotate: false\n  maxTokens: 1024\n  tokenizer: bpe-v2\n  author: jane-doe\n")
	})
	res, err := Plan(context.Background(), Request{RepoDir: testtree.Write(t, files), Apps: req.Apps, App: req.App, Target: req.Target,
		Change: Change{Patch: &Patch{Merge: map[string]any{"spec": map[string]any{"maxTokens": int64(2048)}}}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	for _, s := range []string{"-  maxTokens: 1024\n", "+  maxTokens: 2048\n", "   tokenizer: bpe-v2\n", "   author: jane-doe\n",
		"     user: [redacted]\n", "     pass: [redacted]\n", "     rotate: false\n"} {
		if !strings.Contains(res.GitDiff, s) {
			t.Errorf("git diff lacks %q:\n%s", s, res.GitDiff)
		}
	}
	if len(res.ClusterDiff) != 1 {
		t.Fatalf("cluster diff %+v, want one object", res.ClusterDiff)
	}
	d := res.ClusterDiff[0]
	if want := (FieldChange{Path: "spec.maxTokens", Before: "1024", After: "2048"}); len(d.Changes) != 1 || d.Changes[0] != want {
		t.Errorf("changes %+v, want %+v", d.Changes, want)
	}
	for _, s := range []string{"-  maxTokens: 1024\n", "+  maxTokens: 2048\n", "    pass: '[redacted]'\n", "    user: '[redacted]'\n"} {
		if !strings.Contains(d.Diff, s) {
			t.Errorf("cluster diff lacks %q:\n%s", s, d.Diff)
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the result", string(out), []string{"hunter2x"})
}

// TestMaskTextScrubsNumbersMaskedByKey: a number masked for its key (a custom
// resource's password, a number under its secrets) is replaced in free text as a
// string secret is, in the forms a message writes it; a short one (as short
// strings are), a number under a key that is no secret's, a boolean are left.
func TestMaskTextScrubsNumbersMaskedByKey(t *testing.T) {
	db := ChangedObject{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Database", "metadata": map[string]any{"name": "db"},
		"spec": map[string]any{"port": int64(5432), "replicas": int64(31337),
			"auth":    map[string]any{"password": int64(4242424242), "apiKey": int64(42), "enabled": true},
			"secrets": map[string]any{"backup": float64(7070707070.5), "count": float64(9.87654321e+12)}}}}
	got := MaskText([]ChangedObject{db}, "denied: password 4242424242, backup 7070707070.5, count 9876543210000 or 9.87654321e+12, port 5432, replicas 31337, apiKey 42, enabled true")
	if want := "denied: password [redacted], backup [redacted], count [redacted] or [redacted], port 5432, replicas 31337, apiKey 42, enabled true"; got != want {
		t.Errorf("masked text\n%q, want\n%q", got, want)
	}
}

// TestMaskedFileHidesPatchValues: a JSON 6902 patch, inline in a kustomization or
// an Application or a file a kustomization applies, shows no value a file of the
// patched object would mask: a custom resource's by the path's last segment (or
// the plural before it), a Secret's whole, a secret-looking ConfigMap key's; a
// built-in kind's fields are not masked by key. An Application's inline
// strategic-merge patch is masked as the object's file is.
func TestMaskedFileHidesPatchValues(t *testing.T) {
	const jsonOps = "    - op: replace\n      path: /spec/auth/password\n      value: json-s3cret-1\n" +
		"    - op: add\n      path: /spec/secrets/STRIPE\n      value: json-s3cret-2\n" +
		"    - op: add\n      path: /spec/apiKeys/-\n      value: json-s3cret-3\n" +
		"    - op: add\n      path: /spec/db\n      value: {host: db.prod, token: json-s3cret-4}\n" +
		"    - op: replace\n      path: /spec/replicas\n      value: 3\n" +
		"    - op: replace\n      path: /spec/auth/enabled\n      value: true\n"
	for name, tc := range map[string]struct {
		files  map[string]string
		file   string
		hidden []string
		kept   []string
	}{
		"a kustomization's inline JSON patch of a custom resource": {file: "kustomization.yaml",
			files:  map[string]string{"kustomization.yaml": "resources: [db.yaml]\npatches:\n- target: {kind: Database}\n  patch: |-\n" + jsonOps},
			hidden: []string{"json-s3cret-1", "json-s3cret-2", "json-s3cret-3", "json-s3cret-4"},
			kept:   []string{"path: /spec/auth/password", "      value: [redacted]", "      value: 3", "      value: true"}},
		"an inline JSON patch of a Secret": {file: "kustomization.yaml",
			files: map[string]string{"kustomization.yaml": "patchesJson6902:\n- target: {version: v1, kind: Secret, name: db}\n  patch: |\n" +
				"    - op: add\n      path: /data/x\n      value: c2VjcmV0LWRhdGEtMQ==\n    - op: add\n      path: /metadata/labels/tier\n      value: backend\n"},
			hidden: []string{"c2VjcmV0LWRhdGEtMQ=="}, kept: []string{"path: /data/x", "      value: [redacted]", "      value: backend"}},
		"a one-line inline JSON patch": {file: "kustomization.yaml",
			files:  map[string]string{"kustomization.yaml": "patches:\n- target: {kind: Database}\n  patch: '[{\"op\": \"add\", \"path\": \"/spec/auth/password\", \"value\": \"one-line-s3cret\"}]'\n- path: deploy.yaml\n"},
			hidden: []string{"one-line-s3cret"}, kept: []string{"- target: {kind: Database}", "- path: deploy.yaml"}},
		"an inline JSON patch of a ConfigMap": {file: "kustomization.yaml",
			files: map[string]string{"kustomization.yaml": "patches:\n- target: {kind: ConfigMap}\n  patch: |\n" +
				"    - op: add\n      path: /data/api_token\n      value: cm-s3cret-1\n    - op: add\n      path: /data/LOG_LEVEL\n      value: debug\n"},
			hidden: []string{"cm-s3cret-1"}, kept: []string{"      value: debug"}},
		"an inline JSON patch of a built-in kind": {file: "kustomization.yaml",
			files: map[string]string{"kustomization.yaml": "patches:\n- target: {kind: Deployment}\n  patch: |\n" +
				"    - op: add\n      path: /spec/template/spec/volumes/0/secret/secretName\n      value: web-tls\n" +
				"    - op: add\n      path: /spec/template/spec/affinity/podAntiAffinity/topologyKey\n      value: zone\n" +
				"    - op: add\n      path: /spec/template/spec/containers/0/env/-\n      value: {name: DB_PASSWORD, value: env-s3cret-1}\n" +
				"    - op: replace\n      path: /spec/template/spec/containers/0/env/1/value\n      value: env-idx-s3cret-2\n" +
				"    - op: replace\n      path: /spec/template/spec/containers/0/image\n      value: ghcr.io/acme/web:2.0\n"},
			hidden: []string{"env-s3cret-1", "env-idx-s3cret-2"}, kept: []string{"      value: web-tls", "      value: zone", "      value: ghcr.io/acme/web:2.0"}},
		"a JSON patch of a list item's key": {file: "kustomization.yaml",
			files: map[string]string{"kustomization.yaml": "patches:\n- target: {kind: NodePool}\n  patch: |\n" +
				"    - op: replace\n      path: /spec/template/spec/taints/0/key\n      value: dedicated-gpu\n" +
				"    - op: add\n      path: /spec/licenseKeys/0/key\n      value: lic-s3cret-1\n"},
			hidden: []string{"lic-s3cret-1"}, kept: []string{"      value: dedicated-gpu"}},
		"a JSON patch file": {file: "patches/db.yaml",
			files:  map[string]string{"kustomization.yaml": "patches:\n- path: patches/db.yaml\n  target: {kind: Database}\n", "patches/db.yaml": strings.ReplaceAll(jsonOps, "\n    ", "\n")[4:]},
			hidden: []string{"json-s3cret-1", "json-s3cret-2", "json-s3cret-3", "json-s3cret-4"},
			kept:   []string{"path: /spec/auth/password", "  value: [redacted]", "  value: 3", "  value: true"}},
		"a JSON patch file of a Secret": {file: "secret-patch.json",
			files: map[string]string{"kustomization.yaml": "patchesJson6902:\n- path: secret-patch.json\n  target: {version: v1, kind: Secret, name: db}\n",
				"secret-patch.json": "[\n  {\"op\": \"add\", \"path\": \"/data/x\", \"value\": \"c2VjcmV0LWRhdGEtMg==\"}\n]\n"},
			hidden: []string{"c2VjcmV0LWRhdGEtMg=="}},
		"an Application's kustomize patches": {file: "argocd/apps/db.yaml",
			files: map[string]string{"argocd/apps/db.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: db\nspec:\n  source:\n    path: apps/db\n    kustomize:\n      patches:\n" +
				"      - target: {kind: Database}\n        patch: |-\n" + strings.ReplaceAll(jsonOps, "    ", "          ") +
				"      - target: {kind: Secret}\n        patch: |\n          - op: add\n            path: /stringData/dsn\n            value: app-secret-dsn-1\n" +
				"      - patch: |\n          apiVersion: example.com/v1\n          kind: Database\n          metadata: {name: db}\n          spec:\n            replicas: 2\n            auth:\n              password: app-smp-s3cret-1\n" +
				"      - patch: |\n          apiVersion: v1\n          kind: Secret\n          metadata: {name: db}\n          stringData:\n            token: app-smp-s3cret-2\n"},
			hidden: []string{"json-s3cret-1", "json-s3cret-2", "json-s3cret-3", "json-s3cret-4", "app-secret-dsn-1", "app-smp-s3cret-1", "app-smp-s3cret-2"},
			kept:   []string{"path: apps/db", "path: /spec/auth/password", "            value: [redacted]", "            value: 3", "            replicas: 2", "              password: [redacted]", "            token: [redacted]"}},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, d := range tc.files {
				fsys[p] = &fstest.MapFile{Data: []byte(d)}
			}
			requireMaskedFile(t, fsys, tc.file, tc.hidden, tc.kept, nil)
		})
	}
}

// TestObjectsMaskApplicationKustomizePatches: a rendered Application's inline
// kustomize patches (a JSON 6902 patch of a Secret, one of a custom resource, a
// strategic-merge patch) show in its cluster diff and its field changes as
// masked as in its file, and free text is scrubbed of their values.
func TestObjectsMaskApplicationKustomizePatches(t *testing.T) {
	app := func(smp string) *object {
		patches := []any{
			map[string]any{"target": map[string]any{"kind": "Secret", "name": "db"},
				"patch": "- op: add\n  path: /data/x\n  value: YXBwLW9iai1zZWNyZXQtMQ==\n"},
			map[string]any{"target": map[string]any{"kind": "Database"},
				"patch": "- op: replace\n  path: /spec/auth/password\n  value: app-obj-s3cret-2\n- op: replace\n  path: /spec/replicas\n  value: 3\n"},
			map[string]any{"patch": smp},
		}
		return &object{apiVersion: "argoproj.io/v1alpha1", kind: "Application", name: "db", body: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "db"},
			"spec": map[string]any{"source": map[string]any{"path": "apps/db", "kustomize": map[string]any{"patches": patches}}}}}
	}
	const smp = "apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: db\nspec:\n  replicas: 2\n  auth:\n    token: app-obj-s3cret-3\n"
	before, after := app(smp), app(strings.Replace(smp, "app-obj-s3cret-3", "app-obj-s3cret-4", 1))
	hidden := []string{"YXBwLW9iai1zZWNyZXQtMQ==", "app-obj-s3cret-2", "app-obj-s3cret-3", "app-obj-s3cret-4"}
	d := objectDiff("app", objKey{Kind: "Application", Name: "db"}, before, after)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the cluster diff", string(out), hidden)
	if len(d.Changes) != 1 || !strings.Contains(d.Changes[0].After, "token: [redacted]") || !strings.Contains(d.Changes[0].After, "replicas: 2") {
		t.Errorf("changes %+v, want the patch's change shown masked", d.Changes)
	}
	added := objectDiff("app", objKey{Kind: "Application", Name: "db"}, nil, before).Diff
	for _, k := range []string{"value: [redacted]", "path: /spec/auth/password", "value: 3", "replicas: 2", "token: [redacted]"} {
		if !strings.Contains(added, k) {
			t.Errorf("the cluster diff lacks %q:\n%s", k, added)
		}
	}
	text := MaskText([]ChangedObject{{Object: before.body}}, "denied: "+strings.Join(hidden[:3], ", "))
	requireNoSecret(t, "the masked text", text, hidden)
}

// TestValuesWithAKindAreMaskedByKey: Helm values that hold both a kind and an
// apiVersion (a chart's settings) are still values, masked by key: a chart's
// values.yaml (and its values-<environment>.yaml files beside it, which an
// Application of another cluster may name, and the values files of its ci
// directory, ci/prod-values.yaml, ci/values-prod.yml, which failed before:
// taken for a Deployment, their password was shown), a values file of a kustomization's
// helmCharts, an Application's
// values string, a values file an Application names, in its file, its cluster
// diff and free text. A resource file of the same content is a built-in
// kind's, not masked by key.
func TestValuesWithAKindAreMaskedByKey(t *testing.T) {
	const values = "apiVersion: v1\nkind: Deployment\nreplicaCount: 2\ndb:\n  password: kind-vals-s3cret-1\n"
	for name, tc := range map[string]struct {
		files  map[string]string
		file   string
		apps   []Application
		hidden []string
		kept   []string
	}{
		"a values file an Application names": {file: "envs/prod/values.yaml",
			files:  map[string]string{"envs/prod/values.yaml": values},
			apps:   []Application{{Name: "web", Path: "charts/web", SourceType: SourceHelm, Helm: HelmOptions{ValueFiles: []string{"../../envs/prod/values.yaml"}}}},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"replicaCount: 2", "  password: [redacted]"}},
		"a chart's values.yaml": {file: "charts/web/values.yaml",
			files:  map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/values.yaml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"kind: Deployment", "replicaCount: 2", "  password: [redacted]"}},
		"a chart's values file of an environment": {file: "charts/web/values-prod.yaml",
			files:  map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/values-prod.yaml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"kind: Deployment", "replicaCount: 2", "  password: [redacted]"}},
		"a chart's values file for chart testing": {file: "charts/web/ci/prod-values.yaml",
			files:  map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/ci/prod-values.yaml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"kind: Deployment", "replicaCount: 2", "  password: [redacted]"}},
		"a chart's values file of an environment for chart testing": {file: "charts/web/ci/values-prod.yml",
			files:  map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/ci/values-prod.yml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"kind: Deployment", "replicaCount: 2", "  password: [redacted]"}},
		"a ci file of no chart": {file: "apps/web/ci/prod-values.yaml",
			files: map[string]string{"apps/web/ci/prod-values.yaml": values},
			kept:  []string{"  password: kind-vals-s3cret-1"}},
		"a chart's values file in YAML's other extension": {file: "charts/web/values.yml",
			files:  map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/values.yml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"kind: Deployment", "replicaCount: 2", "  password: [redacted]"}},
		"a helmCharts values file": {file: "apps/redis/redis-values.yaml",
			files: map[string]string{"apps/redis/kustomization.yaml": "helmCharts:\n- name: redis\n  valuesFile: redis-values.yaml\n  additionalValuesFiles: [extra/prod.yaml]\n",
				"apps/redis/redis-values.yaml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"replicaCount: 2", "  password: [redacted]"}},
		"a helmCharts additional values file": {file: "apps/redis/extra/prod.yaml",
			files: map[string]string{"apps/redis/kustomization.yaml": "helmCharts:\n- name: redis\n  valuesFile: redis-values.yaml\n  additionalValuesFiles: [extra/prod.yaml]\n",
				"apps/redis/extra/prod.yaml": values},
			hidden: []string{"kind-vals-s3cret-1"}, kept: []string{"replicaCount: 2", "  password: [redacted]"}},
		"an Application's values string": {file: "argocd/apps/web.yaml",
			files: map[string]string{"argocd/apps/web.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    helm:\n      values: |\n" +
				"        apiVersion: v1\n        kind: Deployment\n        db:\n          password: kind-vals-s3cret-2\n"},
			hidden: []string{"kind-vals-s3cret-2"}, kept: []string{"        kind: Deployment", "          password: [redacted]"}},
		"a resource file": {file: "apps/web/deploy.yaml",
			files: map[string]string{"apps/web/deploy.yaml": values},
			kept:  []string{"  password: kind-vals-s3cret-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, d := range tc.files {
				fsys[p] = &fstest.MapFile{Data: []byte(d)}
			}
			requireMaskedFile(t, fsys, tc.file, tc.hidden, tc.kept, tc.apps)
		})
	}
	app := &object{apiVersion: "argoproj.io/v1alpha1", kind: "Application", name: "web", body: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"source": map[string]any{"helm": map[string]any{
			"values": "apiVersion: v1\nkind: Deployment\ndb:\n  password: kind-vals-s3cret-3\n"}}}}}
	d := objectDiff("app", objKey{Kind: "Application", Name: "web"}, nil, app)
	requireNoSecret(t, "the cluster diff", d.Diff, []string{"kind-vals-s3cret-3"})
	text := MaskText([]ChangedObject{{Object: app.body}}, "denied: kind-vals-s3cret-3")
	requireNoSecret(t, "the masked text", text, []string{"kind-vals-s3cret-3"})

	// A plan's free text is scrubbed of what a values file its apps name holds.
	tr, err := openTree(testtree.Write(t, map[string]string{"envs/prod/values.yaml": values}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.readFile("envs/prod/values.yaml"); err != nil {
		t.Fatal(err)
	}
	apps := []Application{{Name: "web", Path: "charts/web", SourceType: SourceHelm, Helm: HelmOptions{ValueFiles: []string{"../../envs/prod/values.yaml"}}}}
	if got := newScrubber(tr.secretValues(apps)).text("values: kind-vals-s3cret-1"); got != "values: [redacted]" {
		t.Errorf("scrubbed text %q", got)
	}
	// And of what a chart's values file for chart testing holds, named by no app.
	s := treeScrubber(t, map[string]string{"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "charts/web/ci/prod-values.yaml": values})
	if got := s.text("values: kind-vals-s3cret-1"); got != "values: [redacted]" {
		t.Errorf("scrubbed text of a ci values file %q", got)
	}
}

// TestTaintKeysAreShown: a taint's or toleration's key names one, beside its
// effect, and a change to it must stay readable.
func TestTaintKeysAreShown(t *testing.T) {
	pool := &object{apiVersion: "karpenter.sh/v1", kind: "NodePool", name: "gpu", body: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "gpu"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"taints": []any{map[string]any{"key": "dedicated-gpu", "value": "true", "effect": "NoSchedule"}}}}}}}
	d := objectDiff("app", objKey{Kind: pool.kind, Name: pool.name}, nil, pool)
	if !strings.Contains(d.Diff, "key: dedicated-gpu") {
		t.Fatalf("the cluster diff hides the taint's key:\n%s", d.Diff)
	}
}

// TestKeyValueSettingsAreMaskedByTheirKey: in a list of settings that give a
// key and a value alone, the key names the setting, so it is shown, and the
// value is a secret when the key names one, as an env entry's by its name.
func TestKeyValueSettingsAreMaskedByTheirKey(t *testing.T) {
	gw := &object{apiVersion: "example.com/v1", kind: "Gateway", name: "gw", body: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gateway", "metadata": map[string]any{"name": "gw"},
		"spec": map[string]any{"settings": []any{
			map[string]any{"key": "API_TOKEN", "value": "kv-obj-s3cret-1"},
			map[string]any{"key": "LOG_LEVEL", "value": "debug"}}}}}
	d := objectDiff("app", objKey{Kind: gw.kind, Name: gw.name}, nil, gw)
	requireNoSecret(t, "the cluster diff", d.Diff, []string{"kv-obj-s3cret-1"})
	for _, k := range []string{"API_TOKEN", "LOG_LEVEL", "debug"} {
		if !strings.Contains(d.Diff, k) {
			t.Errorf("the cluster diff lacks %q:\n%s", k, d.Diff)
		}
	}
	text := MaskText([]ChangedObject{{App: "app", Object: gw.body}}, "admission refused kv-obj-s3cret-1 for API_TOKEN")
	if strings.Contains(text, "kv-obj-s3cret-1") {
		t.Errorf("MaskText left the value: %s", text)
	}
}

// TestWholeObjectJSONPatchesAreMasked: a JSON 6902 operation at "" (or "/")
// puts its value in place of the whole object; its values are masked as that
// object's own file masks them, in an inline patch and a patch file, and
// scrubbed from free text; a Deployment's image stays shown (failed before:
// an operation at "" made the patch no JSON patch, so a Secret's stringData
// was shown and left in free text, and one at "/" was masked but not
// scrubbed).
func TestWholeObjectJSONPatchesAreMasked(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": "resources: [app.yaml]\npatches:\n- target: {kind: Secret, name: db}\n  patch: |\n" +
			"    - op: replace\n      path: \"\"\n      value:\n        apiVersion: v1\n        kind: Secret\n        metadata: {name: db}\n        stringData:\n          user: whole-s3cret-1\n" +
			"    - op: add\n      path: /\n      value: {stringData: {pass: whole-s3cret-2}}\n" +
			"- target: {name: db}\n  patch: |\n" +
			"    - op: replace\n      path: \"\"\n      value: {metadata: {name: db}, data: {dsn: d2hvbGUtczNjcmV0LTM=}}\n" +
			"- target: {kind: Deployment}\n  patch: |\n" +
			"    - op: replace\n      path: \"\"\n      value: {apiVersion: apps/v1, kind: Deployment, spec: {template: {spec: {containers: [{name: web, image: ghcr.io/acme/web:2.0}]}}}}\n" +
			"- path: whole.yaml\n  target: {kind: Secret}\n",
		"whole.yaml": "- op: add\n  path: \"\"\n  value:\n    stringData:\n      token: whole-s3cret-4\n",
	}
	hidden := []string{"whole-s3cret-1", "whole-s3cret-2", "d2hvbGUtczNjcmV0LTM=", "whole-s3cret-3", "whole-s3cret-4"}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	requireMaskedFile(t, fsys, "kustomization.yaml", hidden, []string{"          user: [redacted]", "        kind: Secret\n", "        metadata: {name: db}\n", "ghcr.io/acme/web:2.0"}, nil)
	requireMaskedFile(t, fsys, "whole.yaml", hidden, []string{"  path: \"\""}, nil)
	got := treeScrubber(t, files).text("patch failed: " + strings.Join(hidden, ", "))
	requireNoSecret(t, "scrubbed text", got, hidden)

	// A change's patch at "/" sets the whole object too, and is shown masked as one.
	c := MaskedChange("v1", "ConfigMap", map[string]any{"patch": map[string]any{"set": []any{map[string]any{
		"path": "/", "value": map[string]any{"data": map[string]any{"api_token": "whole-s3cret-5", "LOG_LEVEL": "debug"}}}}}})
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the masked change", string(out), []string{"whole-s3cret-5"})
	if !strings.Contains(string(out), "debug") {
		t.Errorf("the masked change hid an ordinary value: %s", out)
	}
}

// TestJSONPatchesOfTargetsThatMayBeSecretsAreMasked: a JSON 6902 patch whose
// target may be a Secret (one by name or label alone, a kind pattern that
// matches Secret, a patch file no kustomization names) has the data and
// stringData it writes masked and scrubbed from free text, in a
// kustomization, a patch file and an Application's patches; the rest of it,
// and a patch file of ConfigMaps alone, stay masked by key (failed before:
// each value was shown, masked by its key only, and left in free text).
func TestJSONPatchesOfTargetsThatMayBeSecretsAreMasked(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": "resources: [db.yaml]\npatches:\n- target: {name: db}\n  patch: |\n" +
			"    - op: add\n      path: /data/conn\n      value: bWF5YmUtczNjcmV0LTE=\n" +
			"    - op: replace\n      path: /metadata/labels/tier\n      value: backend\n" +
			"    - op: replace\n      path: /spec/replicas\n      value: 3\n" +
			"- target: {labelSelector: app=db}\n  patch: |\n    - op: add\n      path: /stringData/pw\n      value: maybe-s3cret-2\n" +
			"- target: {kind: Secret|ConfigMap}\n  patch: |\n    - op: add\n      path: /data\n      value: {level: maybe-s3cret-3}\n" +
			"- target: {kind: ConfigMap}\n  patch: |\n    - op: add\n      path: /data/LOG_LEVEL\n      value: debug\n" +
			"- target: {name: app}\n  patch: |\n    - op: add\n      path: /data/MODE\n      value: verbose\n" +
			"- path: by-name.yaml\n  target: {name: db}\n- path: cm.yaml\n  target: {kind: ConfigMap, name: app}\n- path: cm.yaml\n  target: {kind: Deployment}\n",
		"by-name.yaml": "- op: add\n  path: /data/conn\n  value: bWF5YmUtczNjcmV0LTQ=\n",
		"cm.yaml":      "- op: add\n  path: /data/LOG_LEVEL\n  value: info\n- op: add\n  path: /data/api_token\n  value: maybe-s3cret-5\n",
		"loose.yaml":   "- path: /stringData/token\n  op: add\n  value: maybe-s3cret-6\n",
	}
	hidden := []string{"bWF5YmUtczNjcmV0LTE=", "maybe-s3cret-1", "maybe-s3cret-2", "maybe-s3cret-3", "bWF5YmUtczNjcmV0LTQ=", "maybe-s3cret-4", "maybe-s3cret-5", "maybe-s3cret-6"}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	requireMaskedFile(t, fsys, "kustomization.yaml", hidden, []string{"      value: backend\n", "      value: 3\n", "      value: debug\n"}, nil)
	requireMaskedFile(t, fsys, "by-name.yaml", hidden, []string{"  path: /data/conn\n"}, nil)
	requireMaskedFile(t, fsys, "cm.yaml", hidden, []string{"  value: info\n"}, nil)
	requireMaskedFile(t, fsys, "loose.yaml", hidden, nil, nil)
	s := treeScrubber(t, files)
	requireNoSecret(t, "scrubbed text", s.text("patch failed: "+strings.Join(hidden, ", ")), hidden)
	// Masked on a guess, a word of a ConfigMap's data stays in free text.
	if got := s.text("mode verbose, level debug"); got != "mode verbose, level debug" {
		t.Errorf("scrubbing hid words that are no secret: %q", got)
	}

	app := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "db"},
		"spec": map[string]any{"source": map[string]any{"path": "apps/db", "kustomize": map[string]any{"patches": []any{
			map[string]any{"target": map[string]any{"name": "db"}, "patch": "- op: add\n  path: /stringData/pw\n  value: maybe-s3cret-7\n"}}}}}}
	shown, err := MaskedManifests([]Object{{Manifest: app}})
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "masked manifests", shown, []string{"maybe-s3cret-7"})
	requireNoSecret(t, "the masked text", MaskText([]ChangedObject{{Object: app}}, "denied: maybe-s3cret-7"), []string{"maybe-s3cret-7"})
}

// TestURLsCarryingAPasswordAreMasked: a URL that carries a password is a
// credential whatever key holds it (a ConfigMap's DATABASE_URL, a values
// file's redis.url, an Application's repoURL, a configMapGenerator's literal
// and env file): it is masked in the file, masked manifests and scrubbed
// from free text; a URL of a user alone, or whose password is a reference,
// stays shown (failed before: each was shown, and left in free text).
func TestURLsCarryingAPasswordAreMasked(t *testing.T) {
	files := map[string]string{
		"apps/web/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  DATABASE_URL: postgres://app:url-s3cret-1@db:5432/app\n" +
			"  MIRROR: https://ci@mirror.example.com/repo\n  REPLICA_URL: postgres://app:$(DB_PASSWORD)@replica/app\n",
		"apps/web/values.yaml":        "redis:\n  url: redis://:url-s3cret-2@redis:6379/0\n",
		"argocd/apps/web.yaml":        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    repoURL: https://deploy:url-s3cret-3@git.example.com/acme/web.git\n",
		"apps/api/kustomization.yaml": "configMapGenerator:\n- name: api\n  literals:\n  - BROKER=amqp://api:url-s3cret-4@mq:5672/\n  - MODE=fast\n  envs: [api.env]\n",
		"apps/api/api.env":            "CACHE=memcached://u:url-s3cret-5@cache:11211\nLEVEL=info\n",
	}
	hidden := []string{"url-s3cret-1", "url-s3cret-2", "url-s3cret-3", "url-s3cret-4", "url-s3cret-5"}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	for file, kept := range map[string][]string{
		"apps/web/config.yaml":        {"  DATABASE_URL: [redacted]\n", "https://ci@mirror.example.com/repo", "$(DB_PASSWORD)"},
		"apps/web/values.yaml":        {"  url: [redacted]\n"},
		"argocd/apps/web.yaml":        {"    repoURL: [redacted]\n"},
		"apps/api/kustomization.yaml": {"  - BROKER=[redacted]\n", "  - MODE=fast\n"},
		"apps/api/api.env":            {"CACHE=[redacted]\n", "LEVEL=info\n"},
	} {
		requireMaskedFile(t, fsys, file, hidden, kept, nil)
	}
	requireNoSecret(t, "scrubbed text", treeScrubber(t, files).text("dial failed: "+strings.Join(hidden, ", ")), hidden)
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "web"},
		"data": map[string]any{"DATABASE_URL": "postgres://app:url-s3cret-6@db/app", "LEVEL": "info"}}
	got, err := MaskedManifests([]Object{{Manifest: cm}})
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "masked manifests", got, []string{"url-s3cret-6"})
	requireNoSecret(t, "the masked text", MaskText([]ChangedObject{{Object: cm}}, "denied: url-s3cret-6"), []string{"url-s3cret-6"})
}

// A URL's password is often written as its database driver or client takes
// it, unescaped (s3cr^t, pa#ss), or beside a host as a DSN writes it
// (tcp(db:3306)), which net/url refuses to parse or reads as a host and port:
// such a URL carries a password all the same.
func TestURLsCarryingAPasswordNetURLRefusesAreMasked(t *testing.T) {
	files := map[string]string{
		"apps/web/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n" +
			"  DATABASE_URL: postgres://app:s3cr^t-url-1@db:5432/app\n" +
			"  REPLICA_URL: postgres://app:12#url-2@replica/app\n" +
			"  MYSQL_URL: mysql://app:url-s3cret-3@tcp(db:3306)/app\n" +
			"  CACHE_URL: redis://:p{url-4}@redis:6379\n" +
			"  PLAIN_URL: https://mirror.example.com:8443/repo?ref=v1\n" +
			"  TEMPLATED_URL: postgres://app:${DB_PASSWORD}@db/app\n",
	}
	hidden := []string{"s3cr^t-url-1", "12#url-2", "url-s3cret-3", "p{url-4}"}
	fsys := fstest.MapFS{"apps/web/config.yaml": &fstest.MapFile{Data: []byte(files["apps/web/config.yaml"])}}
	requireMaskedFile(t, fsys, "apps/web/config.yaml", hidden, []string{"  DATABASE_URL: [redacted]\n", "  MYSQL_URL: [redacted]\n",
		"https://mirror.example.com:8443/repo?ref=v1", "${DB_PASSWORD}"}, nil)
	requireNoSecret(t, "scrubbed text", treeScrubber(t, files).text("auth failed: "+strings.Join(hidden, ", ")), hidden)
}

// A JSON 6902 operation putting a value in place of the whole object writes
// its path as YAML may quote it ("/", '/', in a flow mapping), and the file
// holding it is scrubbed from free text whichever way (failed before: only
// path: / and JSON's "path": "/" were looked for, so a Secret's data in
// place of a target by name alone was left in free text).
func TestWholeObjectJSONPatchPathsAsYAMLQuotesThem(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": "resources: [app.yaml]\npatches:\n- path: dq.yaml\n  target: {name: db}\n- path: sq.yaml\n  target: {name: db}\n- path: flow.yaml\n  target: {name: db}\n",
		"dq.yaml":            "- op: replace\n  path: \"/\"\n  value:\n    data:\n      level: d2hvbGUtczNjcmV0LTc=\n",
		"sq.yaml":            "- op: replace\n  path: '/'\n  value:\n    data:\n      level: d2hvbGUtczNjcmV0LTg=\n",
		"flow.yaml":          "- {op: replace, path: /, value: {data: {level: d2hvbGUtczNjcmV0LTk=}}}\n",
	}
	hidden := []string{"d2hvbGUtczNjcmV0LTc=", "d2hvbGUtczNjcmV0LTg=", "d2hvbGUtczNjcmV0LTk="}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	for _, f := range []string{"dq.yaml", "sq.yaml", "flow.yaml"} {
		requireMaskedFile(t, fsys, f, hidden, nil, nil)
	}
	requireNoSecret(t, "scrubbed text", treeScrubber(t, files).text("patch failed: "+strings.Join(hidden, ", ")), hidden)
}

// A credential in a URL's query (a JDBC URL's password=, an access_token, a
// signed URL's sig) is a password the URL carries as much as one before its
// "@"; a parameter that says where or how (authSource=admin, sslmode,
// tokenType) is no credential, and such a URL stays shown (failed before:
// only the password before "@" was looked for).
func TestURLsCarryingACredentialInTheirQueryAreMasked(t *testing.T) {
	files := map[string]string{
		"apps/web/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n" +
			"  JDBC_URL: jdbc:postgresql://db:5432/app?user=app&password=q-s3cret-1\n" +
			"  EXPORT_URL: https://storage.example.com/exports/x.csv?sv=2024&sig=q-s3cret-2\n" +
			"  HOOK_URL: https://hooks.example.com/notify?access_token=q-s3cret-3&channel=ops\n" +
			"  MONGO_URL: mongodb://mongo:27017/app?authSource=admin&tls=true\n" +
			"  TEMPLATED_URL: jdbc:mysql://db/app?password=${DB_PASSWORD}\n",
	}
	hidden := []string{"q-s3cret-1", "q-s3cret-2", "q-s3cret-3"}
	fsys := fstest.MapFS{"apps/web/config.yaml": &fstest.MapFile{Data: []byte(files["apps/web/config.yaml"])}}
	requireMaskedFile(t, fsys, "apps/web/config.yaml", hidden, []string{"  JDBC_URL: [redacted]\n", "  EXPORT_URL: [redacted]\n",
		"  HOOK_URL: [redacted]\n", "mongodb://mongo:27017/app?authSource=admin&tls=true", "password=${DB_PASSWORD}"}, nil)
	requireNoSecret(t, "scrubbed text", treeScrubber(t, files).text("denied: "+strings.Join(hidden, ", ")), hidden)
}
