package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// wakeWaiters sends the plans waiting on holder back to preparing, on the new base;
// one still blocked by a file holder keeps waits again.
func (p *Pipeline) wakeWaiters(ctx context.Context, holder string) {
	log := zerolog.Ctx(ctx)
	waiting, err := p.db.ListPlans(ctx, store.PlanFilter{WaitingOn: holder, Statuses: []string{string(StatusWaiting)}})
	if err != nil {
		log.Error().Err(err).Str("plan", holder).Msg("List waiting plans failed")
		return
	}
	for _, w := range waiting {
		w.WaitingOn = ""
		pay, err := decodePayload(w)
		if err != nil {
			continue
		}
		if _, err := p.save(ctx, w, pay, StatusPreparing, "system", "wake", "plan "+holder+" released the file"); err != nil {
			log.Error().Err(err).Str("plan", w.Code).Msg("Wake waiting plan failed")
			continue
		}
		p.Kick(w.Code)
	}
}

// update re-reads a plan and applies fn until it saves without a concurrent change.
func (p *Pipeline) update(ctx context.Context, code string, fn func(pl *store.Plan, pay *Payload) (Status, string, string, error)) (store.Plan, error) {
	for attempt := 0; ; attempt++ {
		pl, err := p.db.PlanByCode(ctx, code)
		if err != nil {
			return pl, err
		}
		pay, err := decodePayload(pl)
		if err != nil {
			return pl, err
		}
		to, step, msg, err := fn(&pl, &pay)
		if err != nil {
			return pl, err
		}
		saved, err := p.save(ctx, pl, pay, to, ActorOf(ctx), step, msg)
		if errors.Is(err, store.ErrStale) && attempt < 10 {
			continue
		}
		return saved, err
	}
}

type actorKey struct{}

// WithActor records who acts (for plan events and audit rows).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is who acts as WithActor recorded it, or "system".
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "system"
}

// PullClosed handles a closed pull request of a kukie branch, base being the branch
// it closed on and head its head as it closed: merged into the plan's base branch →
// merged (then deployment tracking), otherwise closed. A merge into another branch
// (a person retargeted the pull request) closes the plan too: the change never
// reached the branch its Application deploys. Locks are released and waiters woken
// with the move (see lockChange), and the plan's branch is deleted unless it holds
// commits the plan did not make (see removeBranch).
func (p *Pipeline) PullClosed(ctx context.Context, repo, branch, base string, number int64, merged bool, mergeSHA, head string) error {
	return p.pullClosed(ctx, repo, branch, base, number, merged, mergeSHA, head, "")
}

// pullClosed is PullClosed; learnt, when not empty, ends the history's entry of the
// move with how the service learnt of the close other than by its event.
func (p *Pipeline) pullClosed(ctx context.Context, repo, branch, base string, number int64, merged bool, mergeSHA, head, learnt string) error {
	pl, ok, err := p.planOfBranch(ctx, repo, branch)
	if err != nil || !ok {
		return err
	}
	saved, err := p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		to, message := StatusClosed, fmt.Sprintf("pull request #%d %s", number, StatusClosed)
		switch {
		case merged && base != "" && base != pl.BaseBranch:
			app := appName(*pay)
			message = fmt.Sprintf("pull request #%d was merged into %s, not into %s, the branch %s deploys: the change does not reach the cluster; request it again to open a pull request on %s",
				number, base, pl.BaseBranch, app, pl.BaseBranch)
			pl.StatusReason = message
		case merged:
			to, message = StatusMerged, fmt.Sprintf("pull request #%d %s", number, StatusMerged)
		}
		if Status(pl.Status) == to || !CanMove(Status(pl.Status), to) {
			return "", "", "", errNothingToDo
		}
		message += learnt
		if to == StatusMerged {
			pl.MergeSHA = mergeSHA
			pay.RollbackReference = mergeSHA
		}
		return to, "pull_request", message, nil
	})
	switch {
	case errors.Is(err, errNothingToDo):
		// Already moved (a cancel closed the PR, or this is a retry): the branch
		// may still be there.
		if saved, err = p.db.PlanByCode(ctx, pl.Code); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if Status(saved.Status) == StatusMerged {
			p.Kick(saved.Code)
		}
	}
	mergedHead := ""
	if merged {
		mergedHead = head
	}
	return p.deleteBranch(ctx, saved, mergedHead)
}

