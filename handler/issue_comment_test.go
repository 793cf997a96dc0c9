package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	gogithub "github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// commandPipeline records the commands the handler runs.
type commandPipeline struct {
	mu        sync.Mutex
	reverify  []string
	cancelled []string
	// reasons are the cancels' reasons; actors is who each call, either kind, was made by.
	reasons, actors []string
	// cancelErr is what Cancel returns.
	cancelErr error
}

func (p *commandPipeline) PlanForPull(context.Context, string, string) (store.Plan, bool, error) {
	return store.Plan{}, false, nil
}
func (p *commandPipeline) PullClosed(context.Context, string, string, string, int64, bool, string, string) error {
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

func (p *commandPipeline) Reverify(ctx context.Context, code string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reverify = append(p.reverify, code)
	p.actors = append(p.actors, plan.ActorOf(ctx))
	return nil
}

func (p *commandPipeline) Cancel(ctx context.Context, _, code, reason string) (store.Plan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelled = append(p.cancelled, code)
	p.reasons = append(p.reasons, reason)
	p.actors = append(p.actors, plan.ActorOf(ctx))
	return store.Plan{Code: code}, p.cancelErr
}

func (p *commandPipeline) lastActor() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.actors) == 0 {
		return ""
	}
	return p.actors[len(p.actors)-1]
}

func (p *commandPipeline) calls() (reverify, cancelled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reverify), len(p.cancelled)
}

// commandRepo is the repository of newCommandPull's pull request.
const commandRepo = "acme/deploy"

// newCommandPull serves commandRepo with the pull request of plan abc123 (team
// shop) on a fake GitHub, and returns it, the handlers' Base reaching it as the
// App, and the pull request's number.
func newCommandPull(t *testing.T, db *store.DB) (*githubtest.Server, Base, int) {
	t.Helper()
	ctx := context.Background()
	gh := githubtest.New(t)
	gh.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "manifests\n"}, "main")
	inst := gh.CreateInstallation(t, "acme", "deploy")
	gh.PushCommit(t, commandRepo, "kukie/abc123", map[string]string{"apps/web.yaml": "replicas: 4\n"}, githubtest.DefaultAuthor)
	number := gh.OpenPullRequest(t, commandRepo, "kukie/abc123", "main", "kukie: scale Deployment/web (abc123)", githubtest.DefaultAuthor)
	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreatePlan(ctx, store.Plan{Code: "abc123", TeamID: team.ID, Status: "pr_open", Change: json.RawMessage(`{}`),
		Repo: commandRepo, InstallationID: inst, Branch: "kukie/abc123", PRNumber: int64(number)}, store.PlanEvent{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return gh, Base{ClientCreator: cc, Store: db, App: github.App{ID: gh.AppID(), Slug: gh.AppSlug()}, WebHost: strings.TrimPrefix(gh.URL(), "http://")}, number
}

// TestIssueCommentCommandsNeedWriteAccess runs the handler with the real permission
// check (GitHub's collaborator permission endpoint, served by the fake).
func TestIssueCommentCommandsNeedWriteAccess(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		for login, role := range map[string]string{
			"wes": githubtest.RoleWrite, "max": githubtest.RoleMaintain, "ada": githubtest.RoleAdmin,
			"rex": githubtest.RoleRead, "tia": githubtest.RoleTriage,
		} {
			gh.SetPermission(t, commandRepo, login, role)
		}
		const repo = commandRepo
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
				if reverify+cancelled > 0 {
					if got := pipeline.lastActor(); got != "github:"+tc.login {
						t.Errorf("the command ran as %q, want github:%s", got, tc.login)
					}
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

// writeAccess answers every user may write.
type writeAccess struct{}

func (writeAccess) CanWrite(context.Context, int64, string, string) (bool, error) { return true, nil }

// TestCancelCommandRepliesOnlyWithTheUsersAnswer: "/kukie cancel" on a plan that
// can no longer be cancelled gets that reason as a reply; one the service failed
// to carry out (GitHub did not close the pull request, the store failed) posts
// nothing on the pull request, whose readers include anyone who can see the
// repository, and returns the error, so that the inbox takes the command again.
func TestCancelCommandRepliesOnlyWithTheUsersAnswer(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		const repo = commandRepo
		writer := githubtest.Author{Name: "wes", Email: "wes@example.com", Login: "wes"}

		cases := map[string]struct {
			cancelErr error
			wantReply string // "" for none, with the error returned
		}{
			"a plan no longer cancellable": {cancelErr: &plan.Error{Code: plan.CodeConflict, Reason: "plan abc123 is merged and can no longer be cancelled"},
				wantReply: "Plan `abc123` was not cancelled: plan abc123 is merged and can no longer be cancelled"},
			"GitHub failed to close the pull request": {cancelErr: fmt.Errorf("close pull request of plan abc123: %w",
				errors.New("PATCH https://ghe.internal.example/api/v3/repos/acme/deploy/pulls/1: 502 Bad Gateway"))},
			"the store failed": {cancelErr: errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				pipeline := &commandPipeline{cancelErr: tc.cancelErr}
				h := &IssueComment{Base: base, Pipeline: pipeline, Access: writeAccess{}}
				before := len(gh.IssueComments(t, repo, number))
				gh.CommentOnPullRequest(t, repo, number, writer, CommandCancel)
				deliveries := gh.DeliveriesOf("issue_comment", "created")
				err := h.Handle(ctx, "issue_comment", deliveries[len(deliveries)-1].ID, deliveries[len(deliveries)-1].Payload)
				comments := gh.IssueComments(t, repo, number)[before+1:]
				if tc.wantReply == "" {
					if !errors.Is(err, tc.cancelErr) {
						t.Errorf("Handle = %v, want the cancel's error returned for a retry", err)
					}
					if len(comments) != 0 {
						t.Errorf("the failure was posted on the pull request: %q", comments[0].GetBody())
					}
					return
				}
				if err != nil {
					t.Errorf("Handle = %v, want the answer replied, not retried", err)
				}
				if len(comments) != 1 || !strings.HasPrefix(comments[0].GetBody(), tc.wantReply+"\n\n<!-- kukie-reply-to: ") {
					t.Errorf("replies %v, want %q and the hidden marker", comments, tc.wantReply)
				}
			})
		}
	})
}

