package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

func jsonOf(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}

// stepDecide: which path, which Application, which repository and installation.
func (p *Pipeline) stepDecide(ctx context.Context, pl store.Plan, expectedPath string) (store.Plan, error) {
	if err := p.hook(pl.Code, "decide"); err != nil {
		return pl, err
	}
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, err
	}
	change, err := ChangeOf(pl)
	if err != nil {
		return pl, err
	}
	var app argocd.PayloadApp
	if change.NewResource != nil || pl.RollbackOf != "" {
		// A new resource and a revert go to the source of the Application they
		// name (a revert: the one its change went to), read again now.
		if pay.App == nil {
			return p.stop(ctx, pl, pay, refusal(CodeInvalidRequest, "a new_resource change needs the Application that will deploy it"), "decide")
		}
		a, err := p.cluster.Application(ctx, clusterOf(pl), pay.App.Namespace, pay.App.Name)
		if errors.Is(err, clusteraccess.ErrObjectNotFound) {
			return p.stop(ctx, pl, pay, refusal(CodeAppNotFound, "Application %s/%s does not exist in cluster %s", pay.App.Namespace, pay.App.Name, pl.Cluster), "decide")
		}
		if err != nil {
			return p.stop(ctx, pl, pay, fmt.Errorf("read Application %s/%s: %w", pay.App.Namespace, pay.App.Name, err), "decide")
		}
		app = payloadAppOf(a)
		reason := fmt.Sprintf("The new resource is added to the source of Argo CD Application %s.", a.Key())
		if pl.RollbackOf != "" {
			reason = fmt.Sprintf("The revert of plan %s goes to the source of Argo CD Application %s, where that change went.", pl.RollbackOf, a.Key())
		}
		pay.Decision = &DecisionInfo{Path: argocd.PathGit, Known: true, Level: a.Level(), Reason: reason}
	} else {
		d := p.cluster.Decide(ctx, clusterOf(pl), pl.Target)
		ap := d.Payload()
		pay.ArgoCD = &ap
		pay.Decision = &DecisionInfo{Path: d.Path, Known: d.Known, Reason: d.Reason, Level: d.Level, Failure: d.Failure}
		pl.Path = string(d.Path)
		if expectedPath != "" && expectedPath != string(d.Path) {
			return p.stop(ctx, pl, pay, &Error{Code: CodePathMismatch,
				Reason:  fmt.Sprintf("the caller expected the %s path but the change takes the %s path: %s", expectedPath, d.Path, d.Reason),
				Details: decisionDetails(pay)}, "decide")
		}
		if d.Path != argocd.PathGit {
			return p.stop(ctx, pl, pay, &Error{Code: CodeNotGitOpsManaged, Reason: d.Reason, Details: decisionDetails(pay)}, "decide")
		}
		found := false
		for _, a := range ap.Applications {
			if a.RepoURL != "" {
				app, found = a, true
				break
			}
		}
		if !found {
			return p.stop(ctx, pl, pay, refusal(CodeAppNotFound, "%s", unreadApplication(ap, pl.Cluster)), "decide")
		}
	}
	pl.Path = string(argocd.PathGit)
	pay.App = &app
	repo, err := github.ParseRepoURL(app.RepoURL)
	if err != nil {
		return p.stop(ctx, pl, pay, refusal(CodeUnsupportedSource, "the Application's source %q is not a GitHub repository this service can write to: %v", app.RepoURL, err), "decide")
	}
	pl.Repo = repo.FullName()
	inst, err := p.conns.RepoInstallation(ctx, pl.TeamID, pl.Cluster, app.RepoURL)
	if errors.Is(err, clusteraccess.ErrRepoNotConnected) {
		return p.stop(ctx, pl, pay, refusal(CodeRepoNotConnected,
			"repository %s (source of Application %s/%s) is not connected to cluster %s: connect it with POST /api/v1/clusters/%s/repos", pl.Repo, app.Namespace, app.Name, pl.Cluster, pl.Cluster), "decide")
	}
	if err != nil {
		return p.stop(ctx, pl, pay, fmt.Errorf("look up connection of %s: %w", pl.Repo, err), "decide")
	}
	pl.InstallationID = inst
	return p.save(ctx, pl, pay, StatusPreparing, "system", "decide", pay.Decision.Reason)
}