// PullRetargeted handles a person changing the base branch of an open plan's pull
// request from one branch to another. The move is recorded in the plan's history,
// and the head's kukie/render run is published again by the plan's run
// (stepCheckRun): failing while the pull request targets another branch than the
// plan's base (CheckReport), its verdict restored once it targets the base again.
func (p *Pipeline) PullRetargeted(ctx context.Context, repo, branch, from, to string, number int64) error {
	pl, ok, err := p.planOfBranch(ctx, repo, branch)
	if err != nil || !ok {
		return err
	}
	_, err = p.update(ctx, pl.Code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		if Status(pl.Status) != StatusPROpen {
			return "", "", "", errNothingToDo
		}
		retargeted := ""
		if to != pl.BaseBranch {
			retargeted = to
		}
		if retargeted == pay.RetargetedTo {
			return "", "", "", errNothingToDo // a repeated delivery, or an edit that changes nothing for the plan
		}
		pay.RetargetedTo = retargeted
		pl.CheckRunID, pl.CheckRunURL = 0, ""
		message := fmt.Sprintf("pull request #%d retargeted from %s to %s, while %s tracks %s", number, from, to, appName(*pay), pl.BaseBranch)
		if retargeted == "" {
			message = fmt.Sprintf("pull request #%d targets %s again (from %s), the branch %s tracks", number, to, from, appName(*pay))
		}
		return Status(pl.Status), "pull_retargeted", message, nil
	})
	if errors.Is(err, errNothingToDo) {
		return nil
	}
	if err != nil {
		return err
	}
	p.Kick(pl.Code)
	return nil
}

// deleteBranch removes the branch of a plan whose pull request is over, so merged
// and closed plans leave no kukie/ branches behind, and records it, or that it was
// kept (see removeBranch). Plans still before or at an open PR keep theirs.
// mergedHead is the head the pull request was merged with, "" when it was not. A
// failure is returned so the webhook is retried; the branch is looked up first, so
// a retry records nothing twice.
func (p *Pipeline) deleteBranch(ctx context.Context, pl store.Plan, mergedHead string) error {
	switch Status(pl.Status) {
	case StatusMerged, StatusClosed, StatusDeploying, StatusDeployed, StatusDeployFailed, StatusRolledBack:
	default:
		return nil
	}
	if pl.PRNumber == 0 || !strings.HasPrefix(pl.Branch, github.BranchPrefix) {
		return nil
	}
	msg, err := p.removeBranch(ctx, pl, mergedHead)
	if err != nil || msg == "" {
		return err
	}
	_, err = p.update(ctx, pl.Code, func(cur *store.Plan, _ *Payload) (Status, string, string, error) {
		return Status(cur.Status), "branch", msg, nil
	})
	return err
}

