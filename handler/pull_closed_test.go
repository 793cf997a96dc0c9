package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// TestPullClosedPassesTheBranchItClosedOn: the pipeline learns the base branch a
// change's pull request was closed or merged on, so that a merge into a branch
// other than the change's base is not taken for the change's merge.
func TestPullClosedPassesTheBranchItClosedOn(t *testing.T) {
	repo := map[string]any{"full_name": "acme/deploy", "name": "deploy", "owner": map[string]any{"login": "acme"}}
	for _, base := range []string{"main", "release"} {
		p := &trackingPipeline{plan: store.Plan{Code: "abc123", Branch: "kukie/abc123"}}
		h := &PullRequest{Base: Base{App: github.App{ID: 1, Slug: "kukie"}}, Pipeline: p}
		body, err := json.Marshal(map[string]any{"action": "closed", "repository": repo, "sender": map[string]any{"login": "octocat"},
			"pull_request": map[string]any{"number": 7, "merged": true, "merge_commit_sha": "2222222222222222222222222222222222222222",
				"head": map[string]any{"ref": "kukie/abc123", "repo": repo}, "base": map[string]any{"ref": base, "repo": repo}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(context.Background(), "pull_request", "d-"+base, body); err != nil {
			t.Fatal(err)
		}
		if want := []string{"PullClosed kukie/abc123 into " + base + " merged=true"}; fmt.Sprint(p.calls) != fmt.Sprint(want) {
			t.Errorf("pipeline calls %v, want %v", p.calls, want)
		}
	}
}

// TestPullClosedPassesTheHeadItClosedWith: the pipeline learns the head a change's
// pull request was merged with, at which its branch holds nothing the base lacks
// and may go; a head that is no commit SHA is passed as none.
func TestPullClosedPassesTheHeadItClosedWith(t *testing.T) {
	repo := map[string]any{"full_name": "acme/deploy", "name": "deploy", "owner": map[string]any{"login": "acme"}}
	for sent, want := range map[string]string{
		"3333333333333333333333333333333333333333": "3333333333333333333333333333333333333333",
		"not a sha": "",
		"":          "",
	} {
		p := &trackingPipeline{plan: store.Plan{Code: "abc123", Branch: "kukie/abc123"}}
		h := &PullRequest{Base: Base{App: github.App{ID: 1, Slug: "kukie"}}, Pipeline: p}
		body, err := json.Marshal(map[string]any{"action": "closed", "repository": repo, "sender": map[string]any{"login": "octocat"},
			"pull_request": map[string]any{"number": 7, "merged": true, "merge_commit_sha": "2222222222222222222222222222222222222222",
				"head": map[string]any{"ref": "kukie/abc123", "sha": sent, "repo": repo}, "base": map[string]any{"ref": "main", "repo": repo}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(context.Background(), "pull_request", "d-"+sent, body); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p.heads) != fmt.Sprint([]string{want}) {
			t.Errorf("head %q sent: PullClosed given heads %q, want [%q]", sent, p.heads, want)
		}
	}
}

// TestPullEditedPassesOnlyANewBase: an edit that moves a change's pull request to
// another base reaches the pipeline with both branches; one that changes only the
// title does not.
func TestPullEditedPassesOnlyANewBase(t *testing.T) {
	repo := map[string]any{"full_name": "acme/deploy", "name": "deploy", "owner": map[string]any{"login": "acme"}}
	pull := map[string]any{"number": 7, "head": map[string]any{"ref": "kukie/abc123", "repo": repo}, "base": map[string]any{"ref": "release", "repo": repo}}
	for name, c := range map[string]struct {
		changes map[string]any
		want    []string
	}{
		"base":  {map[string]any{"base": map[string]any{"ref": map[string]any{"from": "main"}}}, []string{"PullRetargeted kukie/abc123 from main to release"}},
		"title": {map[string]any{"title": map[string]any{"from": "old title"}}, nil},
	} {
		p := &trackingPipeline{plan: store.Plan{Code: "abc123", Branch: "kukie/abc123"}}
		h := &PullRequest{Base: Base{App: github.App{ID: 1, Slug: "kukie"}}, Pipeline: p}
		body, err := json.Marshal(map[string]any{"action": "edited", "repository": repo, "sender": map[string]any{"login": "octocat"},
			"pull_request": pull, "changes": c.changes})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(context.Background(), "pull_request", "d-"+name, body); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p.calls) != fmt.Sprint(c.want) {
			t.Errorf("%s edit: pipeline calls %v, want %v", name, p.calls, c.want)
		}
	}
}