// unreadApplication explains a resource whose tracking id names an Application the
// cluster's Argo CD did not answer with. Most often the name or namespace in the
// tracking id is not an Application there, or the Application was created moments
// ago and the service's view of the cluster has not caught up: both are fixed by
// checking the name or submitting again, not by registering anything.
func unreadApplication(ap argocd.Payload, cluster string) string {
	var names []string
	for _, a := range ap.Applications {
		if a.Name != "" {
			names = append(names, a.Namespace+"/"+a.Name)
		}
	}
	what := "the Application named by the resource's Argo CD tracking id"
	if len(names) > 0 {
		what = "Application " + strings.Join(names, ", ") + ", named by the resource's Argo CD tracking id,"
	}
	return fmt.Sprintf("%s was not found in the Argo CD of cluster %s: check that the Application's name and namespace are right, "+
		"or submit the change again in a few seconds if the Application was just created", what, cluster)
}

func clusterOf(pl store.Plan) clusteraccess.Ref {
	return clusteraccess.Ref{TeamID: pl.TeamID, Name: pl.Cluster}
}

func decisionDetails(pay Payload) map[string]any {
	return map[string]any{"decision": pay.Decision, "argocd": pay.ArgoCD}
}

func payloadAppOf(a argocd.Application) argocd.PayloadApp {
	src, _ := a.PrimarySource()
	return argocd.PayloadApp{Name: a.Name, Namespace: a.Namespace, RepoURL: src.RepoURL, Path: src.Path,
		TargetRevision: src.TargetRevision, SourceType: a.SourceType(), Chart: a.Chart(), Automated: a.Automated(), SelfHeal: a.SelfHeal()}
}

// checkConnected re-checks the repository connection before a write: a repository
// disconnected mid-flight stops the plan.
func (p *Pipeline) checkConnected(ctx context.Context, pl store.Plan, pay Payload) error {
	if pay.App == nil {
		return refusal(CodeAppNotFound, "the plan has no Application")
	}
	inst, err := p.conns.RepoInstallation(ctx, pl.TeamID, pl.Cluster, pay.App.RepoURL)
	if errors.Is(err, clusteraccess.ErrRepoNotConnected) {
		return refusal(CodeRepoNotConnected, "repository %s was disconnected from cluster %s while the plan was in progress", pl.Repo, pl.Cluster)
	}
	if err != nil {
		return fmt.Errorf("look up connection of %s: %w", pl.Repo, err)
	}
	if inst != pl.InstallationID {
		return refusal(CodeRepoNotConnected, "repository %s is now reached through another installation of the App; submit the change again", pl.Repo)
	}
	return nil
}