// removeBranch deletes the plan's branch when its head is a commit the plan made
// (its own commit, built or adopted: pl.CommitSHA) or the head its pull request was
// merged with (mergedHead), whose commits the base holds. A head beyond them holds
// commits a person pushed (a fix on top of the edit, work after the merge) that
// would survive only in GitHub's refs/pull/N/head: the branch is kept. It returns
// the history's words for what it did, "" when there is nothing new to say (the
// branch is gone, or its keeping at this head was recorded already).
func (p *Pipeline) removeBranch(ctx context.Context, pl store.Plan, mergedHead string) (string, error) {
	head, exists, err := p.repos.BranchHead(ctx, pl.InstallationID, pl.Repo, pl.Branch)
	if err != nil || !exists {
		return "", err
	}
	if head != pl.CommitSHA && (mergedHead == "" || head != mergedHead) {
		msg := fmt.Sprintf("branch %s kept: it holds commits kukie did not make (head %s)", pl.Branch, shortSHA(head))
		if p.recorded(ctx, pl.Code, "branch", msg) {
			return "", nil
		}
		zerolog.Ctx(ctx).Info().Str("plan", pl.Code).Str("branch", pl.Branch).Str("head", head).Msg("Branch of a finished plan kept: its head is no commit of the plan")
		return msg, nil
	}
	if err := p.repos.DeleteBranch(ctx, pl.InstallationID, pl.Repo, pl.Branch); err != nil {
		return "", fmt.Errorf("delete branch of plan %s: %w", pl.Code, err)
	}
	return "branch " + pl.Branch + " deleted", nil
}

// recorded reports whether the plan's history holds an entry of step saying msg.
func (p *Pipeline) recorded(ctx context.Context, code, step, msg string) bool {
	events, err := p.db.PlanEvents(ctx, code)
	if err != nil {
		return false
	}
	for _, ev := range events {
		if ev.Step == step && ev.Message == msg {
			return true
		}
	}
	return false
}

// shortSHA is a commit as people read it, its first seven digits.
func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

var errNothingToDo = errors.New("nothing to do")

func (p *Pipeline) planOfBranch(ctx context.Context, repo, branch string) (store.Plan, bool, error) {
	if !strings.HasPrefix(branch, github.BranchPrefix) {
		return store.Plan{}, false, nil
	}
	plans, err := p.db.ListPlans(ctx, store.PlanFilter{Repo: repo, Branch: branch, Limit: 1})
	if err != nil || len(plans) == 0 {
		return store.Plan{}, false, err
	}
	return plans[0], true, nil
}

// Cancel closes a plan's pull request (if any), releases its locks and ends it.
// reason, when not empty, is why the caller cancels it: it is kept in the payload
// (CancelReason) and the history's cancel event; the caller bounds and checks it.
func (p *Pipeline) Cancel(ctx context.Context, teamID, code, reason string) (store.Plan, error) {
	pl, err := p.db.TeamPlan(ctx, teamID, code)
	if err != nil {
		return pl, err
	}
	if !Status(pl.Status).Cancellable() {
		return pl, &Error{Code: CodeConflict, Reason: fmt.Sprintf("plan %s is %s and can no longer be cancelled", code, pl.Status)}
	}
	if pl.PRNumber != 0 {
		if err := p.repos.ClosePull(ctx, pl.InstallationID, pl.Repo, pl.PRNumber); err != nil {
			return pl, fmt.Errorf("close pull request of plan %s: %w", code, err)
		}
	}
	saved, err := p.update(ctx, code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		if !Status(pl.Status).Cancellable() {
			return "", "", "", &Error{Code: CodeConflict, Reason: fmt.Sprintf("plan %s is %s and can no longer be cancelled", code, pl.Status)}
		}
		msg := "cancelled by " + ActorOf(ctx)
		if reason != "" {
			pay.CancelReason = reason
			msg += ": " + reason
		}
		return StatusClosed, "cancel", msg, nil
	})
	return saved, err
}

