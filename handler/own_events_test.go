package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// trackingPipeline records which pipeline calls the tracking handlers make.
type trackingPipeline struct {
	mu    sync.Mutex
	calls []string
	plan  store.Plan
	// changed holds the file lists of BasePushed calls (nil: unknown files).
	changed [][]string
	// heads holds the heads PullClosed was given.
	heads []string
}

func (p *trackingPipeline) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
}

func (p *trackingPipeline) PlanForPull(context.Context, string, string) (store.Plan, bool, error) {
	return p.plan, true, nil
}

func (p *trackingPipeline) PullClosed(_ context.Context, _, branch, base string, _ int64, merged bool, _, head string) error {
	p.mu.Lock()
	p.heads = append(p.heads, head)
	p.mu.Unlock()
	p.record(fmt.Sprintf("PullClosed %s into %s merged=%v", branch, base, merged))
	return nil
}

func (p *trackingPipeline) PullRetargeted(_ context.Context, _, branch, from, to string, _ int64) error {
	p.record(fmt.Sprintf("PullRetargeted %s from %s to %s", branch, from, to))
	return nil
}

func (p *trackingPipeline) HeadPushed(context.Context, string, string, string, string) error {
	p.record("HeadPushed")
	return nil
}

func (p *trackingPipeline) BasePushed(_ context.Context, _, _, _ string, changed []string) error {
	p.record("BasePushed")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = append(p.changed, changed)
	return nil
}

func (p *trackingPipeline) Reverify(ctx context.Context, _ string) error {
	p.record("Reverify by " + plan.ActorOf(ctx))
	return nil
}

func (p *trackingPipeline) Cancel(context.Context, string, string, string) (store.Plan, error) {
	p.record("Cancel")
	return p.plan, nil
}

// TestTrackingHandlersIgnoreTheAppsOwnEvents sends each tracking event twice, once
// from a person and once from the App's bot: only the person's moves the plan, so
// the App never answers its own pushes and check runs.
func TestTrackingHandlersIgnoreTheAppsOwnEvents(t *testing.T) {
	const (
		bot  = "kukie[bot]"
		head = "1111111111111111111111111111111111111111"
	)
	repo := map[string]any{"full_name": "acme/deploy", "name": "deploy", "owner": map[string]any{"login": "acme"}}
	pull := map[string]any{"number": 7, "head": map[string]any{"ref": "kukie/abc123", "sha": head, "repo": repo},
		"base": map[string]any{"ref": "main", "repo": repo}}
	run := map[string]any{"id": 9, "name": github.CheckRunName, "external_id": "abc123", "head_sha": head}
	tests := map[string]struct {
		event   string
		payload map[string]any
		want    string // the pipeline call a person's event makes
		handler func(Base, Pipeline) githubapp.EventHandler
	}{
		"pull_request synchronize": {
			event: "pull_request", payload: map[string]any{"action": "synchronize", "pull_request": pull, "repository": repo},
			want: "HeadPushed",
			handler: func(b Base, p Pipeline) githubapp.EventHandler {
				return &PullRequest{Base: b, Pipeline: p}
			},
		},
		"check_run rerequested": {
			event: "check_run", payload: map[string]any{"action": "rerequested", "check_run": run, "repository": repo},
			want: "Reverify by github:octocat",
			handler: func(b Base, p Pipeline) githubapp.EventHandler {
				return &CheckRun{Base: b, Pipeline: p}
			},
		},
		"check_run requested_action": {
			event: "check_run", payload: map[string]any{"action": "requested_action", "check_run": run, "repository": repo,
				"requested_action": map[string]any{"identifier": github.RerenderAction}},
			want: "Reverify by github:octocat",
			handler: func(b Base, p Pipeline) githubapp.EventHandler {
				return &CheckRun{Base: b, Pipeline: p}
			},
		},
		"check_suite requested": {
			event: "check_suite", payload: map[string]any{"action": "requested", "repository": repo,
				"check_suite": map[string]any{"head_branch": "kukie/abc123", "head_sha": head}},
			want: "Reverify by github:octocat",
			handler: func(b Base, p Pipeline) githubapp.EventHandler {
				return &CheckSuite{Base: b, Pipeline: p}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, sender := range []string{"octocat", bot} {
				p := &trackingPipeline{plan: store.Plan{Code: "abc123", HeadSHA: head, Branch: "kukie/abc123"}}
				h := tc.handler(Base{App: github.App{ID: 1, Slug: "kukie"}}, p)
				tc.payload["sender"] = map[string]any{"login": sender}
				body, err := json.Marshal(tc.payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Handle(context.Background(), tc.event, "d-"+sender, body); err != nil {
					t.Fatal(err)
				}
				want := []string{tc.want}
				if sender == bot {
					want = nil
				}
				if fmt.Sprint(p.calls) != fmt.Sprint(want) {
					t.Errorf("sender %s: pipeline calls %v, want %v", sender, p.calls, want)
				}
			}
		})
	}
}
