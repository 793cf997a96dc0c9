package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// ignoredTreeFiles are written by the archive cache, not part of the repository.
var ignoredTreeFiles = map[string]bool{".kukie-complete": true}

// HeadPushed handles a push to a kukie branch. The App's own pushes are ignored; a
// push by someone else moves the head and is verified again: the new head must still
// be the base plus exactly the verified edit. The new head is recorded without a
// check run and the plan's run compares it (stepCheckRun), so the comparison is
// retried by the resume loop until it completes, on this or another replica, and one
// run at a time publishes on the head. A repeated delivery of the same push finds
// the head recorded and only makes sure that run is under way.
func (p *Pipeline) HeadPushed(ctx context.Context, repo, branch, sha, sender string) error {
	if sender != "" && strings.EqualFold(sender, p.cfg.BotLogin) {
		return nil
	}
	pl, ok, err := p.planOfBranch(ctx, repo, branch)
	if err != nil || !ok || Status(pl.Status) != StatusPROpen {
		return err
	}
	if pl.HeadSHA == sha {
		if pl.CheckRunID == 0 {
			p.Kick(pl.Code)
		}
		return nil
	}
	if _, err := p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		pl.HeadSHA, pl.CheckRunID, pl.CheckRunURL = sha, 0, ""
		pay.CheckConclusion = ""
		return Status(pl.Status), "head_pushed", "branch moved to " + sha + " by " + sender, nil
	}); err != nil {
		return err
	}
	p.Kick(pl.Code)
	return nil
}

// Reverify asks for the plan's head to be compared again with its base plus the
// verified edit and the verdict published as the head's check run (the Re-render
// action, a re-run check suite, a /kukie rerender comment, a base that moved without
// changing the edit). The plan's own run does it (stepCheckRun), so the requests of
// several webhooks, replicas and the resume loop publish one run at a time on the
// head, and a comparison GitHub interrupts is retried until it completes.
func (p *Pipeline) Reverify(ctx context.Context, code string) error {
	_, err := p.update(ctx, code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		if Status(pl.Status) != StatusPROpen {
			return "", "", "", errNothingToDo
		}
		pl.CheckRunID, pl.CheckRunURL = 0, ""
		pay.VerifiedHead = ""
		return Status(pl.Status), "reverify_requested", "re-verification of " + pl.HeadSHA + " requested", nil
	})
	if errors.Is(err, errNothingToDo) {
		return nil
	}
	if err != nil {
		return err
	}
	p.Kick(code)
	return nil
}

// compareHead returns "" when head = base + edits, otherwise what differs.
func (p *Pipeline) compareHead(ctx context.Context, pl store.Plan, pay Payload) (string, error) {
	base, err := p.repos.Snapshot(ctx, pl.InstallationID, pl.Repo, pl.BaseSHA)
	if err != nil {
		return "", err
	}
	defer base.Release()
	head, err := p.repos.Snapshot(ctx, pl.InstallationID, pl.Repo, pl.HeadSHA)
	if err != nil {
		return "", err
	}
	defer head.Release()
	want, err := treeFiles(base.Dir)
	if err != nil {
		return "", err
	}
	for _, e := range pay.Edits {
		if e.New == nil && !e.Created {
			delete(want, e.Path)
		} else {
			want[e.Path] = e.New
		}
	}
	got, err := treeFiles(head.Dir)
	if err != nil {
		return "", err
	}
	var diffs []string
	for path, w := range want {
		g, ok := got[path]
		switch {
		case !ok:
			diffs = append(diffs, path+" was removed")
		case !bytes.Equal(g, w):
			diffs = append(diffs, path+" differs from the verified change")
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			diffs = append(diffs, path+" was added")
		}
	}
	if len(diffs) == 0 {
		return "", nil
	}
	sort.Strings(diffs)
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("and %d more", len(diffs)-20))
	}
	return "Commit " + pl.HeadSHA + " is not the base plus the verified edit: " + strings.Join(diffs, "; ") + ".", nil
}

func treeFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignoredTreeFiles[rel] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, render.HostPathFree(err))
		}
		out[rel] = b
		return nil
	})
	if err != nil {
		// The error may reach the plan's history: it names no folder of this host.
		return nil, fmt.Errorf("read the repository's tree: %w", render.HostPathFree(err))
	}
	return out, nil
}