// Retry sends a failed plan back to the step that failed. A failed plan let its
// files go; a step that needs them (commit, pull request, check run) takes them
// again, and when another plan has taken one meanwhile the retried plan waits for
// it and is then prepared again on the new base.
func (p *Pipeline) Retry(ctx context.Context, teamID, code string) (store.Plan, error) {
	if _, err := p.db.TeamPlan(ctx, teamID, code); err != nil {
		return store.Plan{}, err
	}
	retry := func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		if Status(pl.Status) != StatusFailed {
			return "", "", "", &Error{Code: CodeConflict, Reason: fmt.Sprintf("plan %s is %s; only failed plans can be retried", code, pl.Status)}
		}
		to := Status(pl.FailedStep)
		if !CanMove(StatusFailed, to) {
			to = StatusDeciding
		}
		pl.FailedStep, pl.ErrorCode, pl.StatusReason = "", "", ""
		pay.Problem = nil
		return to, "retry", "retried by " + ActorOf(ctx), nil
	}
	saved, err := p.update(ctx, code, retry)
	var held *store.LockHeldError
	if errors.As(err, &held) {
		saved, err = p.update(ctx, code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
			if _, _, _, err := retry(pl, pay); err != nil {
				return "", "", "", err
			}
			pl.WaitingOn = held.Holder
			return StatusWaiting, "retry", "retried by " + ActorOf(ctx) + "; waiting for plan " + held.Holder + " on the same file", nil
		})
		if err == nil {
			// The holder may have finished between the two updates.
			if locks, lerr := p.db.FileLocks(ctx, held.Holder); lerr == nil && len(locks) == 0 {
				p.wakeWaiters(ctx, held.Holder)
			}
			return p.db.PlanByCode(ctx, code)
		}
	}
	if err != nil {
		return saved, err
	}
	p.Kick(code)
	return saved, nil
}

// Rollback opens a revert of a merged plan through the same pipeline as any change:
// decided on the Application the plan went to, rendered, verified and dry-run on the
// current base (render.Revert). The original plan becomes rolled_back once the
// revert is deployed. While a revert of the plan is under way it is returned as it
// is; one that was refused, failed or closed is replaced by a new one (a failed one
// is closed first, so it cannot be retried into a second revert).
func (p *Pipeline) Rollback(ctx context.Context, teamID, code, requestedBy, reason string) (store.Plan, error) {
	orig, err := p.db.TeamPlan(ctx, teamID, code)
	if err != nil {
		return orig, err
	}
	switch Status(orig.Status) {
	case StatusMerged, StatusDeploying, StatusDeployed, StatusDeployFailed:
	default:
		return orig, &Error{Code: CodeConflict, Reason: fmt.Sprintf("plan %s is %s; only merged plans can be rolled back", code, orig.Status)}
	}
	key := "rollback:" + code
	if prev := orig.RolledBackBy; prev != "" {
		existing, err := p.db.PlanByCode(ctx, prev)
		if err != nil {
			return existing, err
		}
		if !rollbackOver(Status(existing.Status)) {
			return existing, nil
		}
		if Status(existing.Status) == StatusFailed {
			if _, err := p.Cancel(ctx, teamID, prev, "replaced by a new rollback"); err != nil {
				return existing, fmt.Errorf("close failed revert %s: %w", prev, err)
			}
		}
		// One key per attempt: requests racing after the same ended attempt still
		// make one plan.
		key += ":after:" + prev
	}
	opay, err := decodePayload(orig)
	if err != nil {
		return orig, err
	}
	pay := Payload{Decision: opay.Decision, ArgoCD: opay.ArgoCD, App: opay.App, RollbackReference: orig.MergeSHA, Reverts: orig.MergeSHA}
	if reason == "" {
		reason = "roll back plan " + code
	}
	if requestedBy == "" {
		requestedBy = ActorOf(ctx)
	}
	rb := store.Plan{
		Code: newCode(), TeamID: teamID, IdempotencyKey: key, Cluster: orig.Cluster, Target: orig.Target,
		Change: orig.Change, Reason: reason, RequestedBy: requestedBy, Path: orig.Path, Status: string(StatusDeciding),
		Repo: orig.Repo, InstallationID: orig.InstallationID, RollbackOf: code,
	}
	if err := encodePayload(&rb, pay); err != nil {
		return rb, err
	}
	stored, created, err := p.db.CreatePlan(ctx, rb, store.PlanEvent{Actor: ActorOf(ctx), Step: "rollback", Message: reason})
	if err != nil {
		return stored, err
	}
	if created {
		p.observer.Transition("", StatusDeciding)
		if _, err := p.update(ctx, code, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
			pl.RolledBackBy = stored.Code
			return Status(pl.Status), "rollback", "revert opened as plan " + stored.Code, nil
		}); err != nil {
			return stored, err
		}
	}
	p.Kick(stored.Code)
	return stored, nil
}

