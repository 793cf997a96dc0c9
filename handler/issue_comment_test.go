package handler

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// commandPipeline records the commands the handler runs.
type commandPipeline struct {
	mu        sync.Mutex
	reverify  []string
	cancelled []string
}

func (p *commandPipeline) PlanForPull(context.Context, string, string) (store.Plan, bool, error) {
	return store.Plan{}, false, nil
}
func (p *commandPipeline) PullClosed(context.Context, string, string, string, int64, bool, string) error {
	return nil
}
func (p *commandPipeline) PullRetargeted(context.Context, string, string, string, string, int64) error {
	return nil
}
func (p *commandPipeline) HeadPushed(context.Context, string, string, string, string) error {
	return nil
}
func (p *commandPipeline) BasePushed(context.Context, string, string, string, []string) error {
	return nil
}

func (p *commandPipeline) Reverify(_ context.Context, code string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reverify = append(p.reverify, code)
	return nil
}

func (p *commandPipeline) Cancel(_ context.Context, _, code string) (store.Plan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelled = append(p.cancelled, code)
	return store.Plan{Code: code}, nil
}

func (p *commandPipeline) calls() (reverify, cancelled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reverify), len(p.cancelled)
}

// TestIssueCommentCommandsNeedWriteAccess runs the handler with the real permission
// check (GitHub's collaborator permission endpoint, served by the fake).
func TestIssueCommentCommandsNeedWriteAccess(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh := githubtest.New(t)
		const repo = "acme/deploy"
		gh.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "manifests\n"}, "main")
		inst := gh.CreateInstallation(t, "acme", "deploy")
		gh.PushCommit(t, repo, "kukie/abc123", map[string]string{"apps/web.yaml": "replicas: 4\n"}, githubtest.DefaultAuthor)
		number := gh.OpenPullRequest(t, repo, "kukie/abc123", "main", "kukie: scale Deployment/web (abc123)", githubtest.DefaultAuthor)
		for login, role := range map[string]string{
			"wes": githubtest.RoleWrite, "max": githubtest.RoleMaintain, "ada": githubtest.RoleAdmin,
			"rex": githubtest.RoleRead, "tia": githubtest.RoleTriage,
		} {
			gh.SetPermission(t, repo, login, role)
		}

		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreatePlan(ctx, store.Plan{Code: "abc123", TeamID: team.ID, Status: "pr_open", Change: json.RawMessage(`{}`),
			Repo: repo, InstallationID: inst, Branch: "kukie/abc123", PRNumber: int64(number)}, store.PlanEvent{Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		base := Base{ClientCreator: cc, Store: db, App: github.App{ID: gh.AppID(), Slug: gh.AppSlug()}, WebHost: strings.TrimPrefix(gh.URL(), "http://")}
		pipeline := &commandPipeline{}
		h := &IssueComment{Base: base, Pipeline: pipeline, Access: GitHubWriteAccess{Base: base}}

		cases := []struct {
			name, login, command string
			wantReverify         int
			wantCancel           int
		}{
			{"reader's cancel is refused", "rex", CommandCancel, 0, 0},
			{"triager's rerender is refused", "tia", CommandRerender, 0, 0},
			{"stranger's cancel is refused", "mallory", CommandCancel, 0, 0},
			{"writer's rerender runs", "wes", CommandRerender, 1, 0},
			{"maintainer's rerender runs", "max", CommandRerender, 2, 0},
			{"admin's cancel runs", "ada", CommandCancel, 2, 1},
			{"writer's cancel runs", "wes", CommandCancel, 2, 2},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := len(gh.IssueComments(t, repo, number))
				gh.CommentOnPullRequest(t, repo, number, githubtest.Author{Name: tc.login, Email: tc.login + "@example.com", Login: tc.login}, tc.command)
				deliveries := gh.DeliveriesOf("issue_comment", "created")
				if err := h.Handle(ctx, "issue_comment", deliveries[len(deliveries)-1].ID, deliveries[len(deliveries)-1].Payload); err != nil {
					t.Fatal(err)
				}
				reverify, cancelled := pipeline.calls()
				if reverify != tc.wantReverify || cancelled != tc.wantCancel {
					t.Errorf("re-verifications %d, cancels %d; want %d, %d", reverify, cancelled, tc.wantReverify, tc.wantCancel)
				}
				comments := gh.IssueComments(t, repo, number)
				refused := tc.wantReverify+tc.wantCancel == 0
				switch {
				case refused && len(comments) != before+2:
					t.Fatalf("%d new comments, want the command and a reply", len(comments)-before)
				case refused:
					reply := comments[len(comments)-1]
					if reply.GetUser().GetLogin() != gh.BotLogin() || !strings.Contains(reply.GetBody(), "@"+tc.login) || !strings.Contains(reply.GetBody(), "needs write access") {
						t.Errorf("reply by %s: %q", reply.GetUser().GetLogin(), reply.GetBody())
					}
				case len(comments) != before+1:
					t.Errorf("%d new comments after an allowed command, want only the command", len(comments)-before)
				}
			})
		}
	})
}
