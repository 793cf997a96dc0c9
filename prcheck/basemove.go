package prcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/markdown"
	"github.com/kukie/kukie-gitops/policy"
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
	// SHA is the branch's new commit; Before the one it moved from ("" or zeros
	// when the push created the branch, or does not say).
	SHA    string
	Before string
	// Files are the files the push changed; nil when the push does not say.
	Files []string
	// Default is set when Branch is the repository's default branch, the one the
	// policy (.kukie.yml) of every pull request is read from, whatever its base.
	Default bool

	// whileRunning says the move came while the check it is judged for ran.
	whileRunning bool
	// readAfter says the move was found by reading where the branch is once the
	// check published its result, no push having told it: it came after the
	// check started, while it ran or after, which nothing tells apart.
	readAfter bool
	// policy, when set, is what the move did to the policy file as judged already
	// (by the push that told a running check).
	policy *policyMove
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
//
// Their kukie/policy runs are marked the same way, once and apart from the render,
// when the push changed the policy file on the branch the policy was read from:
// the findings are those of the rules before it. A push that does not list its
// files is asked of GitHub (the comparison of the check's base with the new one),
// and one GitHub lists only in part may have changed it, and says so. The policy
// is the default branch's: a push to it that changed the policy file marks the
// kukie/policy runs of the pull requests into other branches too (their
// kukie/render runs are not its to mark), judged by what the push itself changed
// (its files, else GitHub's comparison of m.Before with m.SHA, once). The
// comparison starts instead from the commit each check read its policy from
// (PolicySHA) when it is known, and a push to that commit is no move of it.
//
// A completed check whose judgement of the moves while it ran failed is judged
// first, as it would have been then (judgeOwedMoves), whatever the push changed.
//
// A check still running is only told of the move (the newest one, in Records): a
// running check is judged when it completes, against the files between its base
// and where the branch is then (a push that landed before its record, which no
// push could tell it, included), and its runs are marked then, after its own
// result is published. Re-checking it at once would show the same: a pull request's merge
// base does not move with its base branch.
func (c *Checker) BaseMoved(ctx context.Context, m BaseMove) error {
	if c.Records == nil {
		return nil
	}
	mayChangePolicy := m.Files == nil || touchesPolicy(m.Files)
	candidates, err := c.Records.CurrentPullChecksOnBase(ctx, m.Repo, m.Branch, m.SHA, mayChangePolicy, MaxBaseMoveMarks+1)
	if err != nil {
		return err
	}
	if m.Default && len(candidates) <= MaxBaseMoveMarks {
		others, err := c.Records.CurrentPullChecksOffBase(ctx, m.Repo, m.Branch, mayChangePolicy, MaxBaseMoveMarks+1-len(candidates))
		if err != nil {
			return err
		}
		candidates = append(candidates, others...)
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
	// Reached only when a completed check needs it: a push under running checks
	// alone renders nothing.
	reach := sync.OnceValues(func() (pushReach, error) { return c.reachedByPush(ctx, m) })
	policyMoved := c.policyMovedBy(m)
	for _, cand := range candidates {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cand.MovesPending && cand.State == store.PullCheckCompleted {
			if err := c.judgeOwedMoves(ctx, cand.ID); err != nil {
				if github.Transient(err) || ctx.Err() != nil {
					return err
				}
				log.Warn().Err(err).Str("key", cand.Key).Msg("Could not judge the base moves a check was owed; it stays owed")
			}
			if cand.BaseBranch != m.Branch && !mayChangePolicy {
				continue
			}
		}
		if cand.BaseBranch != m.Branch {
			// A check into another branch: only its policy, read from this one.
			pm, err := policyMoved(ctx, cand)
			if err != nil {
				if github.Transient(err) || ctx.Err() != nil {
					return err
				}
				log.Warn().Err(err).Str("key", cand.Key).Msg("Could not tell whether a push changed the policy a check was judged by")
				continue
			}
			if !pm.changed {
				continue
			}
			if cand.State == store.PullCheckRunning {
				told, err := c.Records.MarkPullCheckPolicyMovedWhileRunning(ctx, cand.ID, m.SHA)
				if err != nil {
					return err
				}
				if told {
					log.Info().Str("key", cand.Key).Str("head", cand.HeadSHA).Str("branch", m.Branch).Str("sha", m.SHA).
						Msg("The policy changed under a running check; its policy run is marked when the check completes")
					continue
				}
			}
		} else if cand.State == store.PullCheckRunning {
			told, err := c.Records.MarkPullCheckMovedWhileRunning(ctx, cand.ID, m.SHA)
			if err != nil {
				return err
			}
			if told {
				log.Info().Str("key", cand.Key).Str("head", cand.HeadSHA).Str("base", m.SHA).
					Msg("The base branch moved under a running check; it is judged when the check completes")
				continue
			}
			// It completed since it was listed: judged as a completed check.
		}
		if err := c.markStale(ctx, m, cand.ID, false, reach, policyMoved); err != nil {
			// One pull request's run that cannot be updated does not hold the others.
			if github.Transient(err) || ctx.Err() != nil {
				return err
			}
			log.Warn().Err(err).Str("key", cand.Key).Msg("Could not mark a check stale after its base moved")
		}
	}
	return nil
}

// movedWhileRunning judges, once the check id has published its result, the base
// moves it was told of while it ran (BaseMoved) and the one it was not: a push
// that landed before its record existed, which no push could tell it of, is found
// by reading where the base branch is now. Whether the files between the check's
// base and that commit, as GitHub compares them (all of them when it lists only
// part), reach its Applications or the policy decides whether its runs are
// marked stale. A push that came between the check's record and its publish marked
// it as a completed check, and the check's own result may have been published over
// that mark: a run marked so is published marked again. A check into another
// branch than the policy's, whose policy a push changed while it ran, marks its
// kukie/policy run, as that push judged it; and one no push told (it landed before
// the check's record) is found by reading where the default branch is now, against
// the commit the check read its policy from (PolicySHA). The policy's moves are
// judged from that commit, whose policy file's changes the check read. A failure
// leaves the check's own result standing and the judgement owed (owe), for the
// next push to the branch.
func (c *Checker) movedWhileRunning(ctx context.Context, id string) {
	if id == "" || ctx.Err() != nil {
		return
	}
	log := zerolog.Ctx(ctx)
	rec, err := c.Records.PullCheckMarks(ctx, id)
	if err != nil {
		log.Warn().Err(err).Str("check", id).Msg("Could not read whether the base moved while a check ran")
		return
	}
	if err := c.judgeMoves(ctx, rec); err != nil {
		log.Warn().Err(err).Str("key", rec.Key).Msg("Could not judge the base moves while a check ran; the next push to its base branch judges them")
		c.owe(ctx, rec.ID, err)
	}
}

// owe records that the check id's judgement of its base moves failed with err and
// is owed, for the next push to its base branch (BaseMoved), and says so on its
// kukie/render run unless that run is marked stale already: the run keeps its
// result, its title and summary saying first that whether the base moved under
// it could not be told yet, and how to know. The check's page says it too.
func (c *Checker) owe(ctx context.Context, id string, err error) {
	log := zerolog.Ctx(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := c.Records.SetPullCheckMovesPending(ctx, id, true); err != nil {
		// Nothing would tell the run what its word promises.
		log.Warn().Err(err).Str("check", id).Msg("Could not record that a check's base moves are to be judged")
		return
	}
	rec, res, rerr := c.completedCheck(ctx, id)
	if rerr != nil || rec.BaseMovedSHA != "" || rec.CheckRunID == 0 {
		return
	}
	report := c.renderReport(rec, res)
	report.Title = owedTitlePrefix + report.Title
	report.Summary = owedNote(rec, err) + report.Summary
	if _, err := c.GitHub.PublishCheckRun(ctx, rec.InstallationID, rec.Repo, rec.HeadSHA, rec.CheckRunID, report); err != nil {
		log.Warn().Err(err).Str("key", rec.Key).Msg("Could not say on a check run that its base moves are not judged yet")
	}
}

// judgeOwedMoves judges the base moves the completed check id is owed (owe), as
// it would have when it completed, against where its base branch is now. Once
// judged, nothing is owed, and a kukie/render run that no move made stale is
// published as the check's result again, without the word that it was owed.
func (c *Checker) judgeOwedMoves(ctx context.Context, id string) error {
	rec, err := c.Records.PullCheckMarks(ctx, id)
	if err != nil {
		return err
	}
	if err := c.judgeMoves(ctx, rec); err != nil {
		return err
	}
	if err := c.Records.SetPullCheckMovesPending(ctx, id, false); err != nil {
		return err
	}
	rec, res, err := c.completedCheck(ctx, id)
	if err != nil || rec.BaseMovedSHA != "" || rec.CheckRunID == 0 {
		return err
	}
	if _, err := c.GitHub.PublishCheckRun(ctx, rec.InstallationID, rec.Repo, rec.HeadSHA, rec.CheckRunID, c.renderReport(rec, res)); err != nil {
		return fmt.Errorf("publish the check run of %s again: %w", rec.Key, err)
	}
	zerolog.Ctx(ctx).Info().Str("key", rec.Key).Str("head", rec.HeadSHA).Msg("Judged the base moves a check was owed; none made it stale")
	return nil
}

// completedCheck reads the check id with its result.
func (c *Checker) completedCheck(ctx context.Context, id string) (store.PullCheck, Result, error) {
	rec, err := c.Records.PullCheckByID(ctx, id)
	if err != nil {
		return rec, Result{}, err
	}
	var res Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return rec, Result{}, fmt.Errorf("read the result of check %s: %w", rec.ID, err)
	}
	return rec, res, nil
}

// renderReport is the kukie/render run of the check rec as it published it.
func (c *Checker) renderReport(rec store.PullCheck, res Result) github.CheckReport {
	h := Head{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, BaseBranch: rec.BaseBranch,
		BaseSHA: rec.BaseSHA, HeadSHA: rec.HeadSHA, Key: rec.Key}
	report := reportOf(res, rec.Repo, rec.BaseBranch).checkReport(h)
	report.Annotations = nil
	report.DetailsURL = CheckURL(c.PublicURL, rec.ID)
	return report
}

// owedTitlePrefix starts the title of a run whose base moves are not judged yet.
const owedTitlePrefix = "Base moves not judged yet: "

// owedNote says, above a run's summary, that whether the base moved under the
// check rec could not be told yet, why (err, a judgeFailure's words), and what to do.
func owedNote(rec store.PullCheck, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "> [!NOTE]\n> **Whether %s moved under this check could not be told yet**", markdown.Name(rec.BaseBranch))
	var jf *judgeFailure
	if errors.As(err, &jf) {
		fmt.Fprintf(&b, " (%s)", jf.what)
	}
	fmt.Fprintf(&b, ". This check rendered the pull request against %s; %s may have moved since, under the Applications it renders "+
		"or the policy. The next push to %s tells it here; re-run the check (GitHub's *Re-run*) to know now.\n\n", short(rec.BaseSHA), markdown.Name(rec.BaseBranch), markdown.Name(rec.BaseBranch))
	return b.String()
}

