package service

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

func TestPipelineSettingsComeFromConfig(t *testing.T) {
	vars := map[string]string{
		"KUKIE_PIPELINE_DEPLOY_TIMEOUT":       "42m",
		"KUKIE_PIPELINE_DEPLOY_POLL_INTERVAL": "3s",
		"KUKIE_PIPELINE_CLAIM_TTL":            "90s",
		"KUKIE_PIPELINE_CACHE_DIR":            "/srv/cache",
		"KUKIE_PIPELINE_PULL_SWEEP_INTERVAL":  "7m",
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(config.Dev); err != nil {
		t.Fatal(err)
	}
	got := pipelineConfig(cfg, "kukie[bot]", "worker-1")
	if got.DeployTimeout != 42*time.Minute || got.DeployPoll != 3*time.Second || got.ClaimTTL != 90*time.Second ||
		got.BotLogin != "kukie[bot]" || got.WorkerID != "worker-1" || got.PullSweepInterval != 7*time.Minute {
		t.Errorf("pipeline config = %+v", got)
	}
	if dir := archiveCacheDir(cfg.Pipeline); dir != "/srv/cache" {
		t.Errorf("archive cache dir = %q, want /srv/cache", dir)
	}
	if dir := archiveCacheDir(config.Pipeline{}); filepath.Base(dir) != "kukie-gitops" {
		t.Errorf("default archive cache dir = %q, want a kukie-gitops directory", dir)
	}
}

func TestPipelineConfigDefaultsMatchThePlanPackage(t *testing.T) {
	if got := config.Default().GitHub.RequestTimeout; got != github.DefaultTimeout {
		t.Errorf("config's GitHub request timeout %s differs from the github package's %s", got, github.DefaultTimeout)
	}
	if got := config.Default().Webhooks.Retention; got != handler.DefaultRetention {
		t.Errorf("config's webhook retention %s differs from the handler package's %s", got, handler.DefaultRetention)
	}
	if got := config.Default().Notifications.Retention; got != notify.DefaultRetention {
		t.Errorf("config's notification retention %s differs from the notify package's %s", got, notify.DefaultRetention)
	}
	if got := config.Default().Render.HelmWorkerMemory; got != helmexec.DefaultMemoryBytes {
		t.Errorf("config's Helm worker memory %d differs from the helmexec package's %d", got, helmexec.DefaultMemoryBytes)
	}
	if got := config.Default().Render.KustomizeWorkerMemory; got != render.DefaultKustomizeWorkerMemory {
		t.Errorf("config's kustomize worker memory %d differs from the render package's %d", got, render.DefaultKustomizeWorkerMemory)
	}
	if got := config.Default().Clusters.MaxResponseBytes; got != kube.DefaultMaxResponseBytes {
		t.Errorf("config's cluster response bound %d differs from the kube package's %d", got, kube.DefaultMaxResponseBytes)
	}
	if got := config.Default().Render.Timeout; got != render.Timeout {
		t.Errorf("config's render timeout %s differs from the render package's %s", got, render.Timeout)
	}
	if config.MinKustomizeWorkerMemory != helmexec.MinMemoryBytes {
		t.Errorf("config's least kustomize worker memory %d differs from the helmexec package's %d", config.MinKustomizeWorkerMemory, helmexec.MinMemoryBytes)
	}
	if config.MinHelmWorkerMemory != helmexec.MinMemoryBytes {
		t.Errorf("config's least Helm worker memory %d differs from the helmexec package's %d", config.MinHelmWorkerMemory, helmexec.MinMemoryBytes)
	}
	d := config.Default().Pipeline
	if d.DeployTimeout != plan.DefaultDeployTimeout || d.DeployPollInterval != plan.DefaultDeployPoll || d.ClaimTTL != plan.DefaultClaimTTL {
		t.Fatalf("config defaults %+v differ from plan's (%v, %v, %v)", d, plan.DefaultDeployTimeout, plan.DefaultDeployPoll, plan.DefaultClaimTTL)
	}
	if d.PullSweepInterval != plan.DefaultPullSweepInterval {
		t.Errorf("config's pull request sweep interval %s differs from the plan package's %s", d.PullSweepInterval, plan.DefaultPullSweepInterval)
	}
}

// The operator's bound on what a cluster's API server answers reaches the options
// every cluster's client set is built with.
func TestClusterResponseBoundReachesClusterAccess(t *testing.T) {
	cfg, err := config.Load("", func(k string) (string, bool) {
		if k == "KUKIE_CLUSTERS_MAX_RESPONSE_BYTES" {
			return "8388608", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterOptions(cfg, nil, 0).MaxResponseBytes; got != 8<<20 {
		t.Errorf("kube.Options.MaxResponseBytes = %d, want %d", got, 8<<20)
	}
}
