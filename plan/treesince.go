package plan

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/render"
)

// maxPlannedBranches bounds the branches whose last planned commit is kept.
const maxPlannedBranches = 4096

// plannedBranch is one branch of one repository.
type plannedBranch struct{ repo, branch string }

// newPlannedCommits is the map of each branch's last planned commit.
func newPlannedCommits() *lru.Cache[plannedBranch, string] {
	c, err := lru.New[plannedBranch, string](maxPlannedBranches)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}

// treeSince returns the tree a plan on repo's branch at sha derives its reach
// index from: the commit of that branch the pipeline last planned on, with the
// paths GitHub's comparison says changed since, so the plan reads the
// kustomizations of the Applications the new commits touched and no others. It
// returns nil, and the plan reads every reach, when there is none: the first
// plan on the branch, the same commit (its reaches are remembered whole), or a
// comparison that failed, lists only part of the files, or does not start from
// that commit (the branch was rewritten).
func (p *Pipeline) treeSince(ctx context.Context, inst int64, repo, branch, sha string) *render.PriorTree {
	key := plannedBranch{repo: repo, branch: branch}
	prev, ok := p.plannedCommits.Get(key)
	if ok && prev == sha {
		return nil
	}
	p.plannedCommits.Add(key, sha)
	if !ok {
		return nil
	}
	log := zerolog.Ctx(ctx).With().Str("repo", repo).Str("branch", branch).Str("since", prev).Str("sha", sha).Logger()
	cmp, err := p.repos.Compare(ctx, inst, repo, prev, sha)
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("Comparing with the last planned commit failed; the reach index is built in full")
		return nil
	case cmp.MergeBase != prev:
		log.Info().Str("merge_base", cmp.MergeBase).Msg("The last planned commit is not an ancestor; the reach index is built in full")
		return nil
	case !cmp.Complete:
		log.Info().Int("files", len(cmp.Files)).Msg("GitHub lists only part of the changed files; the reach index is built in full")
		return nil
	}
	changed := make([]string, 0, len(cmp.Files))
	for _, f := range cmp.Files {
		changed = append(changed, f.Path)
		if f.PreviousPath != "" {
			changed = append(changed, f.PreviousPath)
		}
	}
	return &render.PriorTree{TreeID: treeID(repo, prev), Changed: changed}
}

// treeID identifies the tree of repo at commit sha for render (Request.TreeID).
func treeID(repo, sha string) string {
	return repo + "@" + sha
}
