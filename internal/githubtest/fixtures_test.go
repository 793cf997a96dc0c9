package githubtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

// TestWebhookFixturesParse proves every fixture is something go-github parses into
// the right event type, carries the action its name says, and names the installation.
func TestWebhookFixturesParse(t *testing.T) {
	required := map[string]any{
		"installation/created":                  &github.InstallationEvent{},
		"installation/deleted":                  &github.InstallationEvent{},
		"installation/suspend":                  &github.InstallationEvent{},
		"installation/unsuspend":                &github.InstallationEvent{},
		"installation/new_permissions_accepted": &github.InstallationEvent{},
		"installation_repositories/added":       &github.InstallationRepositoriesEvent{},
		"installation_repositories/removed":     &github.InstallationRepositoriesEvent{},
		"pull_request/opened":                   &github.PullRequestEvent{},
		"pull_request/synchronize":              &github.PullRequestEvent{},
		"pull_request/closed_merged":            &github.PullRequestEvent{},
		"pull_request/closed_unmerged":          &github.PullRequestEvent{},
		"check_run/rerequested":                 &github.CheckRunEvent{},
		"check_run/requested_action":            &github.CheckRunEvent{},
		"check_suite/requested":                 &github.CheckSuiteEvent{},
		"check_suite/rerequested":               &github.CheckSuiteEvent{},
		"push/merge_to_main":                    &github.PushEvent{},
		"issue_comment/created":                 &github.IssueCommentEvent{},
	}
	root, err := moduleroot.Find()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, FixtureDir, "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		event := filepath.Base(filepath.Dir(f))
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		key := event + "/" + name
		seen[key] = true
		t.Run(key, func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := github.ParseWebHook(event, body)
			if err != nil {
				t.Fatalf("go-github cannot parse: %v", err)
			}
			if want, ok := required[key]; ok && reflect.TypeOf(parsed) != reflect.TypeOf(want) {
				t.Errorf("parsed as %T, want %T", parsed, want)
			}
			var meta struct {
				Action       *string `json:"action"`
				Installation struct {
					ID int64 `json:"id"`
				} `json:"installation"`
				Sender struct {
					Login string `json:"login"`
				} `json:"sender"`
			}
			if err := json.Unmarshal(body, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Installation.ID == 0 || meta.Sender.Login == "" {
				t.Errorf("installation id %d, sender %q: both must be set", meta.Installation.ID, meta.Sender.Login)
			}
			// A file is named after its action; closed_merged/closed_unmerged are "closed".
			wantAction := name
			if strings.HasPrefix(name, "closed_") {
				wantAction = "closed"
			}
			switch {
			case event == "push" && meta.Action != nil:
				t.Errorf("push payloads have no action")
			case event != "push" && (meta.Action == nil || *meta.Action != wantAction):
				t.Errorf("action = %v, want %q", meta.Action, wantAction)
			}
		})
	}
	for key := range required {
		if !seen[key] {
			t.Errorf("missing fixture %s", key)
		}
	}

	merged := mustParse[*github.PullRequestEvent](t, "pull_request", "closed_merged")
	if !merged.GetPullRequest().GetMerged() || merged.GetPullRequest().GetMergeCommitSHA() == "" {
		t.Errorf("closed_merged must be merged with a merge commit")
	}
	unmerged := mustParse[*github.PullRequestEvent](t, "pull_request", "closed_unmerged")
	if unmerged.GetPullRequest().GetMerged() {
		t.Errorf("closed_unmerged must not be merged")
	}
	push := mustParse[*github.PushEvent](t, "push", "merge_to_main")
	if push.GetRepo().GetCreatedAt().IsZero() || push.GetHeadCommit().GetID() != push.GetAfter() {
		t.Errorf("push fixture: created_at %v head %s after %s", push.GetRepo().GetCreatedAt(), push.GetHeadCommit().GetID(), push.GetAfter())
	}
	comment := mustParse[*github.IssueCommentEvent](t, "issue_comment", "created")
	if !comment.GetIssue().IsPullRequest() {
		t.Errorf("issue_comment fixture must be on a pull request")
	}
}

func mustParse[T any](t *testing.T, event, name string) T {
	t.Helper()
	parsed, err := github.ParseWebHook(event, Fixture(t, event, name))
	if err != nil {
		t.Fatalf("parse %s/%s: %v", event, name, err)
	}
	v, ok := parsed.(T)
	if !ok {
		t.Fatalf("%s/%s parsed as %T", event, name, parsed)
	}
	return v
}