// TestReplyWhoseAnswerIsLostIsPostedOnce: GitHub makes the reply to a refused
// command but its answer is lost (a 502 from a proxy in front of it, or a timeout);
// the attempt fails, the inbox takes the delivery again, and the retry finds the
// reply by its marker rather than posting it a second time. A reply to another
// command comment, made later, is still posted.
func TestReplyWhoseAnswerIsLostIsPostedOnce(t *testing.T) {
	faults := map[string]githubtest.Fault{
		"502":     githubtest.ServerError(http.StatusBadGateway),
		"timeout": {Hang: true},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			storetest.ForEach(t, func(t *testing.T, db *store.DB) {
				gh, base, number := newCommandPull(t, db)
				h := &IssueComment{Base: base, Pipeline: &commandPipeline{}, Access: GitHubWriteAccess{Base: base}}
				reader := githubtest.Author{Name: "rex", Email: "rex@example.com", Login: "rex"}
				gh.SetPermission(t, commandRepo, reader.Login, githubtest.RoleRead)
				const create = "/repos/*/*/issues/*/comments"
				lost := fault.On(http.MethodPost, create)
				lost.Served, lost.Times = true, 1
				gh.InjectFault(lost)

				replies := func() []string {
					var out []string
					for _, c := range gh.IssueComments(t, commandRepo, number) {
						if c.GetUser().GetLogin() == gh.BotLogin() {
							out = append(out, c.GetBody())
						}
					}
					return out
				}
				// command comments as the reader and returns the delivery of the comment,
				// taken before the App's reply adds its own.
				command := func(body string) githubtest.Delivery {
					gh.CommentOnPullRequest(t, commandRepo, number, reader, body)
					deliveries := gh.DeliveriesOf("issue_comment", "created")
					return deliveries[len(deliveries)-1]
				}
				handle := func(d githubtest.Delivery) error {
					return h.Handle(context.Background(), "issue_comment", d.ID, d.Payload)
				}
				cancelled := command(CommandCancel)
				// The attempt whose answer is lost gives up once the reply is made, as a
				// client timeout would, and only then: the test, not a clock, decides.
				faulted := func(d githubtest.Delivery) error {
					if !fault.Hang {
						return handle(d)
					}
					ctx, giveUp := context.WithCancel(context.Background())
					defer giveUp()
					done := make(chan error, 1)
					go func() { done <- h.Handle(ctx, "issue_comment", d.ID, d.Payload) }()
					for {
						select {
						case err := <-done:
							return err
						default:
						}
						if len(replies()) > 0 {
							giveUp()
							return <-done
						}
						time.Sleep(time.Millisecond)
					}
				}
				if err := faulted(cancelled); err == nil {
					t.Fatal("the attempt whose answer was lost succeeded")
				}
				if hits := gh.FaultHits(http.MethodPost, create); hits != 1 {
					t.Fatalf("the fault lost %d answers, want 1", hits)
				}
				if got := replies(); len(got) != 1 {
					t.Fatalf("after the lost answer: %d replies, want the one GitHub made", len(got))
				}
				if err := handle(cancelled); err != nil {
					t.Fatalf("retry: %v", err)
				}
				if got := replies(); len(got) != 1 {
					t.Fatalf("after the retry: %d replies, want 1: %q", len(got), got)
				}
				if err := handle(command(CommandRerender)); err != nil {
					t.Fatal(err)
				}
				if got := replies(); len(got) != 2 || !strings.Contains(got[1], "`"+CommandRerender+"` needs write access") {
					t.Errorf("after a second command: %q, want its own reply too", got)
				}
			})
		})
	}
}

