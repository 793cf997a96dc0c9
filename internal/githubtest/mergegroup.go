package githubtest

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// QueueMergeGroup adds pull request number to the base branch's merge queue as
// GitHub does: it merges the head into the base's head (real git) as a commit on
// refs/heads/gh-readonly-queue/<base>/pr-<number>-<base sha>, and fires merge_group
// "checks_requested" naming that head and the base. It returns the group's head
// SHA and ref.
func (s *Server) QueueMergeGroup(t TB, repoName string, number int) (headSHA, headRef string) {
	t.Helper()
	s.mu.Lock()
	rp, pr := s.mustOpenPullLocked(t, "queue", repoName, number)
	rp.liveSHAs(pr)
	tree, clean, err := rp.mergeTree(pr.baseSHA, pr.headSHA)
	if err == nil && !clean {
		err = fmt.Errorf("merge conflict between %s and %s", pr.base, pr.head)
	}
	var h plumbing.Hash
	if err == nil {
		now := s.clock.Now()
		sig := object.Signature{Name: "GitHub", Email: "noreply@github.com", When: now}
		h, err = rp.writeCommit(&object.Commit{Author: sig, Committer: sig, TreeHash: tree,
			ParentHashes: []plumbing.Hash{plumbing.NewHash(pr.baseSHA), plumbing.NewHash(pr.headSHA)},
			Message:      fmt.Sprintf("Merge pull request #%d from %s", pr.number, pr.head)})
	}
	ref := plumbing.NewBranchReferenceName(fmt.Sprintf("gh-readonly-queue/%s/pr-%d-%s", pr.base, pr.number, pr.baseSHA))
	if err == nil {
		err = rp.setRef(ref, h)
	}
	if err != nil {
		s.mu.Unlock()
		t.Fatalf("queue %s#%d: %v", repoName, number, err)
	}
	c, _ := rp.peelToCommit(h)
	ev := &github.MergeGroupEvent{
		Action: ptr("checks_requested"),
		MergeGroup: &github.MergeGroup{HeadSHA: ptr(h.String()), HeadRef: ptr(ref.String()), BaseSHA: ptr(pr.baseSHA),
			BaseRef:    ptr(plumbing.NewBranchReferenceName(pr.base).String()),
			HeadCommit: &github.Commit{SHA: ptr(h.String()), Message: ptr(c.Message)}},
		Repo:   s.repoJSON(rp),
		Sender: s.userJSON(s.personLocked(DefaultAuthor)),
	}
	done := s.repoEventLocked(rp, "merge_group", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
	s.mu.Unlock()
	<-done
	return h.String(), ref.String()
}
