package prcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// BaseMove is a push to a branch that pull requests may target.
type BaseMove struct {
	InstallationID int64
	// Repo is "owner/name"; RepoURL its canonical URL.
	Repo    string
	RepoURL string
	Branch  string
	// SHA is the branch's new commit.
	SHA string
	// Files are the files the push changed; nil when the push does not say.
	Files []string
}

// MaxBaseMoveMarks bounds the checks one push marks stale: each costs a request
// to GitHub, and a branch with hundreds of open pull requests must not spend an
// installation's budget at every merge. The most recently finished checks are
// marked; the rest are logged as not marked.
const MaxBaseMoveMarks = 20

// BaseMoved marks stale the kukie/render runs of the open pull requests into
// m.Branch whose check ran against an older base and whose Applications the push
// changed: their render compares the merge base with the head, so the commits that
// reached the base since are in neither, and merging now deploys what the run did
// not render. The run keeps its conclusion (the repository's branch protection
// decides whether a branch must be up to date, and a merge queue checks the merge
// itself) and says that the base moved, which of its Applications the push reaches
// and how to check it again: update the branch, or re-run. A check is marked once
// (the first move after it completed); a publish that fails is tried again with the
// delivery. The Applications reached
// are found as a check finds them, on the new base's tree; a push that does not
// list its files reaches all of them. GitHub is asked nothing unless a current
// check is on the branch.
func (c *Checker) BaseMoved(ctx context.Context, m BaseMove) error {
	if c.Records == nil {
		return nil
	}
	candidates, err := c.Records.CurrentPullChecksOnBase(ctx, m.Repo, m.Branch, m.SHA, MaxBaseMoveMarks+1)
	if err != nil {
		return err
	}
	if len(candidates) == 0 {
		return nil
	}
	log := zerolog.Ctx(ctx)
	if len(candidates) > MaxBaseMoveMarks {
		log.Warn().Str("branch", m.Branch).Int("marked_at_most", MaxBaseMoveMarks).
			Msg("More open pull requests than a push marks stale; the checks finished longest ago are not marked")
		candidates = candidates[:MaxBaseMoveMarks]
	}
	reached, err := c.reachedByPush(ctx, m)
	if err != nil {
		return err
	}
	for _, cand := range candidates {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.markStale(ctx, m, cand, reached); err != nil {
			// One pull request's run that cannot be updated does not hold the others.
			if github.Transient(err) || ctx.Err() != nil {
				return err
			}
			log.Warn().Err(err).Str("key", cand.Key).Msg("Could not mark a check stale after its base moved")
		}
	}
	return nil
}

// pushReach is the Applications a push reaches: all when all is set (the push's
// files are not known), else those named, each with the files of the push it reads.
type pushReach struct {
	all  bool
	apps map[string][]string
}

// reachedByPush finds the Applications of the team's clusters deploying from the
// branch whose render reads a file the push changed, on the tree of the new base.
func (c *Checker) reachedByPush(ctx context.Context, m BaseMove) (pushReach, error) {
	if m.Files == nil {
		return pushReach{all: true}, nil
	}
	if len(m.Files) == 0 {
		return pushReach{}, nil
	}
	h := Head{InstallationID: m.InstallationID, Repo: m.Repo, RepoURL: m.RepoURL, BaseBranch: m.Branch, BaseSHA: m.SHA, HeadSHA: m.SHA}
	team, clusters, err := c.Connections.ConnectedClusters(ctx, m.InstallationID, m.RepoURL)
	if err != nil || len(clusters) == 0 {
		return pushReach{}, err
	}
	apps, _ := c.apps(ctx, h, team, clusters, &report{})
	if len(apps) == 0 {
		return pushReach{}, nil
	}
	snap, err := c.GitHub.Snapshot(ctx, m.InstallationID, m.Repo, m.SHA)
	if err != nil {
		return pushReach{}, err
	}
	defer snap.Release()
	reached, err := render.Affected(ctx, snap.Dir, m.Repo+"@"+m.SHA, apps, m.Files)
	if err != nil {
		return pushReach{}, fmt.Errorf("find the Applications the push to %s reaches: %w", m.Branch, err)
	}
	out := pushReach{apps: map[string][]string{}}
	for _, r := range reached {
		out.apps[r.App.Name] = r.Files
	}
	return out, nil
}