// TestCommandIsAWholeWord: a command runs when the comment starts with it, alone
// or followed by white space and words of the person's own; a comment whose first
// word only begins like one ("/kukie cancelled", "/kukie cancel?") is talk about
// the plan, and cancelling on it would close the pull request on a question.
func TestCommandIsAWholeWord(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		writer := githubtest.Author{Name: "wes", Email: "wes@example.com", Login: "wes"}
		cases := map[string]struct{ reverify, cancel int }{
			"/kukie cancel":                          {0, 1},
			"  /kukie cancel  ":                      {0, 1},
			"/kukie cancel\nthe value is wrong":      {0, 1},
			"/kukie cancel\tplease":                  {0, 1},
			"/kukie rerender now":                    {1, 0},
			"/kukie cancelled this by mistake?":      {0, 0},
			"/kukie cancel? not yet":                 {0, 0},
			"/kukie cancel-it-later":                 {0, 0},
			"/kukie rerendering takes a while":       {0, 0},
			"/kukie rerender's output looks odd":     {0, 0},
			"please /kukie cancel (quoted, not run)": {0, 0},
		}
		for body, want := range cases {
			t.Run(body, func(t *testing.T) {
				pipeline := &commandPipeline{}
				h := &IssueComment{Base: base, Pipeline: pipeline, Access: writeAccess{}}
				gh.CommentOnPullRequest(t, commandRepo, number, writer, body)
				deliveries := gh.DeliveriesOf("issue_comment", "created")
				if err := h.Handle(ctx, "issue_comment", deliveries[len(deliveries)-1].ID, deliveries[len(deliveries)-1].Payload); err != nil {
					t.Fatal(err)
				}
				if reverify, cancel := pipeline.calls(); reverify != want.reverify || cancel != want.cancel {
					t.Errorf("re-verifications %d, cancels %d; want %d, %d", reverify, cancel, want.reverify, want.cancel)
				}
			})
		}
	})
}

