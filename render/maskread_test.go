package render

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/testtree"
)

func TestMaskedFile(t *testing.T) {
	fsys := fstest.MapFS{
		"app/kustomization.yaml": {Data: []byte("resources:\n- secret.yaml\n- deploy.yaml\nsecretGenerator:\n- name: creds\n  envs:\n  - creds.env\n")},
		"app/creds.env":          {Data: []byte("USER=admin\nPASSWORD=kkGeneratedEnv01\n")},
		"app/secret.yaml":        {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: kkSecretString1\n")},
		"app/deploy.yaml": {Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n" +
			"        env:\n        - name: API_TOKEN\n          value: kkTokenInEnv0001\n        - name: LOG_LEVEL\n          value: debug\n")},
	}
	for name, tc := range map[string]struct {
		file   string
		hidden string
		kept   string
	}{
		"secretGenerator env file": {file: "app/creds.env", hidden: "kkGeneratedEnv01", kept: "PASSWORD="},
		"Secret manifest":          {file: "app/secret.yaml", hidden: "kkSecretString1", kept: "kind: Secret"},
		"secret-looking env value": {file: "app/deploy.yaml", hidden: "kkTokenInEnv0001", kept: "value: debug"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MaskedFile(fsys, tc.file, nil)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, tc.hidden) || !strings.Contains(got, tc.kept) {
				t.Fatalf("masked %s:\n%s\nwant %q hidden and %q kept", tc.file, got, tc.hidden, tc.kept)
			}
			if strings.Count(got, "\n") != strings.Count(string(fsys[tc.file].Data), "\n") {
				t.Fatalf("masking changed the line count:\n%s", got)
			}
		})
	}
	if _, err := MaskedFile(fsys, "app/missing.yaml", nil); err == nil {
		t.Fatal("a missing file read without error")
	}
}

func TestMaskedManifests(t *testing.T) {
	objs := []Object{
		{Manifest: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
			"data": map[string]any{"password": "a2tTZWNyZXREYXRhMDE="}, "stringData": map[string]any{"token": "kkSecretString1"}}},
		{Manifest: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"replicas": 2, "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "web", "env": []any{map[string]any{"name": "API_TOKEN", "value": "kkTokenInEnv0001"}, map[string]any{"name": "MODE", "value": "fast"}}}}}}}}},
	}
	got, err := MaskedManifests(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, hidden := range []string{"a2tTZWNyZXREYXRhMDE=", "kkSecretString1", "kkTokenInEnv0001"} {
		if strings.Contains(got, hidden) {
			t.Errorf("masked manifests show %q:\n%s", hidden, got)
		}
	}
	for _, kept := range []string{"kind: Secret", "password:", "replicas: 2", "value: fast", "\n---\n"} {
		if !strings.Contains(got, kept) {
			t.Errorf("masked manifests lack %q:\n%s", kept, got)
		}
	}
	if objs[0].Manifest["stringData"].(map[string]any)["token"] != "kkSecretString1" {
		t.Error("masking changed the render's own objects")
	}
}

// TestMaskedFileResolvesAliasesAndMergeKeys: a document with an alias or a merge
// key is read as a decoder resolves it, and masked whole when what it resolves to
// holds anything masked or names another kind than its lines show.
func TestMaskedFileResolvesAliasesAndMergeKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		doc, hidden, kept string
	}{
		"a Secret's kind read through an alias": {
			doc:    "x: &k Secret\napiVersion: v1\nkind: *k\nstringData:\n  token: aliasKindSecret1\n",
			hidden: "aliasKindSecret1"},
		"a ConfigMap's kind read through an alias": {
			doc:    "x: &k ConfigMap\napiVersion: v1\nkind: *k\ndata:\n  password: aliasKindSecret2\n",
			hidden: "aliasKindSecret2"},
		"a ConfigMap's data merging a secret-looking key": {
			doc:    "apiVersion: v1\nkind: ConfigMap\ndata:\n  <<: {password: mergedDataSecret}\n  color: blue\n",
			hidden: "mergedDataSecret"},
		"an env entry named by a merge key": {
			doc:    "apiVersion: apps/v1\nkind: Deployment\nspec:\n  env:\n  - <<: {name: DB_PASSWORD}\n    value: mergedNameSecret\n",
			hidden: "mergedNameSecret"},
		"a core document's kind merged in": {
			doc:    "apiVersion: v1\n<<: {kind: Secret}\nstringData:\n  a: mergedKindSecret\n",
			hidden: "mergedKindSecret"},
		"a values file's merge naming an env entry": {
			doc:    "env:\n- <<: {name: API_TOKEN}\n  value: mergedValuesSecret\n",
			hidden: "mergedValuesSecret"},
		"a values file's merged defaults": {
			doc:  "defaults: &d\n  replicas: 1\n  image: nginx:1.27\nprod:\n  <<: *d\n  replicas: 3\n",
			kept: "defaults: &d\n  replicas: 1\n  image: nginx:1.27\nprod:\n  <<: *d\n  replicas: 3\n"},
		"an alias bomb": {
			doc: "a: &a [lolLaughs, lolLaughs, lolLaughs, lolLaughs, lolLaughs, lolLaughs, lolLaughs, lolLaughs, lolLaughs]\n" +
				"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
				"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n" +
				"h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\ni: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\nkind: ConfigMap\n",
			hidden: "lolLaughs"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MaskedFile(fstest.MapFS{"f.yaml": {Data: []byte(tc.doc)}}, "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.hidden != "" && strings.Contains(got, tc.hidden) || !strings.Contains(got, tc.kept) {
				t.Fatalf("masked:\n%s\nwant %q hidden and %q kept", got, tc.hidden, tc.kept)
			}
			if strings.Count(got, "\n") != strings.Count(tc.doc, "\n") {
				t.Fatalf("masking changed the line count:\n%s", got)
			}
		})
	}
}