// judgeFailure is what judging a check's base moves could not do (what, in words
// a run's summary shows), and why.
type judgeFailure struct {
	what string
	err  error
}

func (e *judgeFailure) Error() string { return e.what + ": " + e.err.Error() }
func (e *judgeFailure) Unwrap() error { return e.err }

// judgeMoves judges the base moves of the completed check rec since its base (as
// movedWhileRunning says), marking its runs stale where they reach it; a run
// already marked is published marked again. The policy's moves are judged since
// the commit the check read its policy from (PolicySHA) when it is known, since
// the check's base otherwise.
func (c *Checker) judgeMoves(ctx context.Context, rec store.PullCheck) error {
	type move struct {
		sha                     string
		whileRunning, readAfter bool
	}
	var moves []move
	add := func(sha string, whileRunning, readAfter bool) {
		if sha != "" && !slices.ContainsFunc(moves, func(m move) bool { return m.sha == sha }) {
			moves = append(moves, move{sha, whileRunning, readAfter})
		}
	}
	add(rec.BaseMovedSHA, false, false)
	latest := rec.MovedWhileRunningSHA
	_, isPull := pullNumber(rec.Key)
	if isPull {
		head, found, err := c.GitHub.BranchHead(ctx, rec.InstallationID, rec.Repo, rec.BaseBranch)
		if err != nil {
			return &judgeFailure{"GitHub did not say where " + rec.BaseBranch + " is now", err}
		}
		if found {
			latest = head
			if head == rec.BaseSHA {
				latest = ""
			}
		}
	}
	var policyBranch string
	if rec.PolicyMovedSHA != "" || rec.PolicySHA != "" {
		_, res, err := c.completedCheck(ctx, rec.ID)
		if err != nil {
			return err
		}
		if res.Policy != nil {
			policyBranch = res.Policy.DefaultBranch
		}
	}
	// The commit the policy was read from, when it is the base branch's.
	var policySince string
	none := func() (pushReach, error) { return pushReach{}, nil }
	switch {
	case policyBranch == rec.BaseBranch:
		add(rec.PolicyMovedSHA, false, false)
		policySince = rec.PolicySHA
	case policyBranch == "":
	case rec.PolicyMovedSHA != "":
		m := BaseMove{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, Branch: policyBranch, SHA: rec.PolicyMovedSHA,
			Default: true, whileRunning: true, policy: &policyMove{changed: true}}
		if err := c.markStale(ctx, m, rec.ID, true, none, c.policyMovedBy(m)); err != nil {
			return &judgeFailure{"its kukie/policy run could not be marked after " + policyBranch + " moved to " + short(m.SHA), err}
		}
	case rec.PolicySHA != "" && isPull:
		// No push told it: one may have landed before its record. The read is
		// conditional, and a branch where the policy was read costs no comparison.
		head, found, err := c.GitHub.BranchHead(ctx, rec.InstallationID, rec.Repo, policyBranch)
		if err != nil {
			return &judgeFailure{"GitHub did not say where " + policyBranch + " is now", err}
		}
		if found && head != rec.PolicySHA {
			m := BaseMove{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, Branch: policyBranch, SHA: head,
				Default: true, whileRunning: true}
			if err := c.markStale(ctx, m, rec.ID, true, none, c.policyMovedBy(m)); err != nil {
				return &judgeFailure{"its kukie/policy run could not be marked after " + policyBranch + " moved to " + short(m.SHA), err}
			}
		}
	}
	add(latest, latest == rec.MovedWhileRunningSHA, latest != rec.MovedWhileRunningSHA)
	for _, mv := range moves {
		m := BaseMove{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, Branch: rec.BaseBranch, SHA: mv.sha,
			whileRunning: mv.whileRunning, readAfter: mv.readAfter}
		cmp, err := c.GitHub.Compare(ctx, rec.InstallationID, rec.Repo, rec.BaseSHA, m.SHA)
		if err != nil {
			return &judgeFailure{"GitHub did not compare " + short(rec.BaseSHA) + " with " + short(m.SHA) + ", which " + rec.BaseBranch + " moved to", err}
		}
		if cmp.Complete {
			m.Files = changedPaths(cmp.Files)
		}
		if policySince != "" && policySince != rec.BaseSHA && (m.Files == nil || touchesPolicy(m.Files)) {
			// The policy was read at policySince or later: only its changes since count.
			pm := policyMove{}
			if policySince != m.SHA {
				cmp, err := c.GitHub.Compare(ctx, rec.InstallationID, rec.Repo, policySince, m.SHA)
				if err != nil {
					return &judgeFailure{"GitHub did not compare " + short(policySince) + " with " + short(m.SHA) + ", which " + rec.BaseBranch + " moved to", err}
				}
				pm = policyMove{changed: touchesPolicy(changedPaths(cmp.Files)), since: policySince}
				if !pm.changed && !cmp.Complete {
					pm = policyMove{changed: true, maybe: true, since: policySince}
				}
			}
			m.policy = &pm
		}
		reach := sync.OnceValues(func() (pushReach, error) { return c.reachedByPush(ctx, m) })
		if err := c.markStale(ctx, m, rec.ID, true, reach, c.policyMovedBy(m)); err != nil {
			return &judgeFailure{"its runs could not be marked after " + rec.BaseBranch + " moved to " + short(m.SHA), err}
		}
	}
	return nil
}

