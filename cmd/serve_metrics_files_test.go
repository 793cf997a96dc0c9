package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
)

const (
	dashboardFile = "../deploy/grafana/kukie-gitops.json"
	rulesFile     = "../deploy/prometheus/kukie-gitops-rules.yml"
)

// kukieName finds metric names in PromQL; a histogram's series (_bucket, _sum,
// _count) are matched against the family by exportedNames.
var kukieName = regexp.MustCompile(`\bkukie_[a-z0-9_]+`)

// exportedNames are the families /metrics answered with, and every series name a
// query may use for them.
func exportedNames(t *testing.T, exposition string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
			if f[3] == "histogram" {
				names[f[2]+"_bucket"] = true
			}
		}
	}
	return names
}

// TestMonitoringFilesUseOnlyExportedMetrics checks the Grafana dashboard and the
// alerting rules against what the service exports: /metrics of a service started
// with a GitHub App (so the GitHub client and the pipeline register theirs), plus the
// refusal, webhook outcome, render, cluster read and rate-limit metrics, whose series
// exist only once a plan was refused, a delivery attempted, an Application
// rendered, a cluster read or a rate limit reported.
func TestMonitoringFilesUseOnlyExportedMetrics(t *testing.T) {
	queries, alerts := dashboardQueries(t), alertRules(t)
	t.Chdir(t.TempDir())
	gh := githubtest.New(t)
	t.Setenv("KUKIE_GITHUB_APP_ID", strconv.FormatInt(gh.AppID(), 10))
	t.Setenv("KUKIE_GITHUB_PRIVATE_KEY", gh.PrivateKeyPEM().Reveal())
	t.Setenv("KUKIE_GITHUB_API_URL", gh.APIURL())
	t.Setenv("KUKIE_GITHUB_WEB_URL", gh.URL())
	addr, logs, stop := serveInProcess(t)
	// The request metrics have a series once a request was answered.
	if status, _ := get(t, "http://"+addr+"/healthz", ""); status != 200 {
		t.Fatalf("GET /healthz = %d", status)
	}
	status, body := get(t, "http://"+addr+"/metrics", "")
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, logs)
	}
	if status != 200 {
		t.Fatalf("GET /metrics = %d %s", status, body)
	}
	exported := exportedNames(t, body)
	for _, name := range []string{"kukie_github_requests_total", "kukie_plan_transitions_total", "kukie_plan_step_duration_seconds", "kukie_plans", "kukie_cache_lookups_total"} {
		if !exported[name] {
			t.Fatalf("the service does not export %s:\n%s", name, body)
		}
	}

	// A refusal, a webhook outcome, a render and a cluster read, as the pipeline, the
	// inbox, the render engine and the cluster registry report them, on the
	// constructors the service uses.
	reg := prometheus.NewRegistry()
	m, err := metrics.NewPipeline(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Refused(plan.CodeNotGitOpsManaged)
	inbox, err := metrics.NewInbox(reg)
	if err != nil {
		t.Fatal(err)
	}
	inbox.Outcome("push", handler.OutcomeProcessed)
	renders, err := metrics.NewRender(reg)
	if err != nil {
		t.Fatal(err)
	}
	renders.Rendered(render.SourceKustomize, time.Second, 3, nil)
	clusters, err := metrics.NewCluster(reg)
	if err != nil {
		t.Fatal(err)
	}
	clusters.Read("resource", "ok")
	// The rate-limit gauge of an installation appears with GitHub's first report,
	// which the fake sends on a rate-limited answer.
	cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, reg)
	if err != nil {
		t.Fatal(err)
	}
	gh.CreateRepo(t, "acme", "deploy", map[string]string{"a": "1\n"}, "main")
	inst := gh.CreateInstallation(t, "acme", "deploy")
	gh.InjectFault(githubtest.PrimaryRateLimit(time.Now().Add(time.Hour)).On("GET", "/repos/acme/deploy"))
	client, err := cc.NewInstallationClient(inst)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Repositories.Get(context.Background(), "acme", "deploy"); err == nil {
		t.Fatal("the rate-limited read succeeded")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var refusals strings.Builder
	for _, f := range fams {
		refusals.WriteString("# TYPE " + f.GetName() + " " + strings.ToLower(f.GetType().String()) + "\n")
	}
	for name := range exportedNames(t, refusals.String()) {
		exported[name] = true
	}

	used := map[string][]string{}
	for _, q := range queries {
		for _, n := range kukieName.FindAllString(q, -1) {
			used[n] = append(used[n], dashboardFile)
		}
	}
	for name, expr := range alerts {
		for _, n := range kukieName.FindAllString(expr, -1) {
			used[n] = append(used[n], rulesFile+" "+name)
		}
	}
	if len(used) < 8 {
		t.Fatalf("the dashboard and rules use only %d kukie_ metrics: %v", len(used), used)
	}
	for name, where := range used {
		if !exported[name] {
			t.Errorf("%s uses %s, which the service does not export", strings.Join(slices.Compact(where), ", "), name)
		}
	}
	for _, want := range []string{"KukieWebhookInboxBacklogGrowing", "KukieWebhookDeliveriesFailing", "KukieGitHubRateLimitNearZero", "KukieDeployTimeouts", "KukieDeploysFailing"} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("%s has no alert %s", rulesFile, want)
		}
	}
}

// dashboardQueries decodes the dashboard (failing on invalid JSON) and returns every
// query of its panels and template variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s has no uid or no panels", dashboardFile)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

// alertRules decodes the rule file strictly and returns each alert's expression.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v lacks a name, an expression, a summary or a severity", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			out[r.Alert] = r.Expr
		}
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("alerts: %v", names)
	return out
}