// stepPrepare: base commit, archive, locate + edit + verify, dry-run, locks.
func (p *Pipeline) stepPrepare(ctx context.Context, pl store.Plan) (store.Plan, error) {
	if err := p.hook(pl.Code, "prepare"); err != nil {
		return pl, err
	}
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, err
	}
	if err := p.checkConnected(ctx, pl, pay); err != nil {
		return p.stop(ctx, pl, pay, err, "prepare")
	}
	branch, err := p.repos.ResolveRevision(ctx, pl.InstallationID, pl.Repo, pay.App.TargetRevision)
	switch {
	case errors.Is(err, github.ErrNotABranch):
		return p.stop(ctx, pl, pay, refusal(CodeRevisionNotABranch,
			"Application %s/%s deploys targetRevision %q, which is not a branch: a pull request cannot change what it deploys; point the Application at a branch", pay.App.Namespace, pay.App.Name, pay.App.TargetRevision), "prepare")
	case errors.Is(err, github.ErrRevisionNotFound):
		return p.stop(ctx, pl, pay, refusal(CodeRevisionNotFound, "targetRevision %q of Application %s/%s does not exist in %s", pay.App.TargetRevision, pay.App.Namespace, pay.App.Name, pl.Repo), "prepare")
	case err != nil:
		return p.stop(ctx, pl, pay, err, "prepare")
	}
	edits, err := p.prepareChange(ctx, pl, &pay, branch)
	if err != nil {
		return p.stop(ctx, pl, pay, err, "prepare")
	}
	pay.Edits = edits
	pl.BaseBranch, pl.BaseSHA = branch.Name, branch.SHA
	pl.Branch = github.BranchPrefix + pl.Code
	pl.CommitSHA, pl.HeadSHA, pl.CheckRunID, pl.CheckRunURL = "", "", 0, ""

	if err := p.fence(ctx, pl.Code); err != nil {
		return pl, err
	}
	holder, err := p.db.AcquireFileLocks(ctx, pl.Code, pl.Repo, editPaths(edits))
	if err != nil {
		return pl, err
	}
	if holder != "" {
		return p.wait(ctx, pl, pay, holder)
	}
	if err := p.hook(pl.Code, recordHook("prepare")); err != nil {
		return pl, err
	}
	pl.WaitingOn = ""
	saved, err := p.save(ctx, pl, pay, StatusCommitting, "system", "prepare", pay.VerificationResult)
	var held *store.LockHeldError
	if errors.As(err, &held) {
		// The files were taken just above; one lost to another plan since is
		// waited for like any other.
		return p.wait(ctx, pl, pay, held.Holder)
	}
	return saved, err
}

// wait parks pl until holder lets go of a file pl edits; the holder's release
// sends it back to preparing (wakeWaiters).
func (p *Pipeline) wait(ctx context.Context, pl store.Plan, pay Payload, holder string) (store.Plan, error) {
	pl.WaitingOn = holder
	saved, err := p.save(ctx, pl, pay, StatusWaiting, "system", "lock", "waiting for plan "+holder+" on the same file")
	if err != nil {
		return pl, err
	}
	// The holder may have released its locks between our attempt and this save,
	// when nobody was waiting yet: look again so the plan cannot wait forever.
	if locks, err := p.db.FileLocks(ctx, holder); err == nil && len(locks) == 0 {
		saved.WaitingOn = ""
		return p.save(ctx, saved, pay, StatusPreparing, "system", "lock", "plan "+holder+" released its locks")
	}
	return saved, nil
}

// renderApps turns the cluster's Applications that deploy from repo at branch into
// render's view, so an edit that leaks into another app is caught. An app render
// cannot mirror is kept, marked: render refuses only an edit that reaches it. A
// Helm app deploying to the cluster it is read from renders with that cluster's
// capabilities (caps, asked for once it is needed), as Argo CD renders it, and
// one deploying to another cluster the team registered too those of that one
// (registered, see Pipeline.registered); one deploying to any other cluster, or
// whose cluster cannot be asked, renders with Helm's defaults unless it sets its
// own (ClusterCapabilities), and notes says so by app name, for the plan's
// warnings.
func renderApps(apps []argocd.Application, repo, branch string, caps func() (kube.Capabilities, error), registered func(server string) func() (kube.Capabilities, error)) (out []render.Application, notes map[string]string) {
	notes = map[string]string{}
	for _, a := range apps {
		converted := render.FromArgoCD(a, func(src argocd.AppSource) bool { return DeploysFrom(src, repo, branch) })
		if note, _ := ClusterCapabilities(a, converted, DestinationRead(a, caps, registered)); note != "" {
			for _, ra := range converted {
				if ra.SourceType == render.SourceHelm {
					notes[ra.Name] = note
				}
			}
		}
		out = append(out, converted...)
	}
	return out, notes
}

