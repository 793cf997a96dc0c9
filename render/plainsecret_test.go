package render

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// plainSecretValue is the value the cases below try to commit; no refusal may
// quote it.
const plainSecretValue = "hunter2-Zq81"

const plainSecretDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web:1.0.0
          env:
            - name: LOG_LEVEL
              value: info
`

const plainSecretCronJob = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: ghcr.io/example/report:1.0.0
`

const plainSecretConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  color: blue
`

// requireSecretRefusal fails unless err refuses the plan as code secret with a
// reason holding each of wantIn and never the value tried.
func requireSecretRefusal(t *testing.T, res *Result, err error, wantIn ...string) {
	t.Helper()
	var ref *Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("Plan verified an edit committing a secret-looking value in plain text (err %v): %+v", err, res)
	}
	if ref.Code != CodeSecret {
		t.Fatalf("refused %s, want %s: %s", ref.Code, CodeSecret, ref.Reason)
	}
	for _, w := range wantIn {
		if !strings.Contains(ref.Reason, w) {
			t.Errorf("reason lacks %q:\n%s", w, ref.Reason)
		}
	}
	out, _ := json.Marshal(ref)
	requireNoSecret(t, "the refusal", string(out)+err.Error(), []string{plainSecretValue})
}

// TestPlainSecretValuesAreRefused: an edit whose after-render gives a
// container's secret-looking env variable, or a ConfigMap's secret-looking key,
// a plain value it did not have would commit that value to Git, whatever the
// change that asked for it and wherever the edit is written; the plan is
// refused, saying where the value should be kept, and quotes no value.
func TestPlainSecretValuesAreRefused(t *testing.T) {
	files := map[string]string{
		"apps/web/deployment.yaml": plainSecretDeployment,
		"apps/web/cronjob.yaml":    plainSecretCronJob,
		"apps/web/settings.yaml":   plainSecretConfigMap,
	}
	web := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for name, tc := range map[string]struct {
		target objref.Target
		change Change
		wantIn []string
	}{
		"an env change": {target: web,
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"DB_PASSWORD": plainSecretValue}}},
			wantIn: []string{"env DB_PASSWORD of container web of apps/v1 Deployment web/web looks like a secret",
				"committed to Git in plain text", "valueFrom.secretKeyRef", "a patch change can set that"}},
		"an env change beside a flag": {target: web,
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"REDIS_AUTH": "true", "API_TOKEN": plainSecretValue}}},
			wantIn: []string{"env API_TOKEN of container web"}},
		"a URL with a password under a name that does not look secret": {target: web,
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"DATABASE_URL": "postgres://app:" + plainSecretValue + "@db:5432/app"}}},
			wantIn: []string{"env DATABASE_URL of container web of apps/v1 Deployment web/web holds a secret (a URL's password or a private key)",
				"committed to Git in plain text", "valueFrom.secretKeyRef"}},
		"a ConfigMap key holding a URL's password": {target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web-settings"},
			change: Change{Patch: &Patch{Set: []FieldValue{{Path: "/data/cache_url", Value: "redis://:" + plainSecretValue + "@cache:6379/0"}}}},
			wantIn: []string{"data key cache_url of v1 ConfigMap web/web-settings holds a secret", "keep it in a Secret"}},
		"a patch change": {target: web,
			change: Change{Patch: &Patch{Set: []FieldValue{{Path: "/spec/template/spec/containers", Value: jsonValue(
				`[{"name":"web","image":"ghcr.io/example/web:1.0.0","env":[{"name":"LOG_LEVEL","value":"info"},{"name":"DB_PASSWORD","value":"` + plainSecretValue + `"}]}]`)}}}},
			wantIn: []string{"env DB_PASSWORD of container web"}},
		"a patch of an init container of a CronJob's job template": {target: objref.Target{APIVersion: "batch/v1", Kind: "CronJob", Name: "report"},
			change: Change{Patch: &Patch{Set: []FieldValue{{Path: "/spec/jobTemplate/spec/template/spec/initContainers", Value: jsonValue(
				`[{"name":"migrate","image":"ghcr.io/example/migrate:1.0.0","env":[{"name":"apiKey","value":"` + plainSecretValue + `"}]}]`)}}}},
			wantIn: []string{"env apiKey of init container migrate of batch/v1 CronJob web/report"}},
		"a ConfigMap key": {target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web-settings"},
			change: Change{Patch: &Patch{Set: []FieldValue{{Path: "/data/api_token", Value: plainSecretValue}}}},
			wantIn: []string{"data key api_token of v1 ConfigMap web/web-settings looks like a secret", "keep it in a Secret"}},
		"a new resource": {
			change: Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: creds\ndata:\n  DB_PASSWORD: " + plainSecretValue + "\n"}},
			wantIn: []string{"data key DB_PASSWORD of v1 ConfigMap web/creds"}},
	} {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, files)
			apps := []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}}
			res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: apps, Target: tc.target, Change: tc.change})
			requireSecretRefusal(t, res, err, tc.wantIn...)
		})
	}
}

// TestPlainSecretValuesByKustomizeAndHelm: the same refusal whatever writes the
// value: a new patch of a kustomize overlay, a literal of a configMapGenerator,
// the generated ConfigMap a container reads a variable from through envFrom,
// a Helm values key the chart renders into a secret-looking variable and the
// env list of a chart's values.
func TestPlainSecretValuesByKustomizeAndHelm(t *testing.T) {
	for name, tc := range map[string]struct {
		golden string
		edit   func(t *testing.T, files map[string]string, req *goldenRequest)
		change Change
		wantIn []string
	}{
		"a kustomize overlay's patch": {golden: "env-overlay-add",
			change: Change{Env: &Env{Container: "api", Set: map[string]string{"DB_PASSWORD": plainSecretValue}}},
			wantIn: []string{"env DB_PASSWORD of container api of apps/v1 Deployment"}},
		"a configMapGenerator's literal": {golden: "generated-env-line-edit",
			change: Change{Patch: &Patch{Merge: jsonObject(`{"data":{"API_TOKEN":"` + plainSecretValue + `"}}`)}},
			wantIn: []string{"data key API_TOKEN of v1 ConfigMap prod/prod-api-config-", "keep it in a Secret"}},
		"an env variable a generated ConfigMap holds": {golden: "generated-envfrom-set",
			edit: func(t *testing.T, files map[string]string, _ *goldenRequest) {
				replaceOnce(t, files, "base/api.env", "DB_TIMEOUT=5s\n", "DB_TIMEOUT=5s\nAPI_TOKEN=old-value\n")
			},
			change: Change{Env: &Env{Container: "api", Set: map[string]string{"API_TOKEN": plainSecretValue}}},
			wantIn: []string{"API_TOKEN", "looks like a secret"}},
		"a Helm values key": {golden: "helm-env-change",
			edit: func(t *testing.T, files map[string]string, _ *goldenRequest) {
				replaceOnce(t, files, "charts/web/templates/deployment.yaml", "            {{- toYaml .Values.env | nindent 12 }}\n",
					"            {{- toYaml .Values.env | nindent 12 }}\n            - name: DB_PASSWORD\n              value: {{ .Values.db.password | quote }}\n")
				replaceOnce(t, files, "charts/web/values.yaml", "env:\n", "db:\n  password: \"\"\n\nenv:\n")
			},
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"DB_PASSWORD": plainSecretValue}}},
			wantIn: []string{"env DB_PASSWORD of container web of apps/v1 Deployment prod/web-prod"}},
		"a Helm env list": {golden: "helm-env-change",
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"SESSION_SECRET": plainSecretValue}}},
			wantIn: []string{"env SESSION_SECRET of container web"}},
	} {
		t.Run(name, func(t *testing.T) {
			files, req := goldenInput(t, tc.golden, func(files map[string]string, req *goldenRequest) {
				if tc.edit != nil {
					tc.edit(t, files, req)
				}
			})
			res, err := Plan(context.Background(), Request{RepoDir: testtree.Write(t, files), Apps: req.Apps, App: req.App, Target: req.Target, Change: tc.change})
			requireSecretRefusal(t, res, err, tc.wantIn...)
		})
	}
}

// TestPlainValuesThatAreNoNewSecretsAreAllowed: a flag such as REDIS_AUTH=true
// and an empty value are not secrets, and a plain secret-looking value the
// before-render already holds does not block a change that leaves it as it is
// (a replica count, another variable, another key of a generated ConfigMap
// whose hashed name the change renews).
func TestPlainValuesThatAreNoNewSecretsAreAllowed(t *testing.T) {
	withPassword := strings.Replace(plainSecretDeployment, "              value: info\n",
		"              value: info\n            - name: DB_PASSWORD\n              value: old-plain-value\n", 1)
	web := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for name, tc := range map[string]struct {
		deployment string
		change     Change
	}{
		"a flag":                                      {plainSecretDeployment, Change{Env: &Env{Container: "web", Set: map[string]string{"REDIS_AUTH": "true", "TLS_AUTH": "False"}}}},
		"an empty value":                              {plainSecretDeployment, Change{Env: &Env{Container: "web", Set: map[string]string{"API_TOKEN": ""}}}},
		"a URL with a user and no password":           {plainSecretDeployment, Change{Env: &Env{Container: "web", Set: map[string]string{"DATABASE_URL": "postgres://app@db:5432/app?sslmode=require"}}}},
		"a URL whose password is set elsewhere":       {plainSecretDeployment, Change{Env: &Env{Container: "web", Set: map[string]string{"DATABASE_URL": "postgres://app:$(DB_PASSWORD)@db:5432/app"}}}},
		"a replica count beside an old plain value":   {withPassword, Change{Replicas: &Replicas{Count: 5}}},
		"another variable beside an old plain value":  {withPassword, Change{Env: &Env{Container: "web", Set: map[string]string{"LOG_LEVEL": "debug"}}}},
		"removing an old plain value":                 {withPassword, Change{Env: &Env{Container: "web", Unset: []string{"DB_PASSWORD"}}}},
		"a patch leaving an old plain value as it is": {withPassword, Change{Patch: &Patch{Merge: jsonObject(`{"metadata":{"labels":{"tier":"front"}}}`)}}},
	} {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, map[string]string{"apps/web/deployment.yaml": tc.deployment})
			apps := []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}}
			res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: apps, Target: web, Change: tc.change})
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if !res.Verification.Verified {
				t.Fatalf("not verified: %+v", res.Verification)
			}
		})
	}

	t.Run("another key of a generated ConfigMap", func(t *testing.T) {
		files, req := goldenInput(t, "generated-env-line-edit", func(files map[string]string, _ *goldenRequest) {
			replaceOnce(t, files, "base/api.env", "REGION=eu-west-1\n", "REGION=eu-west-1\nAPI_TOKEN=old-value\n")
		})
		repo := testtree.Write(t, files)
		// The line renames the ConfigMap the golden request names.
		objs, err := Render(context.Background(), repo, req.Apps[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.Manifest["kind"] == "ConfigMap" {
				req.Target.Name = str(o.Manifest, "metadata", "name")
			}
		}
		res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: req.Apps, App: req.App, Target: req.Target, Change: req.Change})
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		if res.Renamed == "" || res.Renamed == req.Target.Name {
			t.Fatalf("the ConfigMap keeps its name %s; the case no longer renews it", req.Target.Name)
		}
	})
}

// TestRefusalsDoNotQuoteTheRequestsSecretValues: a change no edit verifies is
// refused with every location tried, and a Helm key guessed for the value
// (image.tag, set to DB_PASSWORD's value) and the render it gave quoted the
// value, masked only where the key was a secret's; the values a change gives
// secret-looking names are scrubbed from the refusal as the repository's are.
func TestRefusalsDoNotQuoteTheRequestsSecretValues(t *testing.T) {
	files, req := goldenInput(t, "helm-env-change", func(files map[string]string, _ *goldenRequest) {
		// The chart changes the value it is given: no values edit renders it.
		replaceOnce(t, files, "charts/web/templates/deployment.yaml", "            {{- toYaml .Values.env | nindent 12 }}\n",
			"            {{- toYaml .Values.env | nindent 12 }}\n            - name: DB_PASSWORD\n              value: {{ .Values.db.password | upper | quote }}\n")
		replaceOnce(t, files, "charts/web/values.yaml", "env:\n", "db:\n  password: \"\"\n\nenv:\n")
	})
	_, err := Plan(context.Background(), Request{RepoDir: testtree.Write(t, files), Apps: req.Apps, App: req.App, Target: req.Target,
		Change: Change{Env: &Env{Container: "web", Set: map[string]string{"DB_PASSWORD": plainSecretValue, "LOG_LEVEL": "debug"}}}})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeVerificationFailed || len(ref.Attempts) == 0 {
		t.Fatalf("Plan: %v, want %s with the locations tried", err, CodeVerificationFailed)
	}
	out, _ := json.Marshal(ref)
	requireNoSecret(t, "the refusal", string(out)+err.Error(), []string{plainSecretValue})
	if !strings.Contains(string(out), "debug") {
		t.Errorf("the refusal lost the value of a name that is no secret's:\n%s", out)
	}
}
