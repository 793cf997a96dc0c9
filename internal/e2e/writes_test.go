package e2e_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

var (
	refPath    = regexp.MustCompile(`^/repos/[^/]+/[^/]+/git/refs/(.+)$`)
	mergePaths = regexp.MustCompile(`^/repos/[^/]+/[^/]+/(pulls/\d+/merge|merges|merge-upstream|pulls/\d+/update-branch)$`)
)

// checkWritesOnlyOwnBranches holds what the service sent GitHub to the design's
// guarantees: it writes refs only under github.BranchPrefix (never a base
// branch), opens pull requests only from such a branch, never merges anything
// (nor asks GitHub to, GraphQL's auto-merge included) and never writes files
// through the contents API, which commits to any branch it names. It returns how
// many ref writes it saw, for the caller to require some.
func checkWritesOnlyOwnBranches(t *testing.T, requests []githubtest.RecordedRequest) int {
	t.Helper()
	refWrites := 0
	for _, r := range requests {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			continue
		}
		what := r.Method + " " + r.Path
		switch {
		case strings.HasSuffix(r.Path, "/graphql") || mergePaths.MatchString(r.Path):
			t.Errorf("the service asked GitHub to merge or update a branch: %s", what)
		case strings.Contains(r.Path, "/contents/"):
			t.Errorf("the service wrote through the contents API: %s", what)
		case strings.HasSuffix(r.Path, "/git/refs"):
			var body struct{ Ref string }
			if err := json.Unmarshal(r.Body, &body); err != nil || !strings.HasPrefix(body.Ref, "refs/heads/"+github.BranchPrefix) {
				t.Errorf("the service created the ref %q (%s), outside refs/heads/%s", body.Ref, what, github.BranchPrefix)
			}
			refWrites++
		case refPath.MatchString(r.Path):
			if ref := refPath.FindStringSubmatch(r.Path)[1]; !strings.HasPrefix(ref, "heads/"+github.BranchPrefix) {
				t.Errorf("the service wrote the ref %s (%s), outside heads/%s", ref, what, github.BranchPrefix)
			}
			refWrites++
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/pulls"):
			var body struct{ Head string }
			if err := json.Unmarshal(r.Body, &body); err != nil || !strings.HasPrefix(body.Head, github.BranchPrefix) {
				t.Errorf("the service opened a pull request from %q (%s), not from one of its own branches", body.Head, what)
			}
		}
	}
	return refWrites
}