// TestSecretValuesReadThroughAliases: a value a document masked whole holds as a
// decoder reads it is still one that scrubbing free text looks for.
func TestSecretValuesReadThroughAliases(t *testing.T) {
	doc := "x: &k Secret\napiVersion: v1\nkind: *k\nstringData:\n  token: aliasKindSecret1\n"
	if got := fileSecretValues([]byte(doc), roleManifest); !slices.Contains(got, "aliasKindSecret1") {
		t.Fatalf("secret values %q, want aliasKindSecret1 among them", got)
	}
}

// TestMaskedFileOfAMappingKeyMergedIn: a merge key that brings a mapping key into
// a mapping with a key that is not a string parses, but the decoder panics on it;
// the file is masked whole instead of ending the reader.
func TestMaskedFileOfAMappingKeyMergedIn(t *testing.T) {
	doc := "apiVersion: v1\nkind: Secret\n1: one\nstringData: {a: merged-key-secret}\n<<: {x, {y}}\n"
	got, err := MaskedFile(fstest.MapFS{"f.yaml": {Data: []byte(doc)}}, "f.yaml", nil)
	if err != nil || strings.Contains(got, "merged-key-secret") || strings.Count(got, "\n") != strings.Count(doc, "\n") {
		t.Fatalf("masked (%v):\n%s", err, got)
	}
}

