package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

const renderGoldens = "../testdata/render"

// parityCase is one fixture run through the command and through the service: a
// repository, the Argo CD Applications that deploy from it, and one change.
type parityCase struct {
	name   string
	files  map[string]string
	apps   []map[string]any // Application manifests, the primary first
	target objref.Target
	change render.Change
	// want is the verdict render's golden expects.
	want string
	// argocdCM is the data of the cluster's argocd-cm (nil: there is none).
	argocdCM map[string]string
	// chartRepo is the address of the Helm chart repository serving the
	// golden's repository/ folder, for the charts its Chart.lock files pin
	// (empty: the golden has none).
	chartRepo string
}

// goldenRequest is request.yaml of a render golden case.
type goldenRequest struct {
	App    string               `json:"app"`
	Apps   []render.Application `json:"apps"`
	Target objref.Target        `json:"target"`
	Change render.Change        `json:"change"`
	// ShowRender only changes what the render golden writes.
	ShowRender bool `json:"showRender,omitempty"`
}

// TestPlanCommandAndServiceAgree runs every render golden, and variants whose
// Applications carry options render cannot apply, through the offline plan command
// (Application manifests on disk) and through the service's pipeline (the same
// Applications read from a cluster, the repository from GitHub), and requires the
// same verdict from both: verified, or refused with the same code.
func TestPlanCommandAndServiceAgree(t *testing.T) {
	entries, err := os.ReadDir(renderGoldens)
	if err != nil {
		t.Fatal(err)
	}
	var cases []parityCase
	withCharts := 0
	for _, e := range entries {
		if e.IsDir() {
			c := goldenParityCase(t, e.Name())
			if c.chartRepo != "" {
				withCharts++
			}
			cases = append(cases, c)
		}
	}
	if len(cases) < 20 || withCharts == 0 {
		t.Fatalf("found %d golden cases, %d with a chart repository; expected the full set", len(cases), withCharts)
	}
	cases = append(cases, unsupportedVariants(t, cases)...)
	cases = append(cases, multiSourceVariants(t, cases)...)

	service := servicePaths(t, cases)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cli := cliVerdict(t, c)
			if svc := service[c.name]; cli != c.want || svc != c.want {
				t.Fatalf("the plan command says %q, the service %q; the golden expects %q", cli, svc, c.want)
			}
		})
	}
}