// changedPaths lists the paths of files, the old ones of renamed files too; never nil.
func changedPaths(files []github.ChangedFile) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, f.Path)
		if f.PreviousPath != "" {
			out = append(out, f.PreviousPath)
		}
	}
	return out
}

// touchesPolicy reports whether files hold the policy file.
func touchesPolicy(files []string) bool { return slices.Contains(files, policy.ConfigFile) }

// policyMove is what a base move did to the policy file a check was judged by:
// changed, or maybe changed (GitHub did not list every file it changed since the
// commit since, or the push did not say what it changed when since is "").
type policyMove struct {
	changed, maybe bool
	since          string
}

// policyMovedBy tells, for each check, what the move m of the branch its policy
// was read from did to the policy file: nothing when the check read it at m.SHA
// or later (its PolicySHA is m.SHA); the push's files say it when they are listed;
// otherwise GitHub compares the commit the check read its policy from with m.SHA,
// once per commit: the policy file's changes up to it were read. Without that
// commit, GitHub compares the check's base with m.SHA; and the policy of a check
// into another branch than m's was read from m's branch as it was then, so only
// what the push itself changed counts: GitHub compares m.Before with m.SHA, once.
func (c *Checker) policyMovedBy(m BaseMove) func(ctx context.Context, rec store.PullCheck) (policyMove, error) {
	compared := map[string]policyMove{}
	return func(ctx context.Context, rec store.PullCheck) (policyMove, error) {
		if m.policy != nil {
			return *m.policy, nil
		}
		if rec.PolicySHA == m.SHA {
			return policyMove{}, nil
		}
		if m.Files != nil {
			return policyMove{changed: touchesPolicy(m.Files)}, nil
		}
		since, what := rec.BaseSHA, "the base "+short(rec.BaseSHA)+" of "+rec.Key
		if rec.PolicySHA != "" {
			since, what = rec.PolicySHA, m.Branch+"'s commit "+short(rec.PolicySHA)+" the policy of "+rec.Key+" was read from"
		} else if rec.BaseBranch != m.Branch {
			if m.Before == "" || strings.Trim(m.Before, "0") == "" {
				return policyMove{changed: true, maybe: true}, nil
			}
			since, what = m.Before, m.Branch+"'s commit "+short(m.Before)+" before the push"
		}
		if pm, ok := compared[since]; ok {
			return pm, nil
		}
		cmp, err := c.GitHub.Compare(ctx, rec.InstallationID, rec.Repo, since, m.SHA)
		if err != nil {
			return policyMove{}, fmt.Errorf("compare %s with %s: %w", what, short(m.SHA), err)
		}
		pm := policyMove{changed: touchesPolicy(changedPaths(cmp.Files)), since: since}
		if !pm.changed && !cmp.Complete {
			pm = policyMove{changed: true, maybe: true, since: since}
		}
		compared[since] = pm
		return pm, nil
	}
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

// markStale marks the completed check id stale where the move m reaches it, and
// says so on its runs: kukie/render when the push reaches one of its Applications,
// kukie/policy when it changed the policy the run was judged by. Each run is
// marked once; again publishes a run already marked at m.SHA once more.
func (c *Checker) markStale(ctx context.Context, m BaseMove, id string, again bool, reach func() (pushReach, error),
	policyMoved func(context.Context, store.PullCheck) (policyMove, error)) error {
	rec, err := c.Records.PullCheckByID(ctx, id)
	if err != nil {
		return err
	}
	if rec.State != store.PullCheckCompleted {
		return nil
	}
	var res Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return fmt.Errorf("read the result of check %s: %w", rec.ID, err)
	}
	var reached pushReach
	var hit []string
	unmarked := func(sha string) bool { return sha == "" || again && sha == m.SHA }
	// A move of another branch than the check's base (the policy's) reaches none
	// of its Applications.
	if rec.BaseBranch == m.Branch && unmarked(rec.BaseMovedSHA) && rec.CheckRunID != 0 && len(res.Apps) > 0 {
		if reached, err = reach(); err != nil {
			return err
		}
		for _, a := range res.Apps {
			if _, ok := reached.apps[a.Name]; ok || reached.all {
				hit = append(hit, a.Name)
			}
		}
	}
	var pm policyMove
	// The policy is the default branch's: a move of another branch leaves it.
	if unmarked(rec.PolicyMovedSHA) && rec.PolicyCheckRunID != 0 && res.Policy != nil && res.Policy.DefaultBranch == m.Branch {
		if pm, err = policyMoved(ctx, rec); err != nil {
			return err
		}
	}
	if len(hit) == 0 && !pm.changed {
		return nil
	}
	// The pull request may have merged (this push may be its merge) or moved on
	// to a newer head since: its run is then no longer the one to warn on.
	if number, ok := pullNumber(rec.Key); ok {
		pr, err := c.GitHub.GetPull(ctx, rec.InstallationID, rec.Repo, number)
		if err != nil {
			return fmt.Errorf("read pull request #%d of %s: %w", number, rec.Repo, err)
		}
		if pr.State != "open" || pr.HeadSHA != rec.HeadSHA || pr.BaseRef != rec.BaseBranch {
			return nil
		}
	}
	log := zerolog.Ctx(ctx)
	// Each run is published first and recorded after: a publish that fails leaves
	// the check unmarked for the delivery's retry, and a record that fails only
	// publishes the same run again.
	if len(hit) > 0 {
		h := Head{InstallationID: rec.InstallationID, Repo: rec.Repo, RepoURL: rec.RepoURL, BaseBranch: rec.BaseBranch,
			BaseSHA: rec.BaseSHA, HeadSHA: rec.HeadSHA, Key: rec.Key}
		report := staleReport(reportOf(res, rec.Repo, rec.BaseBranch).checkReport(h), m, rec, reached, hit)
		report.DetailsURL = CheckURL(c.PublicURL, rec.ID)
		if _, err := c.GitHub.PublishCheckRun(ctx, rec.InstallationID, rec.Repo, rec.HeadSHA, rec.CheckRunID, report); err != nil {
			return fmt.Errorf("mark the check run of %s stale: %w", rec.Key, err)
		}
		if _, err := c.Records.MarkPullCheckBaseMoved(ctx, rec.ID, m.SHA); err != nil {
			return err
		}
		log.Info().Str("key", rec.Key).Str("head", rec.HeadSHA).Str("base", m.SHA).Strs("apps", hit).
			Msg("Marked a check stale: its base branch moved under Applications it renders")
	}
	if pm.changed {
		report := stalePolicyReport(*res.Policy, m, rec, pm)
		report.DetailsURL = policyURL(CheckURL(c.PublicURL, rec.ID))
		if _, err := c.GitHub.PublishCheckRun(ctx, rec.InstallationID, rec.Repo, rec.HeadSHA, rec.PolicyCheckRunID, report); err != nil {
			return fmt.Errorf("mark the policy run of %s stale: %w", rec.Key, err)
		}
		if _, err := c.Records.MarkPullCheckPolicyMoved(ctx, rec.ID, m.SHA); err != nil {
			return err
		}
		log.Info().Str("key", rec.Key).Str("head", rec.HeadSHA).Str("base", m.SHA).Bool("maybe", pm.maybe).
			Msg("Marked a policy run stale: the policy file changed on its base branch")
	}
	return nil
}