// rollbackOver reports whether a revert in state s ended without reverting, so
// that another may be requested.
func rollbackOver(s Status) bool {
	switch s {
	case StatusRefused, StatusFailed, StatusClosed:
		return true
	}
	return false
}

// prepareRevert undoes the original plan's edit on the current base with render's
// revert, verified like any edit. Lines, files or fields the original wrote that
// were changed since are not overwritten: the revert is refused and names them.
func (p *Pipeline) prepareRevert(ctx context.Context, pl store.Plan, pay *Payload, branch github.Branch) ([]StoredEdit, error) {
	orig, err := p.db.PlanByCode(ctx, pl.RollbackOf)
	if err != nil {
		return nil, err
	}
	opay, err := decodePayload(orig)
	if err != nil {
		return nil, err
	}
	switch {
	case len(opay.Edits) == 0 || orig.BaseSHA == "":
		return nil, refusal(CodeEditNoLongerApplies, "plan %s recorded no edit to revert", orig.Code)
	case !strings.EqualFold(orig.Repo, pl.Repo):
		return nil, refusal(CodeEditNoLongerApplies, "plan %s changed %s, but Application %s/%s now deploys from %s; revert it by hand",
			orig.Code, orig.Repo, pay.App.Namespace, pay.App.Name, pl.Repo)
	}
	snap, err := p.repos.Snapshot(ctx, pl.InstallationID, pl.Repo, branch.SHA)
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	origSnap, err := p.repos.Snapshot(ctx, pl.InstallationID, pl.Repo, orig.BaseSHA)
	if err != nil {
		return nil, err
	}
	defer origSnap.Release()
	apps, err := p.cluster.Applications(ctx, clusterOf(pl))
	if err != nil {
		return nil, fmt.Errorf("list Applications of %s: %w", pl.Cluster, err)
	}
	appKey, rapps, home, err := p.appsToVerify(ctx, pl, pay, apps, branch.Name)
	if err != nil {
		return nil, err
	}
	edits := make([]render.FileEdit, len(opay.Edits))
	for i, e := range opay.Edits {
		edits[i] = render.FileEdit{Path: e.Path, Old: e.Old, New: e.New, Created: e.Created}
	}
	res, err := p.render.Revert(ctx, cache.Commit{Repo: pl.Repo, SHA: branch.SHA}, cache.Commit{Repo: pl.Repo, SHA: orig.BaseSHA}, render.RevertRequest{
		RepoDir: snap.Dir, TreeID: pl.Repo + "@" + branch.SHA, Apps: rapps, App: appKey,
		OriginalDir: origSnap.Dir, OriginalTreeID: pl.Repo + "@" + orig.BaseSHA, Edits: edits,
	})
	var ref *render.Refusal
	switch {
	case errors.As(err, &ref) && ref.Code == render.CodeNoLongerApplies:
		return nil, &Error{Code: CodeEditNoLongerApplies, Reason: fmt.Sprintf("plan %s cannot be reverted on %s: %s", orig.Code, branch.SHA, ref.Reason), Details: ref}
	case errors.As(err, &ref):
		return nil, &Error{Code: CodeRefused, Reason: fmt.Sprintf("the revert of plan %s is refused: %s", orig.Code, ref.Reason), Details: ref}
	case err != nil:
		return nil, fmt.Errorf("render the revert of plan %s: %w", orig.Code, err)
	}
	stored, err := p.recordVerified(ctx, pl, pay, res, home)
	if err != nil {
		return nil, err
	}
	pay.VerificationResult = "revert of plan " + orig.Code + " " + pay.VerificationResult
	return stored, nil
}