func goldenParityCase(t *testing.T, name string) parityCase {
	t.Helper()
	dir := filepath.Join(renderGoldens, name)
	raw, err := os.ReadFile(filepath.Join(dir, "request.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var req goldenRequest
	if err := sigsyaml.UnmarshalStrict(raw, &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	verdict, err := os.ReadFile(filepath.Join(dir, "expected", "verdict.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := strings.Cut(string(verdict), "\n")
	if strings.HasPrefix(want, "verified") {
		want = verdictOf(true, "")
	}
	c := parityCase{name: name, files: readTree(t, filepath.Join(dir, "input")), target: req.Target, change: req.Change, want: want}
	if _, err := os.Stat(filepath.Join(dir, "repository")); err == nil {
		c.chartRepo = serveChartRepository(t, filepath.Join(dir, "repository"))
	}
	primary := req.App
	if primary == "" {
		primary = req.Apps[0].Name
	}
	for _, a := range req.Apps {
		if a.Kustomize.BuildOptions != "" {
			// Argo CD's build options are argocd-cm's, for every app.
			c.argocdCM = map[string]string{"kustomize.buildOptions": a.Kustomize.BuildOptions}
		}
		m := applicationManifest(a)
		if a.Name == primary {
			c.apps = append([]map[string]any{m}, c.apps...)
		} else {
			c.apps = append(c.apps, m)
		}
	}
	return c
}

// unsupportedVariants are copies of one Kustomize and one Directory golden that
// verifies, first with a kustomize option render cannot apply on the target's own
// Application, then on an extra Application of an unrelated folder.
func unsupportedVariants(t *testing.T, cases []parityCase) []parityCase {
	t.Helper()
	var out []parityCase
	for _, name := range []string{"overlay-images", "plain-single-file"} {
		var base *parityCase
		for i := range cases {
			if cases[i].name == name {
				base = &cases[i]
			}
		}
		if base == nil {
			t.Fatalf("golden %s is missing", name)
		}
		own := cloneCase(t, *base, name+"+own-unsupported-option")
		setKustomizeOption(own.apps[0], "laterOption", true)
		own.want = verdictOf(false, render.CodeUnsupportedSource)
		unrelated := cloneCase(t, *base, name+"+unrelated-unsupported-app")
		unrelated.files["unrelated/kustomization.yaml"] = "resources:\n  - cm.yaml\n"
		unrelated.files["unrelated/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unrelated\n"
		extra := applicationManifest(render.Application{Name: "unrelated", Path: "unrelated", SourceType: render.SourceKustomize, Namespace: "other"})
		setKustomizeOption(extra, "patches", []any{map[string]any{"patch": "[]", "target": map[string]any{"kind": "ConfigMap"}}})
		unrelated.apps = append(unrelated.apps, extra)
		// The same app deployed from another branch reads the same paths, but
		// not the tree being edited.
		branch := cloneCase(t, *base, name+"+same-app-other-branch")
		copied := cloneCase(t, parityCase{apps: branch.apps[:1]}, "").apps[0]
		copied["metadata"].(map[string]any)["name"] = "from-release"
		copied["spec"].(map[string]any)["source"].(map[string]any)["targetRevision"] = "release"
		branch.apps = append(branch.apps, copied)
		out = append(out, own, unrelated, branch)
	}
	return out
}

// multiSourceVariants are copies of a Helm golden whose Applications take their
// values files from a ref source: of the same repository and revision (the same
// verdict as the golden), then of another repository (refused: render does not
// read it).
func multiSourceVariants(t *testing.T, cases []parityCase) []parityCase {
	t.Helper()
	var base *parityCase
	for i := range cases {
		if cases[i].name == "helm-values-replicas" {
			base = &cases[i]
		}
	}
	if base == nil {
		t.Fatal("golden helm-values-replicas is missing")
	}
	toSources := func(c parityCase, refRepo string) {
		for _, app := range c.apps {
			spec := app["spec"].(map[string]any)
			src := spec["source"].(map[string]any)
			helm := src["helm"].(map[string]any)
			var files []any
			for _, f := range helm["valueFiles"].([]any) {
				// The goldens' values files are under envs/, outside the chart.
				_, rest, _ := strings.Cut(f.(string), "envs/")
				files = append(files, "$values/envs/"+rest)
			}
			helm["valueFiles"] = files
			delete(spec, "source")
			spec["sources"] = []any{src, map[string]any{"repoURL": refRepo, "targetRevision": "main", "ref": "values"}}
		}
	}
	same := cloneCase(t, *base, base.name+"+multi-source-ref")
	toSources(same, parityRepoURL)
	other := cloneCase(t, *base, base.name+"+multi-source-ref-elsewhere")
	toSources(other, "https://github.com/example/elsewhere.git")
	other.want = verdictOf(false, render.CodeUnsupportedSource)
	return append([]parityCase{same, other}, laterSourceVariant(t, cases))
}

// laterSourceVariant is golden multi-source-target-in-later-source with its
// two apps as the sources of one Application, as the cluster holds it (the
// chart with its $values ref, then the kustomization): the service names the
// Application alone, and the source that renders the target is edited.
func laterSourceVariant(t *testing.T, cases []parityCase) parityCase {
	t.Helper()
	var base *parityCase
	for i := range cases {
		if cases[i].name == "multi-source-target-in-later-source" {
			base = &cases[i]
		}
	}
	if base == nil || len(base.apps) != 2 {
		t.Fatal("golden multi-source-target-in-later-source is missing or has not two apps")
	}
	c := cloneCase(t, *base, base.name+"+one-application")
	chart := c.apps[0]["spec"].(map[string]any)["source"].(map[string]any)
	helm := chart["helm"].(map[string]any)
	var files []any
	for _, f := range helm["valueFiles"].([]any) {
		files = append(files, "$values"+f.(string))
	}
	helm["valueFiles"] = files
	extra := c.apps[1]["spec"].(map[string]any)["source"].(map[string]any)
	spec := c.apps[0]["spec"].(map[string]any)
	delete(spec, "source")
	spec["sources"] = []any{chart, map[string]any{"repoURL": parityRepoURL, "targetRevision": "main", "ref": "values"}, extra}
	// status.sourceTypes has an entry per source; the blocks name them too.
	c.apps[0]["status"] = map[string]any{"sourceTypes": []any{"Helm", "", "Kustomize"}}
	c.apps = c.apps[:1]
	return c
}

func cloneCase(t *testing.T, c parityCase, name string) parityCase {
	t.Helper()
	var apps []map[string]any
	b, err := json.Marshal(c.apps)
	if err == nil {
		err = json.Unmarshal(b, &apps)
	}
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]string, len(c.files))
	for k, v := range c.files {
		files[k] = v
	}
	c.name, c.apps, c.files = name, apps, files
	return c
}

func setKustomizeOption(app map[string]any, key string, value any) {
	src := app["spec"].(map[string]any)["source"].(map[string]any)
	k, _ := src["kustomize"].(map[string]any)
	if k == nil {
		k = map[string]any{}
		src["kustomize"] = k
	}
	k[key] = value
}

// applicationManifest writes render's view of an app back as the Argo CD
// Application it stands for, deploying from the fixture repository at main.
func applicationManifest(a render.Application) map[string]any {
	src := map[string]any{"repoURL": parityRepoURL, "path": a.Path, "targetRevision": "main"}
	k := map[string]any{}
	set := func(key string, v any, empty bool) {
		if !empty {
			k[key] = v
		}
	}
	o := a.Kustomize
	set("namePrefix", o.NamePrefix, o.NamePrefix == "")
	set("nameSuffix", o.NameSuffix, o.NameSuffix == "")
	set("namespace", o.Namespace, o.Namespace == "")
	set("commonLabels", o.CommonLabels, len(o.CommonLabels) == 0)
	set("commonAnnotations", o.CommonAnnotations, len(o.CommonAnnotations) == 0)
	set("images", o.Images, len(o.Images) == 0)
	set("components", o.Components, len(o.Components) == 0)
	set("patches", o.Patches, len(o.Patches) == 0)
	for key, on := range map[string]bool{"forceCommonLabels": o.ForceCommonLabels, "forceCommonAnnotations": o.ForceCommonAnnotations,
		"labelWithoutSelector": o.LabelWithoutSelector, "labelIncludeTemplates": o.LabelIncludeTemplates,
		"commonAnnotationsEnvsubst": o.CommonAnnotationsEnvsubst, "ignoreMissingComponents": o.IgnoreMissingComponents} {
		set(key, on, !on)
	}
	if len(o.Replicas) > 0 {
		var rs []any
		for _, name := range slices.Sorted(maps.Keys(o.Replicas)) {
			rs = append(rs, map[string]any{"name": name, "count": o.Replicas[name]})
		}
		k["replicas"] = rs
	}
	if len(k) > 0 {
		src["kustomize"] = k
	}
	if d := a.Directory; d != (render.DirectoryOptions{}) {
		src["directory"] = map[string]any{"recurse": d.Recurse, "include": d.Include, "exclude": d.Exclude, "disableExtensionFilter": d.DisableExtensionFilter}
	}
	if h := a.Helm; a.SourceType == render.SourceHelm {
		src["helm"] = helmManifest(h)
	}
	meta := map[string]any{"name": a.Name}
	if a.ManifestGeneratePaths != "" {
		meta["annotations"] = map[string]any{argocd.ManifestGeneratePathsAnnotation: a.ManifestGeneratePaths}
	}
	spec := map[string]any{"source": src, "destination": map[string]any{"namespace": a.Namespace}}
	if c := a.Chart; c != nil {
		// A chart from a Helm repository, its values files from the fixture
		// repository as a ref source gives them.
		chartSrc := map[string]any{"repoURL": c.Repository, "chart": c.Name, "targetRevision": c.Version}
		if h, ok := src["helm"].(map[string]any); ok {
			if files, ok := h["valueFiles"].([]string); ok {
				var refs []string
				for _, f := range files {
					refs = append(refs, "$values"+f)
				}
				h["valueFiles"] = refs
			}
			chartSrc["helm"] = h
		}
		delete(spec, "source")
		spec["sources"] = []any{chartSrc, map[string]any{"repoURL": parityRepoURL, "targetRevision": "main", "ref": "values"}}
	}
	if a.Prune {
		spec["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true}}
	}
	return map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": meta,
		"spec":   spec,
		"status": map[string]any{"sourceType": string(a.SourceType)}}
}

// helmManifest is spec.source.helm for a golden's Helm options.
func helmManifest(h render.HelmOptions) map[string]any {
	m := map[string]any{"releaseName": h.ReleaseName, "namespace": h.Namespace, "ignoreMissingValueFiles": h.IgnoreMissingValueFiles,
		"skipCrds": h.SkipCrds, "skipTests": h.SkipTests, "skipSchemaValidation": h.SkipSchemaValidation, "kubeVersion": h.KubeVersion}
	if len(h.ValueFiles) > 0 {
		m["valueFiles"] = h.ValueFiles
	}
	if len(h.APIVersions) > 0 {
		m["apiVersions"] = h.APIVersions
	}
	if h.Values != "" {
		m[cmpOr(h.ValuesField, "values")] = h.Values
		if h.ValuesField == "valuesObject" {
			var obj map[string]any
			if err := sigsyaml.Unmarshal([]byte(h.Values), &obj); err == nil {
				m["valuesObject"] = obj
			}
		}
	}
	var params []any
	for _, p := range h.Parameters {
		params = append(params, map[string]any{"name": p.Name, "value": p.Value, "forceString": p.ForceString})
	}
	if params != nil {
		m["parameters"] = params
	}
	var files []any
	for _, p := range h.FileParameters {
		files = append(files, map[string]any{"name": p.Name, "path": p.Path})
	}
	if files != nil {
		m["fileParameters"] = files
	}
	return m
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// verdict is "verified" or "refused: <code>".
func verdictOf(verified bool, code string) string {
	if verified {
		return "verified"
	}
	return "refused: " + code
}

// cliVerdict runs the plan command on the case and returns its verdict.
func cliVerdict(t *testing.T, c parityCase) string {
	t.Helper()
	repo := t.TempDir()
	for p, content := range c.files {
		full := filepath.Join(repo, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	appsDir := t.TempDir()
	for i, a := range c.apps {
		b, err := sigsyaml.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(appsDir, fmt.Sprintf("app-%d.yaml", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// --fetch-charts would fetch from the hosts the Chart.lock files name; a
	// golden's charts come from the repository the test serves instead, through
	// the context the command renders under, which --fetch-charts=false leaves
	// as it is. The service's pipeline fetches from the same repository.
	ctx := context.Background()
	if c.chartRepo != "" {
		ctx = render.WithCharts(ctx, chartFetcher(c.chartRepo))
	}
	args := []string{"--fetch-charts=false", "--repo", repo, "--application", filepath.Join(appsDir, "app-0.yaml"), "--applications", appsDir, "--output", "json"}
	if c.argocdCM != nil {
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-cm", "namespace": "argocd"}, "data": c.argocdCM}
		b, err := sigsyaml.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "argocd-cm.yaml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--argocd-cm", p)
	}
	args = append(args, changeArgs(t, c)...)
	var stdout, stderr bytes.Buffer
	code := runPlan(ctx, args, &stdout, &stderr)
	var out struct {
		Verdict string          `json:"verdict"`
		Refusal *render.Refusal `json:"refusal"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || (code != 0 && code != 2) {
		t.Fatalf("plan %v: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", args, code, err, stdout.String(), stderr.String())
	}
	if out.Refusal != nil {
		return verdictOf(false, out.Refusal.Code)
	}
	return verdictOf(out.Verdict == "verified", "")
}

// changeArgs spells the case's change as the command's arguments, and checks the
// command parses them back into the very same target and change.
func changeArgs(t *testing.T, c parityCase) []string {
	t.Helper()
	ch, tg := c.change, c.target
	ref := tg.Kind + "/" + tg.Name
	var args []string
	switch {
	case ch.Replicas != nil:
		args = []string{"scale", ref, "--replicas", fmt.Sprint(ch.Replicas.Count)}
	case ch.Image != nil:
		img := ch.Image.Name
		if ch.Image.Digest != "" {
			img += "@" + ch.Image.Digest
		} else {
			img += ":" + ch.Image.Tag
		}
		args = []string{"set-image", ref, ch.Image.Container + "=" + img}
	case ch.Env != nil:
		args = []string{"set-env", ref, "-c", ch.Env.Container}
		for _, k := range slices.Sorted(maps.Keys(ch.Env.Set)) {
			args = append(args, k+"="+ch.Env.Set[k])
		}
		for _, k := range ch.Env.Unset {
			args = append(args, k+"-")
		}
	case ch.Resources != nil:
		args = []string{"set-resources", ref, "-c", ch.Resources.Container}
		list := func(m map[string]string) string {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				parts = append(parts, k+"="+m[k])
			}
			return strings.Join(parts, ",")
		}
		if len(ch.Resources.Requests) > 0 {
			args = append(args, "--requests", list(ch.Resources.Requests))
		}
		if len(ch.Resources.Limits) > 0 {
			args = append(args, "--limits", list(ch.Resources.Limits))
		}
	case ch.Patch != nil && len(ch.Patch.Merge) > 0:
		merge, err := json.Marshal(ch.Patch.Merge)
		if err != nil {
			t.Fatal(err)
		}
		args = []string{"patch", ref, "--merge", string(merge)}
	case ch.Patch != nil:
		args = []string{"patch", ref}
		for _, f := range ch.Patch.Set {
			v, err := json.Marshal(f.Value)
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, f.Path+"="+string(v))
		}
	case ch.DeleteResource != nil:
		args = []string{"delete", ref}
	case ch.NewResource != nil:
		f := filepath.Join(t.TempDir(), "new.yaml")
		if err := os.WriteFile(f, []byte(ch.NewResource.Manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"add", "-f", f}
	default:
		t.Fatalf("case %s has no change", c.name)
	}
	args = append(args, "--api-version", tg.APIVersion)
	if tg.Namespace != "" {
		args = append(args, "-n", tg.Namespace)
	}
	gotTarget, gotChange, err := render.ParseChangeArgs(args, os.ReadFile)
	if err != nil || gotTarget != tg || !sameChange(gotChange, normalizedChange(ch)) {
		t.Fatalf("arguments %v parse as %+v %+v (%v), want %+v %+v", args, gotTarget, gotChange, err, tg, ch)
	}
	return args
}

// normalizedChange is the change as the command's parser builds it (an env change
// always has a Set map).
// sameChange compares changes as they are sent: a patch's numbers decode as
// float64 from a request body and as int64 from the command's arguments.
func sameChange(a, b render.Change) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func normalizedChange(ch render.Change) render.Change {
	if ch.Env != nil && ch.Env.Set == nil {
		env := *ch.Env
		env.Set = map[string]string{}
		ch.Env = &env
	}
	return ch
}

const (
	parityOwner   = "acme"
	parityRepoURL = "https://github.com/acme/fixture.git"
)

// parityCluster is every case's cluster: each case is a team whose one cluster
// "prod" runs the case's Applications, the primary managing the target.
type parityCluster struct {
	mu   sync.Mutex
	apps map[string][]argocd.Application // by team id
}

func (c *parityCluster) teamApps(team string) []argocd.Application {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apps[team]
}

func (c *parityCluster) Decide(_ context.Context, ref clusteraccess.Ref, t objref.Target) argocd.Decision {
	app := c.teamApps(ref.TeamID)[0]
	target := argocd.ResourceRef{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	own := argocd.Ownership{Managed: true, App: app.Key(), Application: &app, Level: argocd.LevelManual, Reason: "tracked"}
	return argocd.Decision{Path: argocd.PathGit, Known: true, Level: argocd.LevelManual, Reason: "managed by " + app.Key().String(),
		Targets: []argocd.TargetDecision{{Ref: target, Path: argocd.PathGit, Known: true, Ownership: own}}}
}

func (c *parityCluster) Applications(_ context.Context, ref clusteraccess.Ref) ([]argocd.Application, error) {
	return c.teamApps(ref.TeamID), nil
}

func (c *parityCluster) Capabilities(context.Context, clusteraccess.Ref) (kube.Capabilities, error) {
	return kube.Capabilities{}, nil
}

// ClusterByServer finds no cluster: the team registered none beside the plan's.
func (c *parityCluster) ClusterByServer(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (c *parityCluster) Clusters(context.Context, string) ([]string, error) {
	return []string{"prod"}, nil
}

func (c *parityCluster) Application(_ context.Context, ref clusteraccess.Ref, ns, name string) (argocd.Application, error) {
	for _, a := range c.teamApps(ref.TeamID) {
		if a.Namespace == ns && a.Name == name {
			return a, nil
		}
	}
	return argocd.Application{}, clusteraccess.ErrObjectNotFound
}

func (c *parityCluster) Object(context.Context, clusteraccess.Ref, objref.Target) (map[string]any, error) {
	return nil, clusteraccess.ErrObjectNotFound
}

func (c *parityCluster) DryRun(context.Context, clusteraccess.Ref, []map[string]any) error {
	return nil
}

type parityConnections struct{ inst int64 }

func (c parityConnections) RepoInstallation(context.Context, string, string, string) (int64, error) {
	return c.inst, nil
}

// servicePaths runs every case through the service's pipeline and returns the
// verdicts by case name: the cases without a chart repository through one
// pipeline, each with one through a pipeline whose render engine fetches charts
// from it, as service.New wires helmrepo into the engine.
func servicePaths(t *testing.T, cases []parityCase) map[string]string {
	t.Helper()
	var plain []parityCase
	verdicts := map[string]string{}
	for _, c := range cases {
		if c.chartRepo == "" {
			plain = append(plain, c)
			continue
		}
		maps.Copy(verdicts, pipelineVerdicts(t, []parityCase{c}, chartFetcher(c.chartRepo)))
	}
	maps.Copy(verdicts, pipelineVerdicts(t, plain, nil))
	return verdicts
}

// pipelineVerdicts submits cases to one pipeline, each as its own team whose
// repository is a copy of the case's, charts fetched from charts (nil: none),
// and returns the verdicts by case name.
func pipelineVerdicts(t *testing.T, cases []parityCase, charts render.ChartSource) map[string]string {
	t.Helper()
	ctx := context.Background()
	gh := githubtest.New(t)
	db := storetest.SQLite(t)
	cluster := &parityCluster{apps: map[string][]argocd.Application{}}
	var repos []string
	for i := range cases {
		name := fmt.Sprintf("fixture-%d", i)
		gh.CreateRepo(t, parityOwner, name, cases[i].files, "main")
		repos = append(repos, name)
	}
	inst := gh.CreateInstallation(t, parityOwner, repos...)
	cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := cache.NewArchives(t.TempDir(), 256<<20, cache.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.New(plan.Deps{Store: db, Clusters: cluster, Renderer: cache.RenderEngine{Charts: charts},
		Repos: github.Repos{Clients: cc, Archives: archives}, Connections: parityConnections{inst: inst}},
		plan.Config{ClaimTTL: 30 * time.Second, DeployPoll: time.Second, DeployTimeout: time.Minute, BotLogin: gh.BotLogin()})
	t.Cleanup(p.Close)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	verdicts := map[string]string{}

	deadline := time.Now().Add(3 * time.Minute)
	waitVerdict := func(name, code string) string {
		for {
			pl, err := db.PlanByCode(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			if v, done := serviceVerdict(t, pl); done {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: plan %s is still %s", name, code, pl.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A few plans at a time: each render has its own timeout, and a plan waiting
	// for the one kustomize build slot behind all the others (as under the race
	// detector on a busy machine) would run out of it.
	const inFlight = 4
	var pending []string
	for i, c := range cases {
		team, err := db.EnsureTeam(ctx, fmt.Sprintf("team-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		var apps []argocd.Application
		for _, m := range c.apps {
			m = withRepo(t, m, fmt.Sprintf("https://github.com/%s/%s.git", parityOwner, repos[i]))
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			a, err := argocd.DecodeApplication(b)
			if err != nil {
				t.Fatal(err)
			}
			if c.argocdCM != nil {
				settings := argocd.ParseSettings(c.argocdCM)
				a.Settings = &settings
			}
			apps = append(apps, a)
		}
		cluster.mu.Lock()
		cluster.apps[team.ID] = apps
		cluster.mu.Unlock()
		req := plan.Request{Cluster: "prod", Change: c.change, Reason: "parity", RequestedBy: "test",
			Target: c.target}
		if c.change.NewResource != nil {
			req.Application = &plan.AppRef{Namespace: apps[0].Namespace, Name: apps[0].Name}
			// A new resource names no target; the request still carries one.
			req.Target = objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "new"}
		}
		pl, _, err := p.Submit(ctx, team.ID, "team:test", req)
		var perr *plan.Error
		if errors.As(err, &perr) && perr.Code == plan.CodeInvalidRequest {
			// Refused at submission (the API's 400), before any plan exists.
			verdicts[c.name] = verdictOf(false, perr.Code)
			continue
		}
		if err != nil {
			t.Fatalf("%s: submit: %v", c.name, err)
		}
		codes[c.name] = pl.Code
		pending = append(pending, c.name)
		if len(pending) == inFlight {
			verdicts[pending[0]] = waitVerdict(pending[0], codes[pending[0]])
			pending = pending[1:]
		}
	}
	for _, name := range pending {
		verdicts[name] = waitVerdict(name, codes[name])
	}
	return verdicts
}

func withRepo(t *testing.T, m map[string]any, url string) map[string]any {
	t.Helper()
	c := cloneCase(t, parityCase{apps: []map[string]any{m}}, "").apps[0]
	spec := c["spec"].(map[string]any)
	if src, ok := spec["source"].(map[string]any); ok {
		src["repoURL"] = url
		return c
	}
	// Multi-source: the sources of the fixture's repository move with it.
	for _, s := range spec["sources"].([]any) {
		if src := s.(map[string]any); src["repoURL"] == parityRepoURL {
			src["repoURL"] = url
		}
	}
	return c
}

// serviceVerdict reads a plan's verdict once it has one: a pull request is
// "verified"; a refusal carries render's code when render refused.
func serviceVerdict(t *testing.T, pl store.Plan) (string, bool) {
	t.Helper()
	switch plan.Status(pl.Status) {
	case plan.StatusPROpen, plan.StatusCommitting:
		return verdictOf(true, ""), true
	case plan.StatusRefused:
		pay, err := plan.PayloadOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		if pay.Problem != nil {
			if d, ok := pay.Problem.Details.(map[string]any); ok {
				if code, ok := d["error"].(string); ok {
					return verdictOf(false, code), true
				}
			}
		}
		return verdictOf(false, pl.ErrorCode), true
	case plan.StatusFailed:
		return "failed: " + pl.StatusReason, true
	}
	return "", false
}

// serveChartRepository serves a render golden's repository/ folder as the Helm
// chart repository its Chart.lock files name, and returns its address (the locks
// name the repository at another host; see chartFetcher).
func serveChartRepository(t *testing.T, dir string) string {
	t.Helper()
	return chartrepotest.Serve(t, dir).Listener.Addr().String()
}

// chartFetcher is helmrepo's fetcher, as the command and the service use it,
// with every request sent to the chart repository at addr whatever host its URL
// names.
func chartFetcher(addr string) render.ChartSource {
	return helmrepo.New(helmrepo.WithHTTPClient(&http.Client{Transport: toChartRepository(addr), Timeout: time.Minute}))
}

// toChartRepository sends each request to the server at its address over plain
// HTTP, the path and query kept.
type toChartRepository string

func (addr toChartRepository) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = "http", string(addr)
	return http.DefaultTransport.RoundTrip(r)
}