// TestCancelCommandTakesAReason: what follows "/kukie cancel" on its line is the
// cancel's reason, held to the rules of the API's reason, and the cancel is done
// as the comment's author; a reason over its bound or with a control character is
// refused in a reply naming the problem, and nothing is cancelled (failed before:
// every cancel had no reason and was done as "system").
func TestCancelCommandTakesAReason(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		writer := githubtest.Author{Name: "wes", Email: "wes@example.com", Login: "wes"}
		cases := map[string]struct {
			body       string
			wantReason string
			wantReply  string // "" when the cancel is run
		}{
			"a reason":                         {body: "/kukie cancel   scaled by hand instead  ", wantReason: "scaled by hand instead"},
			"a reason, then more lines":        {body: "/kukie cancel scaled by hand instead\r\n\r\nthanks for the quick look", wantReason: "scaled by hand instead"},
			"no reason":                        {body: "/kukie cancel"},
			"no reason on the command's line":  {body: "/kukie cancel\nsee the thread above"},
			"a reason over its bound":          {body: "/kukie cancel " + strings.Repeat("é", plan.MaxReasonChars+1), wantReply: "Plan `abc123` was not cancelled: the reason after `/kukie cancel` is 2001 characters long, at most 2000 are taken"},
			"a reason with a control":          {body: "/kukie cancel scaled\x1b[2Jby hand", wantReply: "Plan `abc123` was not cancelled: the reason after `/kukie cancel` holds the control character U+001B at character 7; remove it"},
			"a reason that reorders its words": {body: "/kukie cancel scaled \u202eby hand", wantReply: "Plan `abc123` was not cancelled: the reason after `/kukie cancel` holds U+202E at character 8"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				pipeline := &commandPipeline{}
				h := &IssueComment{Base: base, Pipeline: pipeline, Access: writeAccess{}}
				before := len(gh.IssueComments(t, commandRepo, number))
				gh.CommentOnPullRequest(t, commandRepo, number, writer, tc.body)
				deliveries := gh.DeliveriesOf("issue_comment", "created")
				if err := h.Handle(ctx, "issue_comment", deliveries[len(deliveries)-1].ID, deliveries[len(deliveries)-1].Payload); err != nil {
					t.Fatal(err)
				}
				replies := gh.IssueComments(t, commandRepo, number)[before+1:]
				if tc.wantReply != "" {
					if _, cancelled := pipeline.calls(); cancelled != 0 {
						t.Errorf("%d cancels of a refused reason, want none", cancelled)
					}
					if len(replies) != 1 || replies[0].GetUser().GetLogin() != gh.BotLogin() || !strings.HasPrefix(replies[0].GetBody(), tc.wantReply) {
						t.Errorf("replies %q, want one of the App saying %q", bodies(replies), tc.wantReply)
					}
					return
				}
				if len(replies) != 0 {
					t.Errorf("replies %q to a cancel that ran, want none", bodies(replies))
				}
				pipeline.mu.Lock()
				defer pipeline.mu.Unlock()
				if len(pipeline.cancelled) != 1 || pipeline.reasons[0] != tc.wantReason || pipeline.actors[0] != "github:wes" {
					t.Errorf("cancels %q with reasons %q by %q; want abc123 with %q by github:wes", pipeline.cancelled, pipeline.reasons, pipeline.actors, tc.wantReason)
				}
			})
		}
	})
}

// bodies are the texts of comments.
func bodies(comments []*gogithub.IssueComment) []string {
	out := make([]string, 0, len(comments))
	for _, c := range comments {
		out = append(out, c.GetBody())
	}
	return out
}

// TestReplyIsPostedWhenSomeoneElsePlantsItsMarker: the marker the App's reply
// carries is plain text anyone can write; a comment of someone else carrying the
// marker of a command comment, made before the App answers it (by the person who
// commented the command or by another), is not the App's reply, and the reply is
// still posted. Only the App's own comments are read as a reply made.
func TestReplyIsPostedWhenSomeoneElsePlantsItsMarker(t *testing.T) {
	reader := githubtest.Author{Name: "rex", Email: "rex@example.com", Login: "rex"}
	for name, planter := range map[string]githubtest.Author{
		"the commenter": reader,
		"another":       {Name: "mallory", Email: "mallory@example.com", Login: "mallory"},
	} {
		t.Run(name, func(t *testing.T) {
			storetest.ForEach(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				gh, base, number := newCommandPull(t, db)
				gh.SetPermission(t, commandRepo, reader.Login, githubtest.RoleRead)
				h := &IssueComment{Base: base, Pipeline: &commandPipeline{}, Access: GitHubWriteAccess{Base: base}}

				commandID := gh.CommentOnPullRequest(t, commandRepo, number, reader, CommandCancel)
				deliveries := gh.DeliveriesOf("issue_comment", "created")
				command := deliveries[len(deliveries)-1]
				gh.CommentOnPullRequest(t, commandRepo, number, planter, "not yet answered\n\n"+github.ReplyMarker(commandID))

				if err := h.Handle(ctx, "issue_comment", command.ID, command.Payload); err != nil {
					t.Fatal(err)
				}
				var replies []string
				for _, c := range gh.IssueComments(t, commandRepo, number) {
					if c.GetUser().GetLogin() == gh.BotLogin() {
						replies = append(replies, c.GetBody())
					}
				}
				if len(replies) != 1 || !strings.Contains(replies[0], "`"+CommandCancel+"` needs write access") || !strings.HasSuffix(replies[0], github.ReplyMarker(commandID)) {
					t.Errorf("the App's replies %q, want its refusal with the marker of comment %d", replies, commandID)
				}
			})
		})
	}
}