// registered gives, for one plan or view, the capabilities read of the team's
// cluster registered at an Application's destination address, nil when the team
// registered none there (for DestinationRead): each address is looked up once,
// each cluster asked once, from renders on several goroutines.
func (p *Pipeline) registered(ctx context.Context, teamID string) func(server string) func() (kube.Capabilities, error) {
	var mu sync.Mutex
	at := map[string]func() (kube.Capabilities, error){}
	of := map[string]func() (kube.Capabilities, error){}
	return func(server string) func() (kube.Capabilities, error) {
		mu.Lock()
		defer mu.Unlock()
		if read, ok := at[server]; ok {
			return read
		}
		name, ok, err := p.cluster.ClusterByServer(ctx, teamID, server)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("Could not look up the cluster an Application deploys to; it is treated as not registered")
		}
		var read func() (kube.Capabilities, error)
		if ok {
			if read = of[name]; read == nil {
				read = p.capabilities(ctx, clusteraccess.Ref{TeamID: teamID, Name: name})
				of[name] = read
			}
		}
		at[server] = read
		return read
	}
}

// capabilities reads a cluster's capabilities once, when first asked for; a
// failure is logged here, its callers render with Helm's defaults and say so.
func (p *Pipeline) capabilities(ctx context.Context, cluster clusteraccess.Ref) func() (kube.Capabilities, error) {
	return sync.OnceValues(func() (kube.Capabilities, error) {
		caps, err := p.cluster.Capabilities(ctx, cluster)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", cluster.Name).Msg("Could not read the cluster's capabilities; its Helm apps render with Helm's defaults")
		}
		return caps, err
	})
}

// DeploysFrom reports whether a source deploys the tree of repo ("owner/name") at
// branch: such an Application changes when the branch does.
func DeploysFrom(src argocd.AppSource, repo, branch string) bool {
	if src.Chart != "" {
		return false
	}
	r, err := github.ParseRepoURL(src.RepoURL)
	if err != nil || !strings.EqualFold(r.FullName(), repo) {
		return false
	}
	return argocd.DeploysBranch(src.TargetRevision, branch)
}

// prepareChange computes and verifies the plan's edit on branch: the requested
// change, or for a rollback the revert of its plan.
func (p *Pipeline) prepareChange(ctx context.Context, pl store.Plan, pay *Payload, branch github.Branch) ([]StoredEdit, error) {
	if pl.RollbackOf != "" {
		return p.prepareRevert(ctx, pl, pay, branch)
	}
	return p.prepareEdit(ctx, pl, pay, branch)
}

