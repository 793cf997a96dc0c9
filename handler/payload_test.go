package handler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
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
