package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// pipelineHandlers are the handlers of every event the App subscribes to, on one
// pipeline.
func pipelineHandlers(b Base, p Pipeline) []githubapp.EventHandler {
	return []githubapp.EventHandler{
		&Installation{Base: b}, &InstallationRepositories{Base: b},
		&CheckRun{Base: b, Pipeline: p}, &CheckSuite{Base: b, Pipeline: p}, &PullRequest{Base: b, Pipeline: p},
		&Push{Base: b, Pipeline: p}, &IssueComment{Base: b, Pipeline: p},
	}
}

// deliver stores payload as a verified delivery and lets an inbox with the pipeline
// handlers process it.
func deliver(t *testing.T, db *store.DB, p Pipeline, id, event string, payload []byte) store.WebhookDelivery {
	t.Helper()
	in, err := NewInbox(db, InboxOptions{}, pipelineHandlers(newBase(db), p)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InsertWebhookDelivery(context.Background(), store.WebhookDelivery{DeliveryID: id, Event: event, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	return delivery(t, db, id)
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFieldsNoHandlerReadsDoNotDropADelivery plays check_run and check_suite
// payloads whose App times are written "2019-03-11 07:15:42", as some of GitHub's
// deliveries carry them: a decoder of the whole event rejects them, yet no handler
// reads them, so the re-render still runs.
func TestFieldsNoHandlerReadsDoNotDropADelivery(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		for event, file := range map[string]string{
			"check_run":   "check_run_rerequested_app_time_without_zone.json",
			"check_suite": "check_suite_requested_app_time_without_zone.json",
		} {
			t.Run(event, func(t *testing.T) {
				p := &trackingPipeline{plan: store.Plan{Code: "KK-7F3A", Branch: "kukie/kk-7f3a", HeadSHA: "c0d0b1a6f4f2a1e8e3b9a3b0b6d1f4e5a2c7d8e9"}}
				d := deliver(t, db, p, "odd-time-"+event, event, testdata(t, file))
				if d.State != store.DeliveryDone || d.LastError != "" || d.SkipReason != "" {
					t.Fatalf("delivery %s after one attempt: %s %q %q, want done", d.DeliveryID, d.State, d.LastError, d.SkipReason)
				}
				if len(p.calls) != 1 || p.calls[0] != "Reverify by github:octocat" {
					t.Fatalf("pipeline calls %v, want one Reverify by the sender", p.calls)
				}
			})
		}
	})
}

// TestPushOfCommitsWithoutFileListsChangesUnknownFiles: GitHub leaves the file lists
// of very large commits empty, so such a push says nothing about which files moved
// under the open plans; the pipeline must hear "unknown" (nil, every plan on the
// base is verified again), not "no files".
func TestPushOfCommitsWithoutFileListsChangesUnknownFiles(t *testing.T) {
	cases := map[string]struct {
		payload []byte
		want    []string // nil: unknown
	}{
		"commits with empty file lists": {payload: testdata(t, "push_large_commits.json")},
		"commits with file lists":       {payload: githubtest.Fixture(t, "push", "merge_to_main"), want: []string{"apps/web/deployment.yaml"}},
		"no commits": {payload: payload(t, map[string]any{"ref": "refs/heads/main", "after": "2222222222222222222222222222222222222222",
			"commits": []any{}, "repository": map[string]any{"full_name": "acme/deploy"}})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &trackingPipeline{}
			h := &Push{Base: Base{App: github.App{ID: 1, Slug: "kukie"}}, Pipeline: p}
			if err := h.Handle(context.Background(), "push", "d-"+name, tc.payload); err != nil {
				t.Fatal(err)
			}
			if len(p.changed) != 1 {
				t.Fatalf("BasePushed called %d times, want once", len(p.changed))
			}
			got := p.changed[0]
			if (got == nil) != (tc.want == nil) || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("changed files %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestSignedPayloadsWithoutTheirObjectAreSkipped sends each handler a payload that
// lacks the object it acts on (signed by GitHub, so stored, yet not actionable): the
// inbox finishes the delivery as done with the reason, after one attempt, and
// nothing is acted on. Before, a missing installation or issue panicked the handler.
func TestSignedPayloadsWithoutTheirObjectAreSkipped(t *testing.T) {
	repo := map[string]any{"full_name": "acme/deploy"}
	sender := map[string]any{"login": "octocat"}
	cases := map[string]struct {
		event   string
		payload map[string]any
		object  string
	}{
		"installation": {event: "installation", object: "installation",
			payload: map[string]any{"action": "created", "sender": sender, "repositories": []any{repo}}},
		"installation_repositories": {event: "installation_repositories", object: "installation",
			payload: map[string]any{"action": "removed", "sender": sender, "repositories_removed": []any{repo}}},
		"issue_comment": {event: "issue_comment", object: "issue",
			payload: map[string]any{"action": "created", "sender": sender, "repository": repo,
				"comment": map[string]any{"body": CommandCancel, "user": sender}}},
		"check_run": {event: "check_run", object: "check_run",
			payload: map[string]any{"action": "rerequested", "sender": sender, "repository": repo}},
		"check_suite": {event: "check_suite", object: "check_suite",
			payload: map[string]any{"action": "requested", "sender": sender, "repository": repo}},
		"pull_request": {event: "pull_request", object: "pull_request",
			payload: map[string]any{"action": "closed", "sender": sender, "repository": repo}},
		"push": {event: "push", object: "repository",
			payload: map[string]any{"ref": "refs/heads/main", "after": "2222222222222222222222222222222222222222", "sender": sender,
				"commits": []any{map[string]any{"modified": []string{"apps/web/deployment.yaml"}}}}},
	}
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				p := &trackingPipeline{plan: store.Plan{Code: "abc123", Branch: "kukie/abc123"}}
				d := deliver(t, db, p, "no-object-"+name, tc.event, payload(t, tc.payload))
				want := tc.event + " event payload has no " + tc.object + " object"
				if d.State != store.DeliveryDone || d.Attempts != 1 || d.SkipReason != want || d.LastError != "" {
					t.Fatalf("delivery = %s after %d attempts, skipped %q, error %q; want done, skipped %q",
						d.State, d.Attempts, d.SkipReason, d.LastError, want)
				}
				if len(p.calls) != 0 {
					t.Fatalf("pipeline calls %v for a payload without its %s", p.calls, tc.object)
				}
			})
		}
	})
}

// trackingChecks records the calls a handler makes of its PullChecker.
type trackingChecks struct{ trackingPipeline }

func (c *trackingChecks) Check(_ context.Context, h prcheck.Head) error {
	c.record("Check " + h.Key)
	return nil
}

func (c *trackingChecks) Cancel(_ context.Context, repo, key string) error {
	c.record("Cancel check " + repo + " " + key)
	return nil
}

func (c *trackingChecks) BaseMoved(_ context.Context, m prcheck.BaseMove) error {
	c.record("BaseMoved " + m.Repo)
	return nil
}

// TestPayloadsWithoutAValueTheirHandlerActsOnFailAtOnce sends each handler a
// payload that lacks, or misnames, a value it would act on: the delivery fails
// after one attempt with an error naming the field, and nothing is acted on.
// Before, a command comment without an issue number cancelled the newest plan of
// the repository, a push without a repository name reached the plans of every
// repository, the zero SHA or a pull request 0 reached the pipeline, and a created
// installation without an ID was retried as if the store had failed.
func TestPayloadsWithoutAValueTheirHandlerActsOnFailAtOnce(t *testing.T) {
	const head = "1111111111111111111111111111111111111111"
	repo := map[string]any{"full_name": "acme/deploy"}
	inst := map[string]any{"id": 51234567}
	sender := map[string]any{"id": 583231, "login": "octocat"}
	planHead := func(sha any) map[string]any { return map[string]any{"ref": "kukie/abc123", "sha": sha, "repo": repo} }
	cases := map[string]struct {
		event   string
		payload map[string]any
		want    string
	}{
		"a command on no pull request number": {event: "issue_comment", want: "invalid issue_comment event payload: issue.number 0 is not positive",
			payload: map[string]any{"action": "created", "issue": map[string]any{"pull_request": map[string]any{}}, "repository": repo, "sender": sender,
				"comment": map[string]any{"id": 5, "body": CommandCancel, "user": sender}}},
		"a command in no repository": {event: "issue_comment", want: `invalid issue_comment event payload: repository.full_name "" is not a repository's owner/name`,
			payload: map[string]any{"action": "created", "issue": map[string]any{"number": 7, "pull_request": map[string]any{}}, "repository": map[string]any{}, "sender": sender,
				"comment": map[string]any{"id": 5, "body": CommandRerender, "user": sender}}},
		"a push to no repository": {event: "push", want: `invalid push event payload: repository.full_name "" is not a repository's owner/name`,
			payload: map[string]any{"ref": "refs/heads/main", "after": head, "repository": map[string]any{}, "installation": inst, "sender": sender}},
		"a push to the zero SHA": {event: "push", want: "invalid push event payload: after is the zero SHA, which names no commit, yet deleted is false",
			payload: map[string]any{"ref": "refs/heads/main", "after": strings.Repeat("0", 40), "repository": repo, "installation": inst, "sender": sender}},
		"a push from a before that is no SHA": {event: "push", want: `invalid push event payload: before "../../user" is not a commit SHA (40 hexadecimal digits)`,
			payload: map[string]any{"ref": "refs/heads/main", "before": "../../user", "after": head, "repository": repo, "installation": inst, "sender": sender}},
		"a merge of pull request 0": {event: "pull_request", want: "invalid pull_request event payload: pull_request.number 0 is not positive",
			payload: map[string]any{"action": "closed", "repository": repo, "installation": inst, "sender": sender,
				"pull_request": map[string]any{"merged": true, "merge_commit_sha": head, "head": planHead(head), "base": map[string]any{"ref": "main", "repo": repo}}}},
		"a merge without its merge commit": {event: "pull_request", want: `invalid pull_request event payload: pull_request.merge_commit_sha "" is not a commit SHA (40 hexadecimal digits)`,
			payload: map[string]any{"action": "closed", "repository": repo, "installation": inst, "sender": sender,
				"pull_request": map[string]any{"number": 7, "merged": true, "head": planHead(head), "base": map[string]any{"ref": "main", "repo": repo}}}},
		"a push to a plan's branch of no SHA": {event: "pull_request", want: `invalid pull_request event payload: pull_request.head.sha "HEAD" is not a commit SHA (40 hexadecimal digits)`,
			payload: map[string]any{"action": "synchronize", "repository": repo, "installation": inst, "sender": sender,
				"pull_request": map[string]any{"number": 7, "head": planHead("HEAD"), "base": map[string]any{"ref": "main", "repo": repo}}}},
		"a pull request to check without its installation": {event: "pull_request", want: "invalid pull_request event payload: installation.id 0 is not positive",
			payload: map[string]any{"action": "opened", "repository": repo, "sender": sender,
				"pull_request": map[string]any{"number": 8, "head": map[string]any{"ref": "feature", "sha": head, "repo": repo},
					"base": map[string]any{"ref": "main", "sha": strings.Repeat("3", 40), "repo": repo}}}},
		"a suite of a plan's branch in no repository": {event: "check_suite", want: `invalid check_suite event payload: repository.full_name "" is not a repository's owner/name`,
			payload: map[string]any{"action": "requested", "sender": sender, "installation": inst,
				"check_suite": map[string]any{"head_branch": "kukie/abc123", "head_sha": head}}},
		"a re-run of pull request 0": {event: "check_run", want: `invalid check_run event payload: check_run.external_id "pull/0" names no pull request`,
			payload: map[string]any{"action": "rerequested", "repository": repo, "installation": inst, "sender": sender,
				"check_run": map[string]any{"name": github.CheckRunName, "external_id": "pull/0", "head_sha": head}}},
		"an installation created without its ID": {event: "installation", want: "invalid installation event payload: installation.id 0 is not positive",
			payload: map[string]any{"action": "created", "installation": map[string]any{"account": map[string]any{"login": "acme"}}, "sender": sender}},
		"repositories removed from installation -1": {event: "installation_repositories", want: "invalid installation_repositories event payload: installation.id -1 is not positive",
			payload: map[string]any{"action": "removed", "installation": map[string]any{"id": -1}, "repositories_removed": []any{repo}, "sender": sender}},
	}
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreatePlan(ctx, store.Plan{Code: "abc123", TeamID: team.ID, Status: "pr_open", Change: json.RawMessage(`{}`),
			Repo: "acme/deploy", InstallationID: 51234567, Branch: "kukie/abc123", PRNumber: 7, HeadSHA: head}, store.PlanEvent{Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				p := &trackingPipeline{plan: store.Plan{Code: "abc123", TeamID: team.ID, Branch: "kukie/abc123", HeadSHA: head}}
				checks := &trackingChecks{}
				b := newBase(db)
				in, err := NewInbox(db, InboxOptions{},
					&Installation{Base: b}, &InstallationRepositories{Base: b}, &CheckRun{Base: b, Pipeline: p, Checks: checks},
					&CheckSuite{Base: b, Pipeline: p, Checks: checks}, &PullRequest{Base: b, Pipeline: p, Checks: checks},
					&Push{Base: b, Pipeline: p, Checks: checks}, &IssueComment{Base: b, Pipeline: p, Access: writeAccess{}})
				if err != nil {
					t.Fatal(err)
				}
				id := "invalid-" + strings.ReplaceAll(name, " ", "-")
				if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: tc.event, Payload: payload(t, tc.payload)}); err != nil {
					t.Fatal(err)
				}
				if _, err := in.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				d := delivery(t, db, id)
				if d.State != store.DeliveryFailed || d.Attempts != 1 || d.LastError != tc.want {
					t.Errorf("delivery = %s after %d attempts, error %q; want failed after one with %q", d.State, d.Attempts, d.LastError, tc.want)
				}
				if len(p.calls)+len(checks.calls) != 0 {
					t.Errorf("acted on: %v %v", p.calls, checks.calls)
				}
			})
		}
	})
}