func (p *Pipeline) prepareEdit(ctx context.Context, pl store.Plan, pay *Payload, branch github.Branch) ([]StoredEdit, error) {
	change, err := ChangeOf(pl)
	if err != nil {
		return nil, err
	}
	snap, err := p.repos.Snapshot(ctx, pl.InstallationID, pl.Repo, branch.SHA)
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	apps, err := p.cluster.Applications(ctx, clusterOf(pl))
	if err != nil {
		return nil, fmt.Errorf("list Applications of %s: %w", pl.Cluster, err)
	}
	appKey, rapps, home, err := p.appsToVerify(ctx, pl, pay, apps, branch.Name)
	if err != nil {
		return nil, err
	}
	render.WithRevision(rapps, branch.SHA)
	// The kind as the cluster serves it: render's refusals and diffs name the target
	// as the pull request does.
	req := render.Request{RepoDir: snap.Dir, TreeID: treeID(pl.Repo, branch.SHA), Apps: rapps, App: appKey, Change: change,
		Target: ShownTarget(pl, *pay), Since: p.treeSince(ctx, pl.InstallationID, pl.Repo, branch.Name, branch.SHA)}
	res, err := p.render.Plan(ctx, cache.Commit{Repo: pl.Repo, SHA: branch.SHA}, req)
	var ref *render.Refusal
	if errors.As(err, &ref) {
		return nil, &Error{Code: CodeRefused, Reason: ref.Reason, Details: ref}
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return p.recordVerified(ctx, pl, pay, res, home)
}

// appsToVerify is render's view of the Applications deploying from the plan's
// repository at branch: the plan's cluster's apps (apps), with the plan's own
// Application among them (named by the returned key, and home names them), and
// those of the team's other clusters (what could not be read is kept in
// pay.NotChecked).
func (p *Pipeline) appsToVerify(ctx context.Context, pl store.Plan, pay *Payload, apps []argocd.Application, branch string) (string, []render.Application, map[string]bool, error) {
	appKey := argocd.AppKey{Namespace: pay.App.Namespace, Name: pay.App.Name}.String()
	rapps, notes := renderApps(apps, pl.Repo, branch, p.capabilities(ctx, clusterOf(pl)), p.registered(ctx, pl.TeamID))
	if !containsApp(rapps, appKey) {
		rapps = append(rapps, render.Application{Name: appKey, Path: pay.App.Path, SourceType: render.SourceType(pay.App.SourceType)})
	}
	home := make(map[string]bool, len(rapps))
	for _, a := range rapps {
		home[a.Name] = true
	}
	others, notChecked, err := p.otherClusterApps(ctx, pl, branch, notes)
	if err != nil {
		return "", nil, nil, err
	}
	pay.NotChecked = notChecked
	pay.capabilities = notes
	return appKey, append(rapps, others...), home, nil
}

// recordVerified keeps render's verified result in the payload, sends the changed
// objects of the plan's own cluster (home) to it as a server-side dry-run, and
// returns the edits to commit.
func (p *Pipeline) recordVerified(ctx context.Context, pl store.Plan, pay *Payload, res *render.Result, home map[string]bool) ([]StoredEdit, error) {
	pay.Strategy, pay.GitDiff, pay.ClusterDiff = res.Strategy, res.GitDiff, res.ClusterDiff
	pay.Renamed, pay.Renames = res.Renamed, res.Renames
	pay.Verification = &res.Verification
	pay.Warnings = nil
	for _, w := range res.Warnings {
		pay.Warnings = append(pay.Warnings, w.String())
	}
	for _, v := range res.Verification.Apps {
		if note := pay.capabilities[v.App]; note != "" {
			pay.Warnings = append(pay.Warnings, v.App+": "+note)
		}
	}
	pay.VerificationResult = verificationSummary(res.Verification)

	// The dry-run asks the plan's cluster about its own objects only.
	var objs []map[string]any
	for _, c := range res.Changed {
		if home[c.App] {
			objs = append(objs, c.Object)
		}
	}
	switch {
	case len(objs) == 0:
		pay.ClusterCheck, pay.ClusterCheckNote = ClusterCheckSkipped, "no changed object to send to the cluster"
	default:
		derr := p.cluster.DryRun(ctx, clusterOf(pl), objs)
		var rej *clusteraccess.DryRunRejection
		switch {
		// The cluster's words may quote the objects sent, Secret values included.
		case errors.As(derr, &rej):
			return nil, &Error{Code: CodeClusterRejected, Reason: render.MaskText(res.Changed, rej.Error())}
		case derr != nil:
			pay.ClusterCheck, pay.ClusterCheckNote = ClusterCheckUnreachable, render.MaskText(res.Changed, derr.Error())
		default:
			pay.ClusterCheck, pay.ClusterCheckNote = ClusterCheckPassed, "accepted by a server-side dry-run"
		}
	}
	edits := make([]StoredEdit, len(res.Edits))
	for i, e := range res.Edits {
		edits[i] = StoredEdit{Path: e.Path, Old: e.Old, New: e.New, Created: e.Created}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].Path < edits[j].Path })
	return edits, nil
}

func containsApp(apps []render.Application, name string) bool {
	for _, a := range apps {
		if a.Name == name {
			return true
		}
	}
	return false
}

func verificationSummary(v render.Verification) string {
	if !v.Verified {
		return "not verified"
	}
	var parts []string
	for _, a := range v.Apps {
		parts = append(parts, a.Summary())
	}
	return "verified (" + strings.Join(parts, "; ") + ")"
}

