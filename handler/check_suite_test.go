package handler

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
)

// countingChecks counts the checks asked of it, and fails past max so a walk
// that does not stop there ends at once.
type countingChecks struct {
	PullChecker
	max, n int
}

func (c *countingChecks) Check(context.Context, prcheck.Head) error {
	c.n++
	if c.n > c.max {
		return errors.New("checked past the bound")
	}
	return nil
}

// TestCheckSuiteChecksAtMostMaxSuitePulls: a re-requested suite whose payload
// lists 100000 pull requests is checked for MaxSuitePulls of them, with one GitHub
// call each, and the rest are left out.
func TestCheckSuiteChecksAtMostMaxSuitePulls(t *testing.T) {
	e := newCheckEnv(t)
	head := e.gh.PushCommit(t, checkRepo, "change", map[string]string{"docs/README.md": "more\n"}, githubtest.DefaultAuthor)
	n := e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
	e.gh.RerequestCheckSuite(t, checkRepo, head)
	ds := e.gh.DeliveriesOf("check_suite", "rerequested")
	if len(ds) == 0 {
		t.Fatal("no check_suite rerequested delivery")
	}
	var payload map[string]any
	if err := json.Unmarshal(ds[len(ds)-1].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	pulls := make([]map[string]any, 100000)
	for i := range pulls {
		pulls[i] = map[string]any{"number": n}
	}
	payload["check_suite"].(map[string]any)["pull_requests"] = pulls
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	checks := &countingChecks{max: MaxSuitePulls}
	e.gh.ResetRequestCounts()
	if err := (&CheckSuite{Base: e.base, Pipeline: &trackingPipeline{}, Checks: checks}).Handle(context.Background(), "check_suite", "d-1", body); err != nil {
		t.Fatal(err)
	}
	if checks.n != MaxSuitePulls {
		t.Errorf("%d pull requests checked, want %d", checks.n, MaxSuitePulls)
	}
	if got := e.gh.RequestCount("GET /repos/{owner}/{repo}/pulls/{number}"); got != MaxSuitePulls {
		t.Errorf("%d pull requests read from GitHub, want %d", got, MaxSuitePulls)
	}
}