// BasePushed handles a push to a base branch. Open plans on that branch whose files
// (or app folder) changed are verified again on the new base; when their edit no
// longer applies as committed, the plan's kukie branch is rebuilt on the new base.
func (p *Pipeline) BasePushed(ctx context.Context, repo, branch, after string, changed []string) error {
	plans, err := p.db.ListPlans(ctx, store.PlanFilter{Repo: repo, Statuses: []string{string(StatusPROpen)}, Limit: 1000})
	if err != nil {
		return err
	}
	var errs []error
	for _, pl := range plans {
		if pl.BaseBranch != branch || pl.BaseSHA == after {
			continue
		}
		pay, err := decodePayload(pl)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !touches(changed, pay) {
			continue
		}
		// GitHub sends the push of a merge before the pull request's "closed" event:
		// the new base then already holds the plan's own change, and re-preparing on
		// it would record "nothing to change" and fail the check run of a merged PR.
		if open, err := p.pullStillOpen(ctx, pl, after); err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", pl.Code, err))
			continue
		} else if !open {
			if err := p.reconcileClosedPull(ctx, pl, after); err != nil {
				errs = append(errs, fmt.Errorf("plan %s: %w", pl.Code, err))
			}
			continue
		}
		if err := p.rebaseClaimed(ctx, pl.Code, github.Branch{Name: branch, SHA: after}); err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", pl.Code, err))
		}
	}
	return errors.Join(errs...)
}

// ErrPlanBusy is returned for a base push that reached a plan while another run
// held its claim. It is transient: the inbox retries the delivery, and by then the
// claim is free.
var ErrPlanBusy = errors.New("another worker is running the plan")

// rebaseClaimed rebases a plan under its claim, so that its writes are fenced like
// the steps of the plan's own run and never interleave with another worker's. A plan
// another worker holds is an error: the push is handled again when it is retried.
func (p *Pipeline) rebaseClaimed(ctx context.Context, code string, base github.Branch) error {
	hctx, held, ok, err := p.hold(ctx, code)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w; its base move to %s is handled when the push is retried", ErrPlanBusy, base.SHA)
	}
	err = func() error {
		pl, err := p.db.PlanByCode(hctx, code)
		if err != nil || Status(pl.Status) != StatusPROpen || pl.BaseSHA == base.SHA {
			return err // moved on while the claim was taken
		}
		pay, err := decodePayload(pl)
		if err != nil {
			return err
		}
		return p.rebase(hctx, pl, pay, base)
	}()
	held.end(ctx, true)
	// The plan's own run publishes the verdict on its head; a kick made while this
	// call held the claim could not start it.
	p.Kick(code)
	return err
}

// pullStillOpen reports whether the plan's pull request is still open and its head
// not yet part of the base at after. A merged or closed pull request is left to its
// pull_request event.
func (p *Pipeline) pullStillOpen(ctx context.Context, pl store.Plan, after string) (bool, error) {
	if pl.HeadSHA != "" {
		merged, err := p.repos.Contains(ctx, pl.InstallationID, pl.Repo, pl.HeadSHA, after)
		if err != nil {
			return false, fmt.Errorf("compare head %s with base %s: %w", pl.HeadSHA, after, err)
		}
		if merged {
			return false, nil
		}
	}
	if pl.PRNumber == 0 {
		return true, nil
	}
	pr, err := p.repos.GetPull(ctx, pl.InstallationID, pl.Repo, pl.PRNumber)
	if err != nil {
		return false, fmt.Errorf("read pull request #%d: %w", pl.PRNumber, err)
	}
	return pr.State == "open" && !pr.Merged, nil
}

// reconcileClosedPull moves a plan whose pull request GitHub reports merged or
// closed as its pull_request event does. GitHub does not deliver again an event the
// service missed (down, or the network dropped it), and the plan stayed pr_open for
// ever: its files held, so every later change to them waited, and the merge was
// never followed to the cluster. The push of the merge itself (after is the merge
// commit) comes just before the event and is left to it, as is a pull request
// GitHub still reports open (its merge not recorded yet); any later push finds the
// event missed, and an event that comes after all finds the plan moved.
func (p *Pipeline) reconcileClosedPull(ctx context.Context, pl store.Plan, after string) error {
	if pl.PRNumber == 0 {
		return nil
	}
	pr, err := p.repos.GetPull(ctx, pl.InstallationID, pl.Repo, pl.PRNumber)
	if err != nil {
		return fmt.Errorf("read pull request #%d: %w", pl.PRNumber, err)
	}
	if (pr.State == "open" && !pr.Merged) || (pr.Merged && pr.MergeSHA == after) {
		return nil
	}
	return p.PullClosed(ctx, pl.Repo, pl.Branch, pr.BaseRef, pl.PRNumber, pr.Merged, pr.MergeSHA, pr.HeadSHA)
}

func touches(changed []string, pay Payload) bool {
	if changed == nil {
		return true
	}
	appDir := ""
	if pay.App != nil && pay.App.Path != "" && pay.App.Path != "." {
		appDir = strings.TrimSuffix(pay.App.Path, "/") + "/"
	}
	for _, c := range changed {
		if appDir == "" || strings.HasPrefix(c, appDir) {
			return true
		}
		for _, e := range pay.Edits {
			if e.Path == c {
				return true
			}
		}
	}
	return false
}