// stepCommit: one commit on the base, the kukie branch, the pull request. Each part
// is recorded before the next, and each adopts what an interrupted earlier attempt
// left on GitHub.
func (p *Pipeline) stepCommit(ctx context.Context, pl store.Plan) (store.Plan, error) {
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, err
	}
	if err := p.checkConnected(ctx, pl, pay); err != nil {
		return p.stop(ctx, pl, pay, err, "commit")
	}
	if pl.CommitSHA == "" {
		if err := p.hook(pl.Code, "commit"); err != nil {
			return pl, err
		}
		if head, found, err := p.repos.BranchHead(ctx, pl.InstallationID, pl.Repo, pl.Branch); err != nil {
			return p.stop(ctx, pl, pay, err, "commit")
		} else if found {
			ci, err := p.repos.GetCommit(ctx, pl.InstallationID, pl.Repo, head)
			if err != nil {
				return p.stop(ctx, pl, pay, err, "commit")
			}
			if len(ci.Parents) == 1 && ci.Parents[0] == pl.BaseSHA && strings.Contains(ci.Message, commitTrailer(pl.Code)) {
				pl.CommitSHA, pl.HeadSHA = head, head
			}
		}
		if pl.CommitSHA == "" {
			files := make([]github.FileChange, len(pay.Edits))
			for i, e := range pay.Edits {
				files[i] = github.FileChange{Path: e.Path, Content: e.New, Delete: e.New == nil && !e.Created}
			}
			if err := p.fence(ctx, pl.Code); err != nil {
				return pl, err
			}
			ci, err := p.repos.CreateCommit(ctx, pl.InstallationID, pl.Repo, pl.BaseSHA, commitMessage(pl, pay), files)
			if err != nil {
				return p.stop(ctx, pl, pay, err, "commit")
			}
			// Built here from the base and the verified edits, so its tree is both. An
			// adopted commit above is compared before its check run says so.
			pl.CommitSHA, pay.VerifiedHead = ci.SHA, ci.SHA
		}
		if err := p.hook(pl.Code, recordHook("commit")); err != nil {
			return pl, err
		}
		if pl, err = p.save(ctx, pl, pay, StatusCommitting, "system", "commit", "commit "+pl.CommitSHA); err != nil {
			return pl, err
		}
	}
	if pl.HeadSHA != pl.CommitSHA {
		if err := p.hook(pl.Code, "branch"); err != nil {
			return pl, err
		}
		if err := p.fence(ctx, pl.Code); err != nil {
			return pl, err
		}
		if err := p.repos.SetBranch(ctx, pl.InstallationID, pl.Repo, pl.Branch, pl.CommitSHA); err != nil {
			return p.stop(ctx, pl, pay, err, "branch")
		}
		if err := p.hook(pl.Code, recordHook("branch")); err != nil {
			return pl, err
		}
		pl.HeadSHA = pl.CommitSHA
		if pl, err = p.save(ctx, pl, pay, StatusCommitting, "system", "branch", pl.Branch+" at "+pl.CommitSHA); err != nil {
			return pl, err
		}
	}
	if err := p.hook(pl.Code, "pull_request"); err != nil {
		return pl, err
	}
	if err := p.fence(ctx, pl.Code); err != nil {
		return pl, err
	}
	pr, err := p.repos.OpenPull(ctx, pl.InstallationID, pl.Repo, github.NewPull{
		Title: PRTitle(pl, pay), Body: PRBody(pl, pay), Head: pl.Branch, Base: pl.BaseBranch,
	})
	if err != nil {
		return p.stop(ctx, pl, pay, err, "pull_request")
	}
	if err := p.hook(pl.Code, recordHook("pull_request")); err != nil {
		return pl, err
	}
	pl.PRNumber, pl.PRURL = pr.Number, pr.URL
	saved, err := p.save(ctx, pl, pay, StatusPROpen, "system", "pull_request", pr.URL)
	if errors.Is(err, store.ErrStale) {
		p.closeUnwantedPull(ctx, pl, pr)
	}
	return saved, err
}