// stepTrackDeploy checks the Application and the target once; it returns done when
// the deployment ended (deployed, failed, timed out). Otherwise it waits for the next
// change of either (watched), or the poll for what cannot be watched.
func (p *Pipeline) stepTrackDeploy(ctx context.Context, pl store.Plan) (store.Plan, bool, error) {
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, true, err
	}
	pl, f, err := p.followDeploy(ctx, pl, pay)
	if err != nil {
		return pl, true, err
	}
	dep, final, readFailed := p.observeDeployment(ctx, pl, pay, f)
	switch {
	case final && dep.State == DeploySucceeded:
		pay.Deployment = &dep
		saved, err := p.save(ctx, pl, pay, StatusDeployed, "system", "deploy", dep.Message)
		if err == nil && saved.RollbackOf != "" {
			p.markRolledBack(ctx, saved)
		}
		return saved, true, err
	case final:
		pay.Deployment = &dep
		saved, err := p.save(ctx, pl, pay, StatusDeployFailed, "system", "deploy", dep.Message)
		return saved, true, err
	case !time.Now().Before(pl.DeployDeadline):
		dep.State = DeployFailed
		dep.Message = fmt.Sprintf("not deployed within %s: %s", p.cfg.DeployTimeout, dep.Message)
		pay.Deployment = &dep
		saved, err := p.save(ctx, pl, pay, StatusDeployFailed, "system", "deploy", dep.Message)
		if err == nil {
			p.observer.DeployTimedOut()
		}
		return saved, true, err
	}
	if pay.Deployment == nil || *pay.Deployment != dep {
		pay.Deployment = &dep
		if pl, err = p.save(ctx, pl, pay, StatusDeploying, "system", "deploy", dep.Message); err != nil {
			return pl, true, err
		}
	}
	// A read that failed is tried again after the poll interval even when both are
	// watched: nothing may change on the cluster to wake the plan.
	if !f.awaitChange(ctx, p.cfg.DeployPoll, readFailed, pl.DeployDeadline) {
		return pl, true, errStopped
	}
	return pl, false, nil
}

func (p *Pipeline) markRolledBack(ctx context.Context, rb store.Plan) {
	_, err := p.update(ctx, rb.RollbackOf, func(pl *store.Plan, pay *Payload) (Status, string, string, error) {
		if !CanMove(Status(pl.Status), StatusRolledBack) {
			return "", "", "", errNothingToDo
		}
		if pay.Deployment != nil {
			pay.Deployment.State = DeployRolledBack
		}
		pay.RollbackReference = "reverted by plan " + rb.Code + " (" + rb.MergeSHA + ")"
		return StatusRolledBack, "rollback", "reverted by plan " + rb.Code, nil
	})
	if err != nil && !errors.Is(err, errNothingToDo) {
		zerolog.Ctx(ctx).Error().Err(err).Str("plan", rb.RollbackOf).Msg("Mark plan rolled back failed")
	}
}