// markStale marks the check cand stale when the push reaches one of its
// Applications, and says so on its kukie/render run.
func (c *Checker) markStale(ctx context.Context, m BaseMove, cand store.PullCheck, reached pushReach) error {
	rec, err := c.Records.PullCheckByID(ctx, cand.ID)
	if err != nil {
		return err
	}
	var res Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return fmt.Errorf("read the result of check %s: %w", rec.ID, err)
	}
	var hit []string
	for _, a := range res.Apps {
		if _, ok := reached.apps[a.Name]; ok || reached.all {
			hit = append(hit, a.Name)
		}
	}
	if len(hit) == 0 || rec.CheckRunID == 0 {
		return nil
	}
	// The pull request may have merged (this push may be its merge) or moved on
	// to a newer head since: its run is then no longer the one to warn on.
	if number, ok := pullNumber(rec.Key); ok {
		pr, err := c.GitHub.GetPull(ctx, rec.InstallationID, rec.Repo, number)
		if err != nil {
			return fmt.Errorf("read pull request #%d of %s: %w", number, rec.Repo, err)
		}
		if pr.State != "open" || pr.HeadSHA != rec.HeadSHA || pr.BaseRef != m.Branch {
			return nil
		}
	}
	h := Head{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, BaseBranch: rec.BaseBranch,
		BaseSHA: rec.BaseSHA, HeadSHA: rec.HeadSHA, Key: rec.Key}
	report := staleReport(reportOf(res, rec.Repo, rec.BaseBranch).checkReport(h), m, rec, reached, hit)
	report.DetailsURL = CheckURL(c.PublicURL, rec.ID)
	// Published first and recorded after: a publish that fails leaves the check
	// unmarked for the delivery's retry, and a record that fails only publishes
	// the same run again.
	if _, err := c.GitHub.PublishCheckRun(ctx, rec.InstallationID, rec.Repo, rec.HeadSHA, rec.CheckRunID, report); err != nil {
		return fmt.Errorf("mark the check run of %s stale: %w", rec.Key, err)
	}
	if _, err := c.Records.MarkPullCheckBaseMoved(ctx, rec.ID, m.SHA); err != nil {
		return err
	}
	zerolog.Ctx(ctx).Info().Str("key", rec.Key).Str("head", rec.HeadSHA).Str("base", m.SHA).Strs("apps", hit).
		Msg("Marked a check stale: its base branch moved under Applications it renders")
	return nil
}

// staleTitlePrefix starts the title of a run whose base moved after it.
const staleTitlePrefix = "Base branch moved: "

// staleReport is the check run of rec as it was published, its title and summary
// saying first that the base moved and what that means.
func staleReport(r github.CheckReport, m BaseMove, rec store.PullCheck, reached pushReach, hit []string) github.CheckReport {
	r.Title = staleTitlePrefix + r.Title
	// Annotations already on the run stay; none is sent again.
	r.Annotations = nil
	var b strings.Builder
	fmt.Fprintf(&b, "> [!WARNING]\n> **%s moved to %s after this check**", m.Branch, short(m.SHA))
	if reached.all {
		fmt.Fprintf(&b, " (a push that does not list its files), so it may change what %s renders.", listedInline(hit))
	} else {
		var files []string
		for _, a := range hit {
			files = append(files, reached.apps[a]...)
		}
		fmt.Fprintf(&b, ", changing files that %s read (%s).", listedInline(hit), listedInline(dedupe(files)))
	}
	fmt.Fprintf(&b, " This check rendered the pull request against %s; merging it now deploys the base's new commits as well, "+
		"which it did not render. Update the branch (merge or rebase %s) for a check against the new base, or use a merge queue, "+
		"whose groups are checked as they merge.\n\n", short(rec.BaseSHA), m.Branch)
	r.Summary = b.String() + r.Summary
	return r
}

// reportOf rebuilds the report a stored result was made of, for publishing it
// again; the policy's findings and the dry-run are kukie/policy's, not in it.
func reportOf(res Result, repo, branch string) *report {
	r := &report{repo: repo, branch: branch, incomplete: res.Incomplete, deploying: res.Deploying, notChecked: res.NotChecked}
	for _, f := range res.Files {
		r.files = append(r.files, github.ChangedFile{Path: f.Path, PreviousPath: f.PreviousPath, Status: f.Status, Lines: f.Lines})
	}
	for _, a := range res.Apps {
		r.apps = append(r.apps, appResult{name: a.Name, cluster: a.Cluster, level: argocd.Level(a.SyncPolicy), files: a.Files,
			diffs: a.Diffs, failed: a.Failed, notChecked: a.NotChecked, brokenBefore: a.BrokenBefore, capabilities: a.Warning})
	}
	return r
}

func dedupe(items []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