// closeUnwantedPull closes the pull request just opened for a plan that was
// cancelled while it was being opened: the cancel found no pull request to close,
// and one left open could be merged, deploying a change nothing follows. Its branch
// goes with it, as a cancelled plan's does, unless a person pushed to it meanwhile
// (removeBranch). Best effort: a failure is logged, the pull request then left for
// a person to close.
func (p *Pipeline) closeUnwantedPull(ctx context.Context, pl store.Plan, pr github.PullRequest) {
	log := zerolog.Ctx(ctx).With().Str("plan", pl.Code).Int64("pull_request", pr.Number).Logger()
	cur, err := p.db.PlanByCode(ctx, pl.Code)
	if err != nil {
		log.Warn().Err(err).Msg("Pull request opened as its plan moved: the plan could not be read to tell whether it still wants it")
		return
	}
	if Status(cur.Status) != StatusClosed || cur.PRNumber != 0 {
		return
	}
	if err := p.repos.ClosePull(ctx, pl.InstallationID, pl.Repo, pr.Number); err != nil {
		log.Warn().Err(err).Msg("Pull request opened as its plan was cancelled could not be closed")
		return
	}
	msg := fmt.Sprintf("pull request #%d, opened as the plan was cancelled, closed", pr.Number)
	if branch, err := p.removeBranch(ctx, pl, ""); err != nil {
		log.Warn().Err(err).Msg("Branch of a cancelled plan could not be deleted")
	} else if branch != "" {
		msg += "; " + branch
	}
	if _, err := p.update(ctx, pl.Code, func(cur *store.Plan, _ *Payload) (Status, string, string, error) {
		return Status(cur.Status), "pull_request", msg, nil
	}); err != nil {
		log.Warn().Err(err).Msg("Closing the pull request of a cancelled plan could not be recorded")
	}
}

func commitTrailer(code string) string { return "Kukie-Plan: " + code }

func commitMessage(pl store.Plan, pay Payload) string {
	return PRTitle(pl, pay) + "\n\n" + pl.Reason + "\n\nRequested-by: " + pl.RequestedBy + "\n" + commitTrailer(pl.Code) + "\n"
}

// stepCheckRun publishes the verdict on the head commit. A head this plan did not
// build itself (pushed by someone else, or adopted after a restart) is compared with
// the base plus the verified edits first. When the comparison or the publishing fails
// for a reason that passes (GitHub's 5xx, a rate limit, a timeout) the head gets an
// in-progress run saying why, the plan stays open without a recorded run and the
// resume loop tries again; any other failure marks the run action_required and fails
// the plan.
func (p *Pipeline) stepCheckRun(ctx context.Context, pl store.Plan) (store.Plan, error) {
	if err := p.hook(pl.Code, "check_run"); err != nil {
		return pl, err
	}
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, err
	}
	failure, step := "", "check_run"
	if pay.VerifiedHead != pl.HeadSHA {
		if failure, err = p.compareHead(ctx, pl, pay); err != nil {
			return p.checkUnfinished(ctx, pl, pay, err)
		}
		pay, step = withComparison(pl, pay, failure), "reverify"
	}
	report := p.CheckReport(pl, pay, failure)
	if err := p.fence(ctx, pl.Code); err != nil {
		return pl, err
	}
	ref, err := p.publishCheck(ctx, pl, report)
	if err != nil {
		return p.checkUnfinished(ctx, pl, pay, err)
	}
	if err := p.hook(pl.Code, recordHook("check_run")); err != nil {
		return pl, err
	}
	pl.CheckRunID, pl.CheckRunURL = ref.ID, ref.URL
	pay.CheckConclusion = report.Conclusion
	p.checkPolicy(ctx, pl, pay)
	return p.save(ctx, pl, pay, StatusPROpen, "system", step, "check run "+report.Conclusion)
}

// checkPolicy publishes kukie/policy on pl's head with the plan's dry-run. It is
// best effort: the plan's own verdict is kukie/render, and a policy run that could
// not be published is published again by the next re-verify or re-run.
func (p *Pipeline) checkPolicy(ctx context.Context, pl store.Plan, pay Payload) {
	if p.policy == nil || pay.App == nil {
		return
	}
	repo, err := github.ParseRepoURL(pay.App.RepoURL)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Msg("No policy check: the Application's repository URL does not parse")
		return
	}
	h := PolicyHead{InstallationID: pl.InstallationID, Repo: pl.Repo, RepoURL: repo.URL(), BaseBranch: pl.BaseBranch,
		BaseSHA: pl.BaseSHA, HeadSHA: pl.HeadSHA, Key: pl.Code}
	switch pay.ClusterCheck {
	case ClusterCheckPassed:
		h.DryRun = policy.DryRun{Outcome: policy.DryRunPassed, Note: pay.ClusterCheckNote}
	case ClusterCheckUnreachable:
		h.DryRun = policy.DryRun{Outcome: policy.DryRunUnreachable, Note: pay.ClusterCheckNote}
	case ClusterCheckSkipped:
		h.DryRun = policy.DryRun{Outcome: policy.DryRunSkipped, Note: pay.ClusterCheckNote}
	}
	if err := p.policy.CheckPolicy(ctx, h); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Str("head", pl.HeadSHA).Msg("Could not publish the policy check")
	}
}