// staleTitlePrefix starts the title of a run whose base moved after it.
const staleTitlePrefix = "Base branch moved: "

// movedWhen says when the base moved, as a run's summary tells it.
func movedWhen(m BaseMove, rec store.PullCheck) string {
	switch {
	case m.whileRunning || rec.MovedWhileRunningSHA == m.SHA:
		return "while this check ran"
	case m.readAfter:
		return "since this check started"
	}
	return "after this check"
}

// staleReport is the check run of rec as it was published, its title and summary
// saying first that the base moved and what that means.
func staleReport(r github.CheckReport, m BaseMove, rec store.PullCheck, reached pushReach, hit []string) github.CheckReport {
	r.Title = staleTitlePrefix + r.Title
	// Annotations already on the run stay; none is sent again.
	r.Annotations = nil
	var b strings.Builder
	fmt.Fprintf(&b, "> [!WARNING]\n> **%s moved to %s %s**", markdown.Name(m.Branch), short(m.SHA), movedWhen(m, rec))
	if reached.all {
		fmt.Fprintf(&b, " (a push that does not list its files), so it may change what %s renders.", listedInline(hit))
	} else {
		var files []string
		for _, a := range hit {
			files = append(files, reached.apps[a]...)
		}
		// The paths are whoever pushed to the base's: as code they mention nobody.
		files = dedupe(files)
		for i, f := range files {
			files[i] = markdown.Code(f)
		}
		fmt.Fprintf(&b, ", changing files that %s read (%s).", listedInline(hit), listedInline(files))
	}
	fmt.Fprintf(&b, " This check rendered the pull request against %s; merging it now deploys the base's new commits as well, "+
		"which it did not render. Update the branch (merge or rebase %s) for a check against the new base, or use a merge queue, "+
		"whose groups are checked as they merge.\n\n", short(rec.BaseSHA), markdown.Name(m.Branch))
	r.Summary = b.String() + r.Summary
	return r
}

