package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
)

const sampleRepo = "../testdata/sample-repo"

// runPlanCmd runs the plan command with args, bounding its render by
// testRenderTimeout unless args give a --timeout of their own.
func runPlanCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--timeout") }) {
		args = append([]string{"--timeout", testRenderTimeout.String()}, args...)
	}
	var stdout, stderr bytes.Buffer
	code := runPlan(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestPlanCommand(t *testing.T) {
	cases := map[string]struct {
		args       []string
		code       int
		stdoutHas  []string
		stderrHas  []string
		stdoutLack []string
		stderrLack []string
	}{
		"quick start: scale through the replicas entry": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "--type", "Kustomize", "scale", "deployment/web", "--replicas", "4"},
			code:      0,
			stdoutHas: []string{"-    count: 3", "+    count: 4", "spec.replicas: 3 -> 4", "Verdict: verified", "Nothing written"},
		},
		"a render past its --timeout is refused, naming it": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "--type", "Kustomize", "--timeout", "1ns", "scale", "deployment/web", "--replicas", "4"},
			code:      2,
			stderrHas: []string{"render_timeout", "rendering took longer than 1ns"},
		},
		"a --timeout that is not positive": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "--type", "Kustomize", "--timeout", "0s", "scale", "deployment/web", "--replicas", "4"},
			code:      1,
			stderrHas: []string{"--timeout must be a positive duration such as 5s or 1m, not 0s"},
		},
		"image tag through the images entry": {
			args:      []string{"--repo", sampleRepo, "--application", sampleRepo + "/argocd/web.yaml", "--applications", sampleRepo + "/argocd", "set-image", "deployment/web", "web=ghcr.io/example/web:1.5.0"},
			code:      0,
			stdoutHas: []string{`+    newTag: "1.5.0"`, "images entry"},
		},
		"env in the staging patch": {
			args:      []string{"--repo", sampleRepo, "--application", sampleRepo + "/argocd/web-staging.yaml", "--applications", sampleRepo + "/argocd", "set-env", "deployment/staging-web", "-c", "web", "LOG_LEVEL=warn"},
			code:      0,
			stdoutHas: []string{"debug-logging.yaml", "+              value: warn"},
		},
		"resources of a directory app, format detected": {
			args:       []string{"--repo", sampleRepo, "--app", "plain/worker", "--namespace", "worker", "set-resources", "deployment/worker", "-c", "worker", "--requests", "cpu=250m"},
			code:       0,
			stdoutHas:  []string{"source type Directory detected", "+              cpu: 250m"},
			stdoutLack: []string{"not-a-real-token"},
		},
		"format detected as Kustomize, like Argo CD": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "scale", "deployment/web", "--replicas", "4"},
			code:      0,
			stdoutHas: []string{"Note: source type Kustomize detected from the files at apps/web", "Application: web (Kustomize", "+    count: 4"},
		},
		"refused after detection: the note explains the format on stderr": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "set-image", "deployment/web", "web=nginx:1.27"},
			code:      2,
			stderrHas: []string{"Note: source type Kustomize detected", "Refused (invalid_request)"},
		},
		"refused: image name differs": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "--type", "Kustomize", "set-image", "deployment/web", "web=nginx:1.27"},
			code:      2,
			stderrHas: []string{"Refused (invalid_request)", "never image names"},
		},
		"refused: target not found": {
			args:      []string{"--repo", sampleRepo, "--app", "plain/worker", "--type", "Directory", "scale", "secret/db", "--replicas", "2"},
			code:      2,
			stderrHas: []string{"Refused (target_not_found)"},
		},
		"bad usage": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "scale", "deployment/web"},
			code:      1,
			stderrHas: []string{"scale needs --replicas"},
		},
		"a change flag before the change": {
			args:       []string{"--repo", sampleRepo, "--app", "apps/web", "-n", "web", "scale", "deployment/web", "--replicas", "4"},
			code:       1,
			stderrHas:  []string{"flag provided but not defined: -n", "-n is a flag of the change: give it after the change", "Run 'kukie-gitops plan --help' for usage."},
			stderrLack: []string{"Exit codes"},
		},
		"an unknown flag": {
			args:       []string{"--repo", sampleRepo, "--app", "apps/web", "--dry", "scale", "deployment/web", "--replicas", "4"},
			code:       1,
			stderrHas:  []string{"flag provided but not defined: -dry", "Run 'kukie-gitops plan --help' for usage."},
			stderrLack: []string{"Exit codes", "is a flag of the change"},
		},
		"unknown kind": {
			args:      []string{"--repo", sampleRepo, "--app", "apps/web", "scale", "widget/web", "--replicas", "2"},
			code:      1,
			stderrHas: []string{"give --api-version"},
		},
		"error: repository missing": {
			args:      []string{"--repo", "../testdata/no-such-repo", "--app", "apps/web", "--type", "Kustomize", "scale", "deployment/web", "--replicas", "4"},
			code:      1,
			stderrHas: []string{"no-such-repo"},
		},
		"delete a base's object: a delete patch in the overlay, and the app does not prune": {
			args:      []string{"--repo", sampleRepo, "--application", sampleRepo + "/argocd/web.yaml", "--applications", sampleRepo + "/argocd", "delete", "svc/web"},
			code:      0,
			stdoutHas: []string{"new delete patch", "+$patch: delete", "Service web/web removed", "argocd app sync argocd/web --prune", "only the target is gone"},
		},
		"delete a directory app's file, secret-looking values masked": {
			args:       []string{"--repo", sampleRepo, "--app", "plain/worker", "--type", "Directory", "--namespace", "worker", "delete", "cm/worker-settings"},
			code:       0,
			stdoutHas:  []string{"remove file", "deleted file mode", "-  QUEUE_NAME: orders"},
			stdoutLack: []string{"not-a-real-token"},
		},
		"help lists the flags": {
			args:      []string{"--help"},
			code:      0,
			stdoutHas: []string{"-repo", "-application", "-applications", "-write", "-output", "set-resources", "delete KIND/NAME", "Exit codes"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runPlanCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stdoutLack {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout shows %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, s := range tc.stderrLack {
				if strings.Contains(stderr, s) {
					t.Errorf("stderr shows %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// copySampleRepo copies the sample repository into a temporary directory.
func copySampleRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	err := filepath.WalkDir(sampleRepo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(sampleRepo, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(repo, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(repo, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestPlanCommandWritesAndReportsJSON(t *testing.T) {
	repo := copySampleRepo(t)
	code, stdout, stderr := runPlanCmd(t, "--repo", repo, "--app", "apps/web-staging", "--type", "Kustomize", "--namespace", "web-staging", "--output", "json", "--write",
		"scale", "deployment/staging-web", "--replicas", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Verdict string `json:"verdict"`
		Written bool   `json:"written"`
		Result  struct {
			Strategy string `json:"strategy"`
			GitDiff  string `json:"git_diff"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	// The overlay sets no replicas yet, and its one patch is about logging: the
	// change goes into a replicas: entry of the overlay's kustomization.
	if out.Verdict != "verified" || !out.Written || out.Result.Strategy != "new replicas entry" {
		t.Fatalf("unexpected result: %+v", out)
	}
	kustomization, err := os.ReadFile(filepath.Join(repo, "apps/web-staging/kustomization.yaml"))
	if err != nil || !strings.Contains(string(kustomization), "replicas:\n  - name: web\n    count: 2\n") {
		t.Fatalf("edit not written: %v\n%s", err, kustomization)
	}
	// Planning again on the written tree finds nothing left to do.
	code, _, stderr = runPlanCmd(t, "--repo", repo, "--app", "apps/web-staging", "--type", "Kustomize", "--namespace", "web-staging",
		"scale", "deployment/staging-web", "--replicas", "2")
	if code != 2 || !strings.Contains(stderr, "no_change") {
		t.Fatalf("second plan: exit %d: %s", code, stderr)
	}
}

func TestPlanCommandWritesADeletion(t *testing.T) {
	repo := copySampleRepo(t)
	args := []string{"--repo", repo, "--app", "plain/worker", "--type", "Directory", "--namespace", "worker"}
	code, _, stderr := runPlanCmd(t, append(args, "--write", "delete", "cm/worker-settings")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, "plain/worker/configmap.yaml")); !os.IsNotExist(err) {
		t.Fatalf("configmap.yaml is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "plain/worker/deployment.yaml")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runPlanCmd(t, append(args, "delete", "cm/worker-settings")...)
	if code != 2 || !strings.Contains(stderr, "target_not_found") {
		t.Fatalf("second plan: exit %d: %s", code, stderr)
	}
}

func TestPlanCommandPlansHelmThroughValues(t *testing.T) {
	repo := t.TempDir()
	chart := filepath.Join(repo, "charts", "web")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"values.yaml":           "replicas: 1\n",
		"values-prod.yaml":      "# prod\nreplicas: 2 # busy\n",
		"templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n",
	} {
		if err := os.WriteFile(filepath.Join(chart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runPlanCmd(t, "--repo", repo, "--app", "charts/web", "--values", "values-prod.yaml", "--release-name", "api",
		"--output", "json", "scale", "deployment/api", "--replicas", "3")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var out struct {
		Verdict string   `json:"verdict"`
		Notes   []string `json:"notes"`
		Result  struct {
			Strategy string `json:"strategy"`
			GitDiff  string `json:"git_diff"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	if out.Verdict != "verified" || out.Result.Strategy != "values key" || len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "source type Helm detected") {
		t.Fatalf("unexpected output: %+v", out)
	}
	if !strings.Contains(out.Result.GitDiff, "-replicas: 2 # busy\n+replicas: 3 # busy\n") {
		t.Fatalf("the edit is not the prod values key:\n%s", out.Result.GitDiff)
	}

	// A dependency neither vendored nor pinned by a Chart.lock is refused by name,
	// as in the service.
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n- name: redis\n  version: 1.x\n  repository: https://charts.example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runPlanCmd(t, "--repo", repo, "--app", "charts/web", "--values", "values-prod.yaml", "scale", "deployment/web", "--replicas", "3")
	if code != 2 || !strings.Contains(stderr, "Refused (helm_dependency)") || !strings.Contains(stderr, "the dependency redis is not vendored under charts/ and the chart has no Chart.lock") {
		t.Fatalf("exit %d, want a helm_dependency refusal\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// The command reads Application manifests through the service's converter: the
// target's own kustomize options that render cannot apply refuse the plan, as the
// service does, and those of an app the edit does not reach change nothing.
func TestPlanCommandRefusesTheKustomizeOptionsTheServiceRefuses(t *testing.T) {
	apps := t.TempDir()
	for _, name := range []string{"web.yaml", "web-staging.yaml", "worker.yaml"} {
		data, err := os.ReadFile(filepath.Join(sampleRepo, "argocd", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(apps, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withOption := func(name, option string) string {
		p := filepath.Join(t.TempDir(), name)
		data, err := os.ReadFile(filepath.Join(sampleRepo, "argocd", name))
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.Replace(string(data), "    path: ", "    kustomize:\n      "+option+"\n    path: ", 1))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	stagingWithPatches := withOption("web-staging.yaml", "patches: [{target: {kind: Deployment}, patch: '[{\"op\": \"add\", \"path\": \"/metadata/labels/x\", \"value\": \"y\"}]'}]")
	if err := os.Rename(stagingWithPatches, filepath.Join(apps, "web-staging.yaml")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPlanCmd(t, "--repo", sampleRepo, "--application", filepath.Join(apps, "web.yaml"), "--applications", apps,
		"scale", "deployment/web", "--replicas", "4")
	if code != 0 || !strings.Contains(stdout, "Verdict: verified") {
		t.Fatalf("an unreached app's options blocked the plan: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	web := withOption("web.yaml", "laterOption: true")
	code, stdout, stderr = runPlanCmd(t, "--repo", sampleRepo, "--application", web, "--applications", apps,
		"scale", "deployment/web", "--replicas", "4")
	if code != 2 || !strings.Contains(stderr, "Refused (unsupported_source)") || !strings.Contains(stderr, "(laterOption)") {
		t.Fatalf("the target's own unsupported option: exit %d, want 2 naming it\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// Kustomize prints a warning for each deprecated field it builds; the command
// shows it as a warning on its own stderr, and nothing reaches the process's
// stderr raw.
func TestPlanCommandLogsKustomizeWarnings(t *testing.T) {
	raw, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = raw
	t.Cleanup(func() { os.Stderr = saved })
	libs, err := logging.CaptureLibraryOutput(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	for name, content := range map[string]string{
		"app/kustomization.yaml": "commonLabels:\n  team: shop\nresources:\n  - deploy.yaml\n",
		"app/deploy.yaml":        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n",
	} {
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := runPlan(logging.WithLibraryOutput(context.Background(), libs), []string{"--repo", repo, "--app", "app", "--type", "Kustomize",
		"scale", "deployment/web", "--replicas", "2"}, &stdout, &stderr)
	if err := libs.Close(); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if b, err := os.ReadFile(raw.Name()); err != nil || len(b) != 0 {
		t.Fatalf("raw stderr got %q (%v), want nothing", b, err)
	}
	for _, want := range []string{"WRN", "'commonLabels' is deprecated", "component=kustomize"} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// The apps the command verifies are those that deploy the edited tree: the same
// repository however its URL is spelled, at the same branch. An edit of the base that
// the staging overlay also builds leaks into the staging app when that app deploys
// the same repository, and does not when it deploys another.
func TestPlanCommandVerifiesTheAppsOfTheSameRepositoryHoweverSpelled(t *testing.T) {
	cases := map[string]struct {
		repoURL string
		checked bool
	}{
		"same spelling":          {repoURL: "https://github.com/example/deploy.git", checked: true},
		"scp-like, another case": {repoURL: "git@github.com:Example/Deploy.git", checked: true},
		"ssh with a port":        {repoURL: "ssh://git@github.com:22/example/deploy", checked: true},
		"another repository":     {repoURL: "https://github.com/example/other.git", checked: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			apps := t.TempDir()
			// The primary app deploys the base itself, so its edit reaches the
			// staging overlay's app too.
			for file, edit := range map[string][2]string{
				"web.yaml":         {"path: apps/web", "path: bases/web"},
				"web-staging.yaml": {"https://github.com/example/deploy.git", tc.repoURL},
			} {
				data, err := os.ReadFile(filepath.Join(sampleRepo, "argocd", file))
				if err != nil {
					t.Fatal(err)
				}
				data = []byte(strings.Replace(string(data), edit[0], edit[1], 1))
				if err := os.WriteFile(filepath.Join(apps, file), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runPlanCmd(t, "--repo", sampleRepo, "--application", filepath.Join(apps, "web.yaml"), "--applications", apps,
				"set-resources", "deployment/web", "-c", "web", "--requests", "cpu=300m")
			if tc.checked {
				if code != 2 || !strings.Contains(stderr, "Refused (change_leaks)") || !strings.Contains(stderr, "application argocd/web-staging") {
					t.Fatalf("web-staging (repoURL %s) not verified: exit %d, want 2 with the leak into it\nstdout:\n%s\nstderr:\n%s", tc.repoURL, code, stdout, stderr)
				}
				return
			}
			if code != 0 || strings.Contains(stdout, "web-staging") {
				t.Fatalf("web-staging (repoURL %s) of another repository verified: exit %d\nstdout:\n%s\nstderr:\n%s", tc.repoURL, code, stdout, stderr)
			}
		})
	}
}

// TestPlanCommandSaysWhichGeneratedObjectIsRenamed: a data key of a generated
// ConfigMap changed renames the ConfigMap; the text says from what to what and
// by which generator, the cluster diff marks its removed and added halves, and
// the JSON carries the rename.
func TestPlanCommandSaysWhichGeneratedObjectIsRenamed(t *testing.T) {
	const repo = "../testdata/render/generated-literal-edit/input"
	args := []string{"--repo", repo, "--app", "apps/web", "--type", "Kustomize", "--namespace", "web", "patch", "cm/web-settings-k89gbb87k7", "/data/MODE=slow"}
	code, stdout, stderr := runPlanCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`Renamed:     [web] ConfigMap web/web-settings-k89gbb87k7 -> web/web-settings-c4kffct259 (configMapGenerator "web-settings" of apps/web/kustomization.yaml names it by a hash of its content; the references to it follow)`,
		"[web] ConfigMap web/web-settings-k89gbb87k7 removed (renamed to web-settings-c4kffct259)",
		"[web] ConfigMap web/web-settings-c4kffct259 added (renamed from web-settings-k89gbb87k7)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = runPlanCmd(t, append([]string{"--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var out struct {
		Result struct {
			Renames []map[string]string `json:"renames"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	want := map[string]string{"app": "web", "apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "from": "web-settings-k89gbb87k7", "to": "web-settings-c4kffct259", "generator": `configMapGenerator "web-settings" of apps/web/kustomization.yaml`}
	if len(out.Result.Renames) != 1 || !maps.Equal(out.Result.Renames[0], want) {
		t.Fatalf("renames = %v, want [%v]", out.Result.Renames, want)
	}
}

// TestPlanCommandPrintsTheTargetAsRendered: the Target line and the JSON's
// result.target name the object the render holds, not the words of the
// request: the kind as the render spells it, the namespace it is applied in
// when none was given, and the generated name of a ConfigMap asked for by its
// generator's name, in whichever namespace the app puts it.
func TestPlanCommandPrintsTheTargetAsRendered(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"a short kind, the namespace the kustomization sets": {
			args: []string{"--repo", sampleRepo, "--app", "apps/web", "--type", "Kustomize", "scale", "deploy/web", "--replicas", "4"},
			want: "apps/v1 Deployment web/web",
		},
		"a ConfigMap by its generator's name, no namespace given": {
			args: []string{"--repo", "../testdata/render/generated-target-by-generator-name/input", "--app", "apps/shop", "--type", "Kustomize",
				"patch", "cm/shop-config", "/data/LOG_LEVEL=debug"},
			want: "v1 ConfigMap shop/shop-config-c7hhc4bf48",
		},
		"a kind spelled in another case, the destination's namespace": {
			args: []string{"--repo", "../testdata/render/kind-spelled-lowercase/input", "--app", "certs", "--type", "Directory", "--namespace", "shop",
				"patch", "certificate/shop-tls", "--api-version", "cert-manager.io/v1", "--merge", `{"spec":{"dnsNames":["shop.example.com","www.shop.example.com"]}}`},
			want: "cert-manager.io/v1 Certificate shop/shop-tls",
		},
		"a delete": {
			args: []string{"--repo", sampleRepo, "--app", "plain/worker", "--type", "Directory", "--namespace", "worker", "delete", "cm/worker-settings"},
			want: "v1 ConfigMap worker/worker-settings",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runPlanCmd(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, "\nTarget:      "+tc.want+"\n") {
				t.Errorf("Target line is not %q:\n%s", tc.want, stdout)
			}
			code, stdout, stderr = runPlanCmd(t, append([]string{"--output", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("json: exit %d: %s", code, stderr)
			}
			var out struct {
				Result struct {
					Target *objref.Target `json:"target"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			if out.Result.Target == nil || out.Result.Target.String() != tc.want {
				t.Errorf("result.target = %v, want %s", out.Result.Target, tc.want)
			}
		})
	}
}

// TestPlanCommandSaysWhatIsWrongWithItsCommandLine: a repository or an app
// path that cannot be planned, flags that conflict or do not apply to the app,
// are an error (exit code 1, never a refusal) saying which flag is wrong and
// why, before anything is rendered; with --output json stdout holds the error
// too, as it holds a verdict.
func TestPlanCommandSaysWhatIsWrongWithItsCommandLine(t *testing.T) {
	absApp, err := filepath.Abs(filepath.Join(sampleRepo, "apps/web"))
	if err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	change := []string{"scale", "deployment/web", "--replicas", "4"}
	cases := map[string]struct {
		args []string
		want string
	}{
		"an --application given as in the repository": {
			args: []string{"--repo", sampleRepo, "--application", "argocd/web.yaml"},
			want: "--application argocd/web.yaml: no such file or directory: looked for " + filepath.Join(cwd, "argocd/web.yaml") +
				" (a relative path is resolved against the current directory " + cwd + ", not --repo); the repository has argocd/web.yaml: " +
				"give --application " + filepath.Join(sampleRepo, "argocd/web.yaml"),
		},
		"an --applications directory that is nowhere": {
			args: []string{"--repo", sampleRepo, "--application", filepath.Join(sampleRepo, "argocd/web.yaml"), "--applications", "no/such/apps"},
			want: "--applications no/such/apps: no such file or directory: looked for " + filepath.Join(cwd, "no/such/apps") +
				" (a relative path is resolved against the current directory " + cwd + ", not --repo)",
		},
		"an absolute --application that is not there": {
			args: []string{"--repo", sampleRepo, "--application", filepath.Join(cwd, "no-such.yaml")},
			want: "--application " + filepath.Join(cwd, "no-such.yaml") + ": no such file or directory",
		},
		"an app path that leaves the repository": {
			args: []string{"--repo", sampleRepo, "--app", "../web", "--type", "Kustomize"},
			want: "--app ../web leaves the repository: give the app's path in it, as spec.source.path does (apps/web)",
		},
		"an app path that leaves it from a subdirectory": {
			args: []string{"--repo", sampleRepo, "--app", "apps/../../web"},
			want: "--app apps/../../web leaves the repository",
		},
		"an app path that is no directory of the repository": {
			args: []string{"--repo", sampleRepo, "--app", "apps/nope", "--type", "Kustomize"},
			want: "--app apps/nope is not a directory of the repository " + sampleRepo,
		},
		"an app given by its path on this machine": {
			args: []string{"--repo", sampleRepo, "--app", absApp, "--type", "Kustomize"},
			want: "--app " + absApp + " is not a directory of the repository " + sampleRepo + ": give its path in the repository, --app apps/web",
		},
		"a repository that is a file": {
			args: []string{"--repo", filepath.Join(sampleRepo, "apps/web/kustomization.yaml"), "--app", "apps/web"},
			want: "--repo " + filepath.Join(sampleRepo, "apps/web/kustomization.yaml") + " is not a directory",
		},
		"a repository that is not there": {
			args: []string{"--repo", "../testdata/no-such-repo", "--app", "apps/web"},
			want: "--repo ../testdata/no-such-repo: no such directory",
		},
		"both --app and --application": {
			args: []string{"--repo", sampleRepo, "--app", "apps/web-staging", "--application", sampleRepo + "/argocd/web.yaml"},
			want: "give --app or --application, not both",
		},
		"--values of an app that is not Helm": {
			args: []string{"--repo", sampleRepo, "--app", "apps/web", "--values", "values-prod.yaml"},
			want: "--values is for a Helm app; application web is Kustomize",
		},
		"--release-name of an app that is not Helm": {
			args: []string{"--repo", sampleRepo, "--app", "plain/worker", "--type", "Directory", "--release-name", "api"},
			want: "--release-name is for a Helm app; application worker is Directory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runPlanCmd(t, append(tc.args, change...)...)
			if code != 1 || !strings.Contains(stderr, "kukie-gitops plan: "+tc.want) || stdout != "" {
				t.Fatalf("exit %d, want 1 saying %q on stderr alone\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout, stderr)
			}
			code, stdout, stderr = runPlanCmd(t, append(append([]string{"--output", "json"}, tc.args...), change...)...)
			var out struct{ Verdict, Error string }
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("--output json: stdout is not JSON: %v\n%s", err, stdout)
			}
			if code != 1 || out.Verdict != "error" || !strings.Contains(out.Error, tc.want) {
				t.Fatalf("--output json: exit %d and %+v, want 1 and the error %q\nstderr:\n%s", code, out, tc.want, stderr)
			}
		})
	}
}

// An Application deploying a chart from a Helm repository, its values from the
// repository through a ref source, renders with the chart fetched from that
// repository (at the version targetRevision pins) and is edited in its values
// file; the output names the chart. Without a chart source it is refused by
// name, and the command's own fetcher (the default) fetches through helmrepo's
// guard, which refuses a repository on this host.
func TestPlanCommandRendersAChartFromAHelmRepository(t *testing.T) {
	const golden = renderGoldens + "/helm-remote-chart-values-key"
	repo := testtree.Write(t, readTree(t, filepath.Join(golden, "input")))
	application := func(repoURL string) string {
		p := filepath.Join(t.TempDir(), "redis.yaml")
		manifest := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: redis, namespace: argocd}
spec:
  destination: {namespace: cache}
  sources:
    - repoURL: ` + repoURL + `
      chart: redis
      targetRevision: 18.1.0
      helm: {valueFiles: [$values/envs/prod/redis.yaml]}
    - {repoURL: ` + parityRepoURL + `, targetRevision: main, ref: values}
`
		if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scale := []string{"--timeout", testRenderTimeout.String(), "--repo", repo, "--application", application("https://charts.example.com"), "scale", "statefulset/redis-redis", "--replicas", "5"}

	charts := render.WithCharts(context.Background(), chartFetcher(serveChartRepository(t, filepath.Join(golden, "repository"))))
	var stdout, stderr bytes.Buffer
	code := runPlan(charts, append([]string{"--fetch-charts=false"}, scale...), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "Application: argocd/redis (Helm, chart redis 18.1.0 from https://charts.example.com, values in envs/prod, namespace cache)") ||
		!strings.Contains(stdout.String(), "-replicaCount: 3\n+replicaCount: 5\n") || !strings.Contains(stdout.String(), "Edit:        values key (envs/prod/redis.yaml)") {
		t.Fatalf("exit %d, want the values file edited, naming the chart\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}

	code, out, errOut := runPlanCmd(t, append([]string{"--fetch-charts=false"}, scale[2:]...)...)
	if code != 2 || !strings.Contains(errOut, "Refused (helm_dependency)") || !strings.Contains(errOut, "deploys chart redis 18.1.0 from https://charts.example.com, and this render fetches no charts") ||
		!strings.Contains(errOut, "which --fetch-charts=false does not fetch") {
		t.Fatalf("exit %d, want a helm_dependency refusal naming the chart\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	local := []string{"--repo", repo, "--application", application("http://127.0.0.1:9"), "scale", "statefulset/redis-redis", "--replicas", "5"}
	code, out, errOut = runPlanCmd(t, local...)
	if code != 2 || !strings.Contains(errOut, "Refused (helm_dependency)") || !strings.Contains(errOut, "chart redis 18.1.0 from http://127.0.0.1:9") || !strings.Contains(errOut, "this host's own") {
		t.Fatalf("exit %d, want the fetcher's guard to refuse a repository on this host\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestPlanCommandNotesTheTypeArgoCDDetectsForAnApplication: an Application as
// Git holds it names no source type (no kustomize, helm or directory block, no
// status), so its type is detected as Argo CD detects it; the note says so,
// and does not ask for --application, which was given.
func TestPlanCommandNotesTheTypeArgoCDDetectsForAnApplication(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  source: {repoURL: https://github.com/example/deploy.git, targetRevision: main, path: apps/web}
  destination: {server: https://kubernetes.default.svc, namespace: web}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPlanCmd(t, "--repo", sampleRepo, "--application", manifest, "scale", "deployment/web", "--replicas", "4")
	const note = "Note: source type Kustomize detected from the files at apps/web, as Argo CD's repo server does for an Application whose source names none (pass --type to say otherwise)"
	if code != 0 || !strings.Contains(stdout, note) || strings.Contains(stdout, "--application to say it") {
		t.Fatalf("exit %d, want the note %q\nstdout:\n%s\nstderr:\n%s", code, note, stdout, stderr)
	}
}

// A multi-source Application's target may be rendered by a source other than
// its first: the command reads every source of --application, as the service
// does, and the edit goes to the one rendering the target.
func TestPlanCommandEditsTheSourceOfAMultiSourceApplicationThatRendersTheTarget(t *testing.T) {
	repo := t.TempDir()
	for name, content := range map[string]string{
		"charts/web/Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml":           "replicas: 1\n",
		"charts/web/templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n",
		"envs/prod/web.yaml":               "replicas: 2\n",
		"envs/prod/extra/worker.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: worker\nspec:\n  replicas: 1 # one is enough\n",
	} {
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  sources:
    - {repoURL: https://github.com/example/deploy.git, targetRevision: main, path: charts/web, helm: {valueFiles: [$values/envs/prod/web.yaml]}}
    - {repoURL: https://github.com/example/deploy.git, targetRevision: main, ref: values}
    - {repoURL: https://github.com/example/deploy.git, targetRevision: main, path: envs/prod/extra, directory: {}}
  destination: {server: https://kubernetes.default.svc, namespace: web}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPlanCmd(t, "--repo", repo, "--application", manifest, "scale", "deployment/worker", "--replicas", "3")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Application: argocd/web (source 3) (Directory, path envs/prod/extra, namespace web)\n",
		"-  replicas: 1 # one is enough\n+  replicas: 3 # one is enough\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
}