// withComparison records the outcome of a completed comparison of pl's head.
func withComparison(pl store.Plan, pay Payload, failure string) Payload {
	if failure != "" {
		pay.VerifiedHead = ""
		pay.VerificationResult = "not verified: " + failure
		return pay
	}
	pay.VerifiedHead = pl.HeadSHA
	if strings.HasPrefix(pay.VerificationResult, "not verified") && pay.Verification != nil && pay.BaseRefusal == "" {
		pay.VerificationResult = verificationSummary(*pay.Verification) // an earlier head failed; this one matches
	}
	return pay
}

// checkUnfinished handles a check run step that could not say anything true about
// the head: the head gets a run without success saying why (best effort: GitHub may be
// what failed), and the plan is retried later or, for a failure that repeats, fails.
func (p *Pipeline) checkUnfinished(ctx context.Context, pl store.Plan, pay Payload, cause error) (store.Plan, error) {
	if errors.Is(cause, errStopped) || ctx.Err() != nil {
		return pl, errStopped
	}
	transient := github.Transient(cause)
	p.publishUnverified(ctx, pl, pay, cause, transient)
	if saved, err, limited := p.waitForRateLimit(ctx, pl, pay, cause, "check_run"); limited {
		return saved, err
	}
	if transient {
		return pl, fmt.Errorf("check run of plan %s on %s, retried later: %w", pl.Code, pl.HeadSHA, cause)
	}
	return p.stop(ctx, pl, pay, cause, "check_run")
}

// publishUnverified puts a run on pl's head that does not conclude success, unless the
// head is verified already (its published verdict stands). Its id is not recorded:
// the plan's run counts as published only with a verdict, and the next publish adopts
// this run by the plan's external id.
func (p *Pipeline) publishUnverified(ctx context.Context, pl store.Plan, pay Payload, cause error, retrying bool) {
	if pay.VerifiedHead == pl.HeadSHA && pl.CheckRunID != 0 {
		return
	}
	if p.fence(ctx, pl.Code) != nil {
		return // the claim was lost: the plan's new holder speaks for the head
	}
	report := p.unverifiedReport(pl, cause, retrying)
	if _, err := p.repos.PublishCheckRun(ctx, pl.InstallationID, pl.Repo, pl.HeadSHA, 0, report); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Str("head", pl.HeadSHA).Msg("Could not mark the head as not verified")
	}
}

// publishCheck publishes report as the plan's run on its head.
func (p *Pipeline) publishCheck(ctx context.Context, pl store.Plan, report github.CheckReport) (github.CheckRunRef, error) {
	ref, err := p.repos.PublishCheckRun(ctx, pl.InstallationID, pl.Repo, pl.HeadSHA, pl.CheckRunID, report)
	if err != nil {
		return ref, fmt.Errorf("publish check run of plan %s on %s: %w", pl.Code, pl.HeadSHA, err)
	}
	return ref, nil
}

// stepStartDeploy: the change is merged; follow it until it runs.
func (p *Pipeline) stepStartDeploy(ctx context.Context, pl store.Plan) (store.Plan, error) {
	pay, err := decodePayload(pl)
	if err != nil {
		return pl, err
	}
	pl.DeployDeadline = time.Now().Add(p.cfg.DeployTimeout)
	pay.Deployment = &Deployment{State: DeployPending}
	return p.save(ctx, pl, pay, StatusDeploying, "system", "deploy", "following Argo CD")
}