// stalePolicyReport is the kukie/policy run of rec as it was published (its
// annotations stay on the run), its title and summary saying first that the policy
// file changed on the branch it was read from and how to be judged by the new one.
func stalePolicyReport(p ResultPolicy, m BaseMove, rec store.PullCheck, pm policyMove) github.CheckReport {
	var b strings.Builder
	fmt.Fprintf(&b, "> [!WARNING]\n> **%s moved to %s %s", markdown.Name(m.Branch), short(m.SHA), movedWhen(m, rec))
	switch {
	case pm.maybe && pm.since == "":
		fmt.Fprintf(&b, "** in a push that does not say which files it changed, so `%s` may have changed:", policy.ConfigFile)
	case pm.maybe:
		fmt.Fprintf(&b, "**, and GitHub did not list every file it changed since %s, so `%s` may have changed:", short(pm.since), policy.ConfigFile)
	default:
		fmt.Fprintf(&b, ", changing `%s`**:", policy.ConfigFile)
	}
	fmt.Fprintf(&b, " this run judged the pull request by the rules %s had before", markdown.Name(m.Branch))
	if rec.BaseBranch != m.Branch {
		fmt.Fprintf(&b, " (the policy is read from %s, the repository's default branch, whatever branch a pull request goes into)", markdown.Name(m.Branch))
	}
	fmt.Fprintf(&b, ". Re-run the check (GitHub's *Re-run* on either run), "+
		"or push to the branch, for a judgement by the rules %s has now.\n\n", markdown.Name(m.Branch))
	summary := p.Summary
	if summary == "" {
		summary = "The findings are on the check's page.\n"
	}
	return github.CheckReport{Name: github.PolicyCheckRunName, ExternalID: rec.Key, Conclusion: p.Conclusion,
		Title: staleTitlePrefix + p.Title, Summary: b.String() + summary}
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