// observeDeployment reads where Argo CD is with the merge commit: the Application
// as its watch last saw it (read from the API server when it is not watched), and the
// target as the API server has it now. readFailed says a read failed, so the check
// is to be tried again even if nothing changes.
func (p *Pipeline) observeDeployment(ctx context.Context, pl store.Plan, pay Payload, f *following) (dep Deployment, final, readFailed bool) {
	dep = Deployment{State: DeployPending}
	if pay.App == nil {
		return Deployment{State: DeployFailed, Message: "the plan has no Application to follow"}, true, false
	}
	app, ok := f.application()
	if !ok {
		var err error
		if app, err = p.cluster.Application(ctx, clusterOf(pl), pay.App.Namespace, pay.App.Name); err != nil {
			dep.Message = "reading the Application failed: " + err.Error()
			return dep, false, true
		}
	}
	dep.SyncRevision = repoRevision(app.Status.Sync.Revision, app.Status.Sync.Revisions, app.Sources(), pl.Repo)
	dep.Health = app.Status.Health.Status
	op := app.Status.OperationState
	opRevision := ""
	if op != nil {
		dep.Phase = op.Phase
		if op.SyncResult != nil {
			opRevision = repoRevision(op.SyncResult.Revision, op.SyncResult.Revisions, app.Sources(), pl.Repo)
		}
	}
	includes := func(rev string) bool {
		if rev == "" {
			return false
		}
		if known, ok := f.contains[rev]; ok {
			return known
		}
		ok, err := p.repos.Contains(ctx, pl.InstallationID, pl.Repo, pl.MergeSHA, rev)
		if err != nil {
			readFailed = true
			return false
		}
		f.contains[rev] = ok
		return ok
	}
	if !includes(dep.SyncRevision) && !includes(opRevision) {
		dep.Message = "Argo CD has not synced the merge commit yet"
		return dep, false, readFailed
	}
	dep.State = DeployInProgress
	switch {
	case op == nil || !includes(opRevision):
		dep.Message = "Argo CD sees the merge commit; no sync of it has run yet"
		return dep, false, readFailed
	case op.Phase == argocd.PhaseFailed || op.Phase == argocd.PhaseError:
		return Deployment{State: DeployFailed, Message: "Argo CD sync " + op.Phase + ": " + op.Message,
			SyncRevision: dep.SyncRevision, Phase: op.Phase, Health: dep.Health}, true, false
	case op.Phase != argocd.PhaseSucceeded:
		dep.Message = runningSyncMessage(op)
		return dep, false, false
	}
	// A revert is judged like any change: the plan it reverts is rolled_back only
	// once the revert runs.
	judge := p.judgeRollout
	if c, err := ChangeOf(pl); err == nil && c.DeleteResource != nil && pl.RollbackOf == "" {
		judge = p.judgeDeletion
	}
	final, failed, msg, readErr := judge(ctx, pl, deployTarget(pl, pay), app)
	if !final || failed {
		dep.Message = msg
		if failed {
			dep.State = DeployFailed
		}
		return dep, final, readErr
	}
	dep.State, dep.Message = DeploySucceeded, cmp.Or(msg, "synced and running")
	return dep, true, false
}

// repoRevision is the revision Argo CD reports for the plan's repository: the
// revision of a single-source Application, or, for a multi-source one (whose single
// revision is empty and whose revisions follow spec.sources), the revision of its
// first source from repo (owner/name).
func repoRevision(single string, revisions []string, sources []argocd.AppSource, repo string) string {
	if single != "" || len(revisions) == 0 {
		return single
	}
	for i, src := range sources {
		r, err := github.ParseRepoURL(src.RepoURL)
		if err == nil && i < len(revisions) && r.FullName() == github.NormalizeFullName(repo) {
			return revisions[i]
		}
	}
	return ""
}

// runningSyncMessage says where an unfinished sync stands. Argo CD retries a failed
// automated sync (five times over about five minutes by default) and keeps the phase
// Running meanwhile, with the failed attempt's message ("… Retrying attempt #2 at
// 3:04PM."); that message is what people need while the plan is still deploying.
func runningSyncMessage(op *argocd.AppOperationState) string {
	msg := strings.TrimSpace(op.Message)
	switch {
	case msg == "":
		return "Argo CD sync " + op.Phase
	case strings.Contains(strings.ToLower(msg), "retrying attempt"):
		return "Argo CD sync " + op.Phase + ", retrying after a failed attempt: " + msg
	default:
		return "Argo CD sync " + op.Phase + ": " + msg
	}
}