// knownPlans is a pipeline that knows one plan, p.plan, as the pipeline knows the
// plans of its store.
type knownPlans struct{ trackingPipeline }

func (p *knownPlans) Reverify(ctx context.Context, code string) error {
	if code != p.plan.Code {
		return fmt.Errorf("plan %s: %w", code, store.ErrNotFound)
	}
	return p.trackingPipeline.Reverify(ctx, code)
}

// TestCheckRunOfAPlanThatDoesNotExistIsSkipped: a re-run of a check run whose
// external id names no plan of the service's is done, skipped with the reason,
// after one attempt; the plan it does name is verified again. Before, the delivery
// was retried eight times over hours, though a retry reads the same code.
func TestCheckRunOfAPlanThatDoesNotExistIsSkipped(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		for code, want := range map[string]string{
			"KK-GONE": `check_run event payload names plan "KK-GONE", which does not exist`,
			"abc123":  "",
		} {
			p := &knownPlans{trackingPipeline{plan: store.Plan{Code: "abc123", Branch: "kukie/abc123"}}}
			d := deliver(t, db, p, "run-of-"+code, "check_run", payload(t, map[string]any{"action": "rerequested",
				"check_run":  map[string]any{"name": github.CheckRunName, "external_id": code, "head_sha": strings.Repeat("1", 40)},
				"repository": map[string]any{"full_name": "acme/deploy"}, "sender": map[string]any{"login": "octocat"}}))
			if d.State != store.DeliveryDone || d.Attempts != 1 || d.SkipReason != want || d.LastError != "" {
				t.Errorf("run of %s: delivery %s after %d attempts, skipped %q, error %q; want done, skipped %q",
					code, d.State, d.Attempts, d.SkipReason, d.LastError, want)
			}
		}
	})
}