// rebase re-prepares the plan on the new base: unchanged edits only get a new check
// run; changed edits become a new commit on the new base, force-pushed to the plan's
// own kukie branch (never any other).
func (p *Pipeline) rebase(ctx context.Context, pl store.Plan, pay Payload, base github.Branch) error {
	newPay := pay
	edits, err := p.prepareChange(ctx, pl, &newPay, base)
	if err != nil {
		e, ok := AsError(err)
		if !ok {
			return err
		}
		// The head stays what was verified on the old base; the plan's own run says on
		// it that the change is refused on the new one (see Reverify).
		_, err = p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
			pl.CheckRunID, pl.CheckRunURL = 0, ""
			pay.BaseRefusal = "On the new base " + base.SHA + " the change is refused: " + e.Reason
			pay.VerificationResult = "not verified on the new base: " + e.Reason
			return Status(pl.Status), "rebase", e.Reason, nil
		})
		return err // rebaseClaimed starts the plan's run once the claim is free
	}
	newPay.BaseRefusal = ""
	if sameEdits(edits, pay.Edits) {
		// The committed edit still applies as it is; say so on the head.
		_, err := p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
			pay.VerificationResult = newPay.VerificationResult + " on base " + base.SHA
			pay.BaseRefusal = ""
			return Status(pl.Status), "rebase", "edit still applies on " + base.SHA, nil
		})
		if err != nil {
			return err
		}
		return p.Reverify(ctx, pl.Code)
	}
	paths := make([]string, len(edits))
	for i, e := range edits {
		paths[i] = e.Path
	}
	// The rebuilt edit may touch other files than before: its locks become exactly
	// the new files, and plans waiting on a file it let go may go on.
	holder, released, err := p.db.ReplaceFileLocks(ctx, pl.Code, pl.Repo, paths)
	if err != nil {
		return err
	}
	if holder != "" {
		return fmt.Errorf("rebased edit needs a file locked by plan %s", holder)
	}
	if len(released) > 0 {
		defer p.wakeWaiters(ctx, pl.Code)
	}
	files := make([]github.FileChange, len(edits))
	for i, e := range edits {
		files[i] = github.FileChange{Path: e.Path, Content: e.New}
	}
	pl.BaseSHA = base.SHA
	if err := p.fence(ctx, pl.Code); err != nil {
		return err
	}
	ci, err := p.repos.CreateCommit(ctx, pl.InstallationID, pl.Repo, base.SHA, commitMessage(pl, newPay), files)
	if err != nil {
		return err
	}
	if err := p.fence(ctx, pl.Code); err != nil {
		return err
	}
	if err := p.repos.SetBranch(ctx, pl.InstallationID, pl.Repo, pl.Branch, ci.SHA); err != nil {
		return err
	}
	newPay.Edits, newPay.VerifiedHead = edits, ci.SHA // built here from the new base and the edits
	saved, err := p.update(ctx, pl.Code, func(st *store.Plan, pay *Payload) (Status, string, string, error) {
		st.BaseSHA, st.CommitSHA, st.HeadSHA, st.CheckRunID, st.CheckRunURL = base.SHA, ci.SHA, ci.SHA, 0, ""
		*pay = newPay
		return Status(st.Status), "rebase", "rebuilt on " + base.SHA + " as " + ci.SHA, nil
	})
	if err != nil {
		return err
	}
	// The plan's run verifies and publishes on the new head (see HeadPushed).
	p.Kick(saved.Code)
	if err := p.fence(ctx, saved.Code); err != nil {
		return err
	}
	return p.repos.EditPull(ctx, saved.InstallationID, saved.Repo, saved.PRNumber, PRTitle(saved, newPay), PRBody(saved, newPay))
}

func sameEdits(a, b []StoredEdit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].New, b[i].New) || !bytes.Equal(a[i].Old, b[i].Old) {
			return false
		}
	}
	return true
}

// PlanForPull returns the plan behind a kukie pull request head, if any.
func (p *Pipeline) PlanForPull(ctx context.Context, repo, branch string) (store.Plan, bool, error) {
	return p.planOfBranch(ctx, repo, branch)
}

// ConnectionsRevoked refuses the unmerged plans whose repository lost its connection.
// It implements handler.RevocationListener.
func (p *Pipeline) ConnectionsRevoked(ctx context.Context, revoked []store.RepoConnection, reason string) error {
	var errs []error
	for _, conn := range revoked {
		cl, err := p.db.ClusterByID(ctx, conn.ClusterID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r, err := github.ParseRepoURL(conn.Repo)
		if err != nil {
			continue
		}
		plans, err := p.db.ListPlans(ctx, store.PlanFilter{TeamID: cl.TeamID, Cluster: cl.Name, Repo: r.FullName(),
			Statuses: []string{string(StatusDeciding), string(StatusPreparing), string(StatusWaiting), string(StatusCommitting), string(StatusPROpen), string(StatusFailed)}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, pl := range plans {
			e := refusal(CodeRepoNotConnected, "repository %s was disconnected from cluster %s: %s", r.FullName(), cl.Name, reason)
			_, err := p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
				if !CanMove(Status(pl.Status), StatusRefused) {
					return "", "", "", errNothingToDo
				}
				pl.ErrorCode, pl.StatusReason = e.Code, e.Reason
				pay.Problem = e
				return StatusRefused, "disconnect", e.Reason, nil
			})
			if errors.Is(err, errNothingToDo) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