// TestMaskedFileOfASecretFileParameter: a file a Helm app reads whole into a
// value named like a secret (spec.source.helm.fileParameters tls.key) is a
// secret file, as one a secretGenerator reads is: masked whole in the file and
// scrubbed from free text; a file parameter of another name is shown (failed
// before: the private key was shown as any text file).
func TestMaskedFileOfASecretFileParameter(t *testing.T) {
	const key = "-----BEGIN PRIVATE KEY-----\nkkFileParamKey01\n-----END PRIVATE KEY-----\n"
	files := map[string]string{"certs/tls.key": key, "charts/web/config.json": "{\"mode\": \"fast\"}\n"}
	apps := []Application{{Name: "web", Path: "charts/web", SourceType: SourceHelm, Helm: HelmOptions{FileParameters: []HelmFileParameter{
		{Name: "tls.key", Path: "../../certs/tls.key"}, {Name: "config", Path: "config.json"}}}}}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	requireMaskedFile(t, fsys, "certs/tls.key", []string{"kkFileParamKey01"}, []string{"[redacted]\n"}, apps)
	requireMaskedFile(t, fsys, "charts/web/config.json", nil, []string{"{\"mode\": \"fast\"}\n"}, apps)
	tr, err := openTree(testtree.Write(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.readFile("certs/tls.key"); err != nil {
		t.Fatal(err)
	}
	if got := newScrubber(tr.secretValues(apps)).text("bad key kkFileParamKey01"); got != "bad key [redacted]" {
		t.Errorf("scrubbed text %q", got)
	}
}

// TestMaskedFileOfAList: Argo CD deploys each item of a document's items list
// (a List of any kind) as an object of its own, so each item is masked as its
// own file would be, and its values scrubbed from free text (failed before: a
// Secret in a List was shown whole).
func TestMaskedFileOfAList(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("kkListData0001"))
	doc := "apiVersion: v1\nkind: List\nitems:\n" +
		"- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: db\n  stringData:\n    password: kkListSecret01\n  data:\n    token: " + enc + "\n" +
		"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: settings\n  data:\n    api_key: kkListConfig01\n    color: blue\n" +
		"- apiVersion: example.com/v1\n  kind: Gateway\n  metadata:\n    name: gw\n  spec:\n    auth:\n      token: kkListCustom01\n"
	hidden := []string{"kkListSecret01", enc, "kkListConfig01", "kkListCustom01"}
	requireMaskedFile(t, fstest.MapFS{"list.yaml": {Data: []byte(doc)}}, "list.yaml", hidden,
		[]string{"  kind: Secret\n", "    password: [redacted]\n", "    color: blue\n", "      token: [redacted]\n"}, nil)
	s := newScrubber(fileSecretValues([]byte(doc), roleManifest))
	for _, v := range append(hidden, "kkListData0001") {
		if got := s.text("denied: " + v); got != "denied: [redacted]" {
			t.Errorf("scrubbed text %q", got)
		}
	}
}

// TestMaskedFileOfARefSourcesFileParameter: a file a multi-source Application
// reads whole into a secret-looking value through its ref source
// (fileParameters tls.key: $values/certs/tls.key), as Argo CD reads a ref's
// file parameters, is a secret file too, for a chart of this repository and
// for one from a Helm repository alike (failed before: the path stayed
// "$values/...", which names no file, and the key was shown).
func TestMaskedFileOfARefSourcesFileParameter(t *testing.T) {
	const key = "-----BEGIN PRIVATE KEY-----\nkkRefFileParamKey\n-----END PRIVATE KEY-----\n"
	fsys := fstest.MapFS{"certs/tls.key": &fstest.MapFile{Data: []byte(key)}}
	deploy := func(s argocd.AppSource) bool { return strings.Contains(s.RepoURL, "o/deploy") }
	for name, source := range map[string]string{
		"a chart of this repository":     "{repoURL: https://github.com/o/deploy, targetRevision: main, path: charts/web",
		"a chart from a Helm repository": "{repoURL: https://charts.example.com, chart: web, targetRevision: 1.0.0",
	} {
		t.Run(name, func(t *testing.T) {
			a := decodeArgoCDApp(t, "kind: Application\nmetadata: {name: web}\nspec:\n  sources:\n  - "+source+
				", helm: {fileParameters: [{name: tls.key, path: $values/certs/tls.key}]}}\n"+
				"  - {repoURL: https://github.com/o/deploy, targetRevision: main, ref: values}\n")
			requireMaskedFile(t, fsys, "certs/tls.key", []string{"kkRefFileParamKey"}, []string{"[redacted]\n"}, FromArgoCD(a, deploy))
		})
	}
}

// TestMaskedAppDetailLeavesTheApplicationAsItWas: masking an Application's
// detail masks a copy. The detail's sources point at the Application's own
// helm and kustomize blocks, which a cluster's read cache shares with every
// later read of it: masked there, a plan of the Application would render its
// parameters as "[redacted]" (failed before: the Application's parameter,
// valuesObject and patch were masked in place).
func TestMaskedAppDetailLeavesTheApplicationAsItWas(t *testing.T) {
	a := decodeArgoCDApp(t, `
kind: Application
metadata: {name: web}
spec:
  sources:
  - repoURL: https://github.com/o/deploy
    path: charts/web
    helm:
      parameters: [{name: db.password, value: kk-detail-param-1}]
      valuesObject: {auth: {password: kk-detail-object-1}}
  - repoURL: https://github.com/o/deploy
    path: kustomize/web
    kustomize:
      patches: [{target: {kind: Secret}, patch: "- op: replace\n  path: /stringData/password\n  value: kk-detail-patch-1\n"}]
`)
	before, err := json.Marshal(a.Spec.Sources)
	if err != nil {
		t.Fatal(err)
	}
	masked, err := MaskedAppDetail(argocd.DescribeApp(a))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := json.Marshal(masked.Sources)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the masked sources", string(shown), []string{"kk-detail-param-1", "kk-detail-object-1", "kk-detail-patch-1"})
	if after, err := json.Marshal(a.Spec.Sources); err != nil || string(after) != string(before) {
		t.Fatalf("masking the detail changed the Application's sources (%v):\n%s\nwere\n%s", err, after, before)
	}
}

// TestMaskedAppListScrubsWhatArgoCDWroteOfTheSources: the list view's problems
// quote Argo CD's last sync message and error conditions, as the detail shows
// them, and Argo CD's error for a chart that failed quotes the helm template
// command, --set db.password=... with its commas escaped as Argo CD passes it:
// both views scrub a secret-looking parameter's value in both forms, each app's
// own, and leave the Applications as they were (failed before: the list showed
// them as written, and the detail the escaped form).
func TestMaskedAppListScrubsWhatArgoCDWroteOfTheSources(t *testing.T) {
	const secret, passed = "kk,list-secret-1", `kk\,list-secret-1`
	chart := decodeArgoCDApp(t, `
kind: Application
metadata: {name: chart, namespace: argocd}
spec:
  source:
    repoURL: https://github.com/o/deploy
    path: charts/web
    helm: {parameters: [{name: db.password, value: "`+secret+`"}]}
status:
  conditions: [{type: ComparisonError, message: "`+"`helm template . --set db.password="+strings.ReplaceAll(passed, `\`, `\\`)+"` failed exit status 1"+`"}]
  operationState: {phase: Failed, message: "one or more objects failed to apply: `+secret+`"}
`)
	other := decodeArgoCDApp(t, "kind: Application\nmetadata: {name: other, namespace: argocd}\nspec:\n  source: {repoURL: https://github.com/o/deploy, path: apps/other}\n"+
		"status:\n  conditions: [{type: ComparisonError, message: \"list-secret-1 is a word of its own here\"}]\n")
	before, err := json.Marshal(chart)
	if err != nil {
		t.Fatal(err)
	}
	list, err := MaskedAppList([]argocd.Application{chart, other})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, a := range list.Apps {
		problems = append(problems, a.Problems...)
	}
	requireNoSecret(t, "the list's problems", strings.Join(problems, "\n"), []string{secret, passed})
	if !slices.Contains(problems, "ComparisonError: list-secret-1 is a word of its own here") {
		t.Errorf("the list scrubbed another app's message of chart's secret: %q", problems)
	}
	detail, err := MaskedAppDetail(argocd.DescribeApp(chart))
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "the detail's messages", detail.Errors[0].Message+"\n"+detail.Operation.Message, []string{secret, passed})
	if after, err := json.Marshal(chart); err != nil || string(after) != string(before) {
		t.Fatalf("masking changed the Application (%v):\n%s\nwas\n%s", err, after, before)
	}
}