// Without the App's slug its own replies cannot be told from markers others plant:
// the reply is refused for good rather than posted or taken as made, with the
// command's marker already planted by someone else.
func TestReplyWithoutTheAppsLoginIsRefused(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		reader := githubtest.Author{Name: "rex", Email: "rex@example.com", Login: "rex"}
		planter := githubtest.Author{Name: "mallory", Email: "mallory@example.com", Login: "mallory"}
		gh.SetPermission(t, commandRepo, reader.Login, githubtest.RoleRead)
		base.App.Slug = ""
		h := &IssueComment{Base: base, Pipeline: &commandPipeline{}, Access: GitHubWriteAccess{Base: base}}
		commandID := gh.CommentOnPullRequest(t, commandRepo, number, reader, CommandCancel)
		deliveries := gh.DeliveriesOf("issue_comment", "created")
		command := deliveries[len(deliveries)-1]
		gh.CommentOnPullRequest(t, commandRepo, number, planter, "already answered\n\n"+github.ReplyMarker(commandID))
		gh.ResetRequestCounts()
		if err := h.Handle(ctx, "issue_comment", command.ID, command.Payload); !IsPermanent(err) {
			t.Errorf("Handle = %v, want a permanent error", err)
		}
		if n := gh.RequestCount("POST /repos/{owner}/{repo}/issues/{number}/comments"); n != 0 {
			t.Errorf("%d comments posted without the App's login", n)
		}
		// The same command with the App's login is answered: the refusal above is the
		// missing login's, not the command's.
		base.App.Slug = gh.AppSlug()
		h = &IssueComment{Base: base, Pipeline: &commandPipeline{}, Access: GitHubWriteAccess{Base: base}}
		if err := h.Handle(ctx, "issue_comment", command.ID, command.Payload); err != nil {
			t.Fatal(err)
		}
		if n := gh.RequestCount("POST /repos/{owner}/{repo}/issues/{number}/comments"); n != 1 {
			t.Errorf("%d comments posted with the App's login, want its one reply", n)
		}
	})
}

// TestReplyToACommentWithoutAnIDIsRefused: a payload whose comment has no ID would
// give every reply the marker of comment 0, and the first reply would be taken as
// made for every later comment without one: the reply is refused for good and
// nothing is posted.
func TestReplyToACommentWithoutAnIDIsRefused(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh, base, number := newCommandPull(t, db)
		reader := githubtest.Author{Name: "rex", Email: "rex@example.com", Login: "rex"}
		gh.SetPermission(t, commandRepo, reader.Login, githubtest.RoleRead)
		h := &IssueComment{Base: base, Pipeline: &commandPipeline{}, Access: GitHubWriteAccess{Base: base}}
		for _, body := range []string{CommandCancel, CommandRerender} {
			gh.CommentOnPullRequest(t, commandRepo, number, reader, body)
			deliveries := gh.DeliveriesOf("issue_comment", "created")
			command := deliveries[len(deliveries)-1]
			var event map[string]any
			if err := json.Unmarshal(command.Payload, &event); err != nil {
				t.Fatal(err)
			}
			delete(event["comment"].(map[string]any), "id")
			payload, err := json.Marshal(event)
			if err != nil {
				t.Fatal(err)
			}
			gh.ResetRequestCounts()
			if err := h.Handle(ctx, "issue_comment", command.ID, payload); !IsPermanent(err) {
				t.Errorf("%s: Handle = %v, want a permanent error", body, err)
			}
			if n := gh.RequestCount("POST /repos/{owner}/{repo}/issues/{number}/comments"); n != 0 {
				t.Errorf("%s: %d comments posted for a comment without an ID", body, n)
			}
		}
	})
}