// judgeRollout decides whether a synced change runs; final is false while it is still
// on its way. The target decides first, by kstatus: Current has rolled out,
// InProgress (generation not observed, replicas not all updated or available, old
// ones not gone) and Terminating wait, and Failed (a Deployment past its progress
// deadline, a Stalled condition) fails the plan. A Current target then waits for the
// Application's health as Argo CD assessed it after the sync: Degraded fails the
// plan, Progressing and Missing wait, and Healthy, Suspended or Unknown (Argo CD has
// no opinion) leave the verdict to the target.
func (p *Pipeline) judgeRollout(ctx context.Context, pl store.Plan, target objref.Target, app argocd.Application) (final, failed bool, msg string, readFailed bool) {
	name := target.Kind + "/" + target.Name
	// Read now, not from the target's watch: the Application's watch and the target's
	// are not ordered against each other, and the target's may not have delivered
	// Argo CD's apply yet when the Application reports the sync.
	obj, err := p.cluster.Object(ctx, clusterOf(pl), target)
	if err != nil {
		return false, false, "reading " + name + " failed: " + err.Error(), true
	}
	r, err := kube.ReadinessOf(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return false, false, "the status of " + name + " cannot be read: " + err.Error(), false
	}
	switch r.State {
	case kube.ReadinessFailed:
		return true, true, name + " failed: " + r.Message, false
	case kube.ReadinessTerminating:
		return false, false, name + " is being deleted", false
	case kube.ReadinessCurrent:
	default:
		return false, false, name + " is rolling out: " + r.Message, false
	}
	if !app.Status.HealthAssessedAfterSync() {
		return false, false, name + " has rolled out; waiting for Argo CD to assess the Application's health after the sync", false
	}
	switch app.Status.Health.Status {
	case argocd.HealthDegraded:
		return true, true, appHealthMessage(app), false
	case argocd.HealthProgressing, argocd.HealthMissing:
		return false, false, name + " has rolled out; " + appHealthMessage(app), false
	}
	return true, false, "", false
}

// judgeDeletion decides whether a synced deletion is done: the target gone from
// the cluster is, and so is a target the sync left in place (the Application does
// not prune, or the object says Prune=false; the plan warned about it), with a
// message saying so; a target being deleted (finalizers) is waited for.
func (p *Pipeline) judgeDeletion(ctx context.Context, pl store.Plan, target objref.Target, _ argocd.Application) (final, failed bool, msg string, readFailed bool) {
	name := target.Kind + "/" + target.Name
	obj, err := p.cluster.Object(ctx, clusterOf(pl), target)
	switch {
	case errors.Is(err, clusteraccess.ErrObjectNotFound):
		return true, false, "synced; " + name + " is gone from the cluster", false
	case err != nil:
		return false, false, "reading " + name + " failed: " + err.Error(), true
	}
	if meta, _ := obj["metadata"].(map[string]any); meta["deletionTimestamp"] != nil {
		return false, false, name + " is being deleted", false
	}
	return true, false, "synced; " + name + " is still in the cluster: Argo CD did not prune it; sync the Application with pruning or delete the object by hand", false
}

// appHealthMessage says what Argo CD reports about the Application's health, naming
// the resources that are not healthy where Argo CD records them.
func appHealthMessage(app argocd.Application) string {
	h := app.Status.Health
	msg := "Argo CD reports the Application " + h.Status
	if m := strings.TrimSpace(h.Message); m != "" {
		msg += ": " + m
	}
	var named []string
	for _, r := range app.Status.Resources {
		if r.Health == nil || r.Health.Status != h.Status {
			continue
		}
		if len(named) == maxNamedResources {
			named = append(named, "…")
			break
		}
		n := r.Kind + " " + r.Namespace + "/" + r.Name
		if r.Namespace == "" {
			n = r.Kind + " " + r.Name
		}
		if m := strings.TrimSpace(r.Health.Message); m != "" {
			n += " (" + m + ")"
		}
		named = append(named, n)
	}
	if len(named) > 0 {
		msg += "; " + h.Status + ": " + strings.Join(named, ", ")
	}
	return msg
}

// maxNamedResources bounds the resources a deployment message names.
const maxNamedResources = 5
