package prcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// Head is one commit to check: a pull request's head, or a merge group's.
type Head struct {
	InstallationID int64
	// Repo is the base repository, "owner/name"; RepoURL its canonical URL, as
	// connections name it.
	Repo    string
	RepoURL string
	// BaseBranch is the branch the change goes into; Applications deploying it are
	// the ones checked.
	BaseBranch string
	BaseSHA    string
	HeadSHA    string
	// Key names what the head belongs to ("pull/12", "merge_group/<ref>"). It is the
	// check run's external id, and a newer check of the same key supersedes a
	// running one.
	Key string
	// Fork is set for a pull request whose head is another repository's branch:
	// its objects are never sent to a cluster (the policy's dry-run rule).
	Fork bool
}

// GitHub is what a check reads from and writes to GitHub (github.Repos).
type GitHub interface {
	Compare(ctx context.Context, inst int64, repo, base, head string) (github.Comparison, error)
	Snapshot(ctx context.Context, inst int64, repo, sha string) (*cache.Snapshot, error)
	PublishCheckRun(ctx context.Context, inst int64, repo, headSHA string, id int64, r github.CheckReport) (github.CheckRunRef, error)
	// DefaultBranchFile reads the repository's policy (github.DefaultBranchFile).
	DefaultBranchFile(ctx context.Context, inst int64, repo, name string, maxBytes int) ([]byte, string, bool, error)
	// GetPull reads a pull request, to tell whether a head is still its head.
	GetPull(ctx context.Context, inst int64, repo string, number int64) (github.PullRequest, error)
	// BranchHead reads where a base branch is now, to judge a move no push told.
	BranchHead(ctx context.Context, inst int64, repo, branch string) (sha string, found bool, err error)
}

// Connections names the team that the App's installation belongs to and that
// team's clusters a repository (canonical URL) is connected to.
type Connections interface {
	ConnectedClusters(ctx context.Context, installationID int64, repoURL string) (teamID string, clusters []string, err error)
}

// Applications lists the Argo CD Applications of a team's cluster.
type Applications interface {
	Applications(ctx context.Context, teamID, cluster string) ([]argocd.Application, error)
}

// Capabilities reads what a team's cluster tells the Helm charts of the
// Applications deploying to it (.Capabilities: its Kubernetes version and API
// versions), from the cluster's discovery cache.
type Capabilities interface {
	Capabilities(ctx context.Context, teamID, cluster string) (kube.Capabilities, error)
}

// Destinations finds the team's cluster registered at an Application's
// destination address (clusteraccess.Clusters.ClusterByServer); ok is false
// when the team registered none there.
type Destinations interface {
	ClusterByServer(ctx context.Context, teamID, server string) (name string, ok bool, err error)
}

// errNoCapabilities is the read of a Checker without Capabilities.
var errNoCapabilities = errors.New("the check reads no cluster capabilities")

// Records keeps the checks in the store every replica shares: what each computed,
// for its page, and which check of a key is current, so a newer head supersedes an
// older check whichever replica runs it. *store.DB implements it.
type Records interface {
	BeginPullCheck(ctx context.Context, c store.PullCheck) (store.PullCheck, error)
	PullCheckHolder(ctx context.Context, id string) (holds bool, by string, err error)
	ReleasePullCheckKey(ctx context.Context, repo, key string) error
	SetPullCheckRun(ctx context.Context, id string, checkRunID int64) error
	SetPullCheckPolicyRun(ctx context.Context, id string, checkRunID int64) error
	FinishPullCheck(ctx context.Context, id, state, conclusion, note string, result json.RawMessage) error
	// The checks a push to their base may have made stale (BaseMoved).
	CurrentPullChecksOnBase(ctx context.Context, repo, branch, sha string, policy bool, limit int) ([]store.PullCheck, error)
	// The checks into other branches a push of the policy file may have made stale.
	CurrentPullChecksOffBase(ctx context.Context, repo, branch string, policy bool, limit int) ([]store.PullCheck, error)
	PullCheckByID(ctx context.Context, id string) (store.PullCheck, error)
	PullCheckMarks(ctx context.Context, id string) (store.PullCheck, error)
	MarkPullCheckBaseMoved(ctx context.Context, id, sha string) (bool, error)
	MarkPullCheckPolicyMoved(ctx context.Context, id, sha string) (bool, error)
	MarkPullCheckMovedWhileRunning(ctx context.Context, id, sha string) (bool, error)
	MarkPullCheckPolicyMovedWhileRunning(ctx context.Context, id, sha string) (bool, error)
	SetPullCheckMovesPending(ctx context.Context, id string, pending bool) error
}

// DefaultSupersedePoll is how often a running check asks Records whether a newer
// one took its key on another replica: a superseded check stops rendering within
// about this long. Whatever the poll, a check asks once more before it publishes.
const DefaultSupersedePoll = time.Second

// Checker runs the checks. Its zero value is not usable: set GitHub, Connections and
// Applications.
type Checker struct {
	GitHub       GitHub
	Connections  Connections
	Applications Applications
	// Capabilities gives the Helm apps deploying to the cluster they are read
	// from that cluster's capabilities, as Argo CD renders them; without it, or
	// when it fails, they render with Helm's defaults and the check says so.
	Capabilities Capabilities
	// Destinations, when set, gives an Application deploying to another cluster
	// than the one it is read from, which the team registered too at that
	// address, that cluster's capabilities and dry-run; without it, or for
	// another destination, it renders with Helm's defaults and is not dry-run.
	Destinations Destinations
	// Records, when set, keeps every check and its result, and supersedes checks
	// across replicas; without it a newer head supersedes only checks running in
	// this process, and checks have no page.
	Records Records
	// PublicURL is the service's public URL, the base of each check run's details
	// link (the check's page); without it (or Records) a run has no details link.
	PublicURL string
	// SupersedePoll is DefaultSupersedePoll when 0.
	SupersedePoll time.Duration
	// Workers bounds the Applications rendered at once; 0 means the number of cores.
	Workers int
	// DryRun, when set, dry-runs the changed objects of a pull request from the
	// repository itself against their clusters when the policy's dry_run rule is
	// on (never a fork's, never a merge group's); without it the rule says it
	// was not run.
	DryRun DryRunner

	mu      sync.Mutex
	running map[string]*run
}

// run is a check in progress.
type run struct {
	sha    string
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// supersededError is the cause a check stops with when a newer one takes its key.
type supersededError struct{ by string }

// closedBy is supersededError's by for a pull request that closed.
const closedBy = "closed"

func (e supersededError) Error() string {
	if e.by == closedBy {
		return "the pull request was closed"
	}
	return "superseded by a newer check of " + short(e.by)
}

// publishTimeout bounds the last word of a check that was stopped.
const publishTimeout = 30 * time.Second

// Check checks h and publishes the kukie/render check run on its head. A
// repository no cluster of the team is connected to gets no check run. A check
// superseded by a newer one of the same key returns nil once it has stopped, and
// so does a pull request head that is no longer the pull request's head.
func (c *Checker) Check(ctx context.Context, h Head) error {
	pr, stale, err := c.stale(ctx, h)
	if err != nil || stale {
		return err
	}
	ctx, me, end, err := c.begin(ctx, h)
	if err != nil {
		return err
	}
	defer end()
	err = c.check(ctx, h, pr, me)
	var sup supersededError
	if errors.As(context.Cause(ctx), &sup) {
		zerolog.Ctx(ctx).Info().Str("key", h.Key).Str("head", h.HeadSHA).Str("by", sup.by).Msg("Check superseded by a newer head")
		return nil
	}
	return err
}

// stale reports whether h is a pull request head that GitHub no longer names the
// pull request's head, or whose pull request closed: a late or repeated delivery of
// an older push. Taking the key for it would stop the current head's check and
// leave that head cancelled with nothing to check it again. A merge group's head is
// never stale. A pull request GitHub cannot read for good (gone, refused) leaves h
// checked as delivered; a transient failure is returned, for the delivery to be
// retried. The pull request read is returned (nil for a merge group, or when it
// could not be read).
func (c *Checker) stale(ctx context.Context, h Head) (*github.PullRequest, bool, error) {
	number, ok := pullNumber(h.Key)
	if !ok {
		return nil, false, nil
	}
	pr, err := c.GitHub.GetPull(ctx, h.InstallationID, h.Repo, number)
	if err != nil {
		if ctx.Err() != nil || github.Transient(err) {
			return nil, false, fmt.Errorf("read pull request #%d of %s: %w", number, h.Repo, err)
		}
		zerolog.Ctx(ctx).Warn().Err(err).Str("key", h.Key).Str("head", h.HeadSHA).Msg("Could not read the pull request; its head is checked as delivered")
		return nil, false, nil
	}
	if pr.State == "open" && pr.HeadSHA == h.HeadSHA {
		return &pr, false, nil
	}
	zerolog.Ctx(ctx).Info().Str("key", h.Key).Str("head", h.HeadSHA).Str("current", pr.HeadSHA).Str("state", pr.State).
		Msg("Not checking a head that is no longer the pull request's: a newer head, or the close, owns the check")
	return nil, true, nil
}

// pullNumber is the pull request number of a "pull/<n>" key.
func pullNumber(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, "pull/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// runningKey names h's key in this process: a key is a pull request's number, so
// the repository is part of it.
func runningKey(repo, key string) string { return repo + " " + key }

// begin takes h's key in this process: a check of the key still running here is
// cancelled and waited for, so two checks of one key never publish at once and the
// older never publishes after the newer. Records does the same across replicas.
func (c *Checker) begin(ctx context.Context, h Head) (context.Context, *run, func(), error) {
	ctx, cancel := context.WithCancelCause(ctx)
	me := &run{sha: h.HeadSHA, cancel: cancel, done: make(chan struct{})}
	key := runningKey(h.Repo, h.Key)
	c.mu.Lock()
	if c.running == nil {
		c.running = map[string]*run{}
	}
	prev := c.running[key]
	c.running[key] = me
	c.mu.Unlock()
	if prev != nil {
		prev.cancel(supersededError{by: h.HeadSHA})
		select {
		case <-prev.done:
		case <-ctx.Done():
			cancel(nil)
			close(me.done)
			return nil, nil, nil, ctx.Err()
		}
	}
	return ctx, me, func() {
		c.mu.Lock()
		if c.running[key] == me {
			delete(c.running, key)
		}
		c.mu.Unlock()
		cancel(nil)
		close(me.done)
	}, nil
}

// Cancel stops a check of repo's key (a pull request that closed), here or on
// another replica; it says so on its head.
func (c *Checker) Cancel(ctx context.Context, repo, key string) error {
	c.mu.Lock()
	r := c.running[runningKey(repo, key)]
	c.mu.Unlock()
	if r != nil {
		r.cancel(supersededError{by: closedBy})
	}
	if c.Records == nil {
		return nil
	}
	return c.Records.ReleasePullCheckKey(ctx, repo, key)
}

func (c *Checker) check(ctx context.Context, h Head, pr *github.PullRequest, me *run) error {
	team, clusters, err := c.Connections.ConnectedClusters(ctx, h.InstallationID, h.RepoURL)
	if err != nil || len(clusters) == 0 {
		return err
	}
	policyBranch, policySHA := c.policySince(ctx, h, pr)
	pol, err := c.readPolicy(ctx, h)
	if err != nil {
		return err
	}
	if pol.DefaultBranch != policyBranch {
		policySHA = ""
	}
	var rec store.PullCheck
	if c.Records != nil {
		if rec, err = c.Records.BeginPullCheck(ctx, store.PullCheck{InstallationID: h.InstallationID, Repo: h.Repo, RepoURL: h.RepoURL,
			Key: h.Key, BaseBranch: h.BaseBranch, BaseSHA: h.BaseSHA, HeadSHA: h.HeadSHA, PolicySHA: policySHA}); err != nil {
			return err
		}
		defer c.watch(ctx, rec.ID, me.cancel)()
	}
	details := CheckURL(c.PublicURL, rec.ID)
	ref, err := c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, 0, github.CheckReport{
		ExternalID: h.Key, DetailsURL: details, Title: "Rendering the Applications this change reaches",
		Summary: renderingSummary(h)})
	if err != nil {
		c.notStarted(ctx, rec)
		return err
	}
	if rec.ID != "" {
		if err := c.Records.SetPullCheckRun(ctx, rec.ID, ref.ID); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("check", rec.ID).Msg("Could not record the check run of a check")
		}
	}
	runs := []startedRun{{github.CheckRunName, ref.ID}}
	polRef, err := c.startPolicy(ctx, h, pol, policyURL(details))
	if err != nil {
		c.notStarted(ctx, rec)
		return err
	}
	runs = append(runs, startedRun{github.PolicyCheckRunName, polRef.ID})
	if rec.ID != "" {
		if err := c.Records.SetPullCheckPolicyRun(ctx, rec.ID, polRef.ID); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("check", rec.ID).Msg("Could not record the policy run of a check; a base move will not mark it")
		}
	}
	var dry DryRunner
	if pol.Config != nil && pol.Config.Rules.DryRun.Level != policy.LevelOff {
		if pol.DryRunAbsent = c.dryRunRefusal(h, pr); pol.DryRunAbsent == "" {
			dry = c.DryRun
		}
	}
	rep, err := c.evaluate(ctx, h, team, clusters, pol.Config, false, dry)
	if err == nil && ctx.Err() == nil {
		// The last word: a newer head may have taken the key on another replica
		// since the last poll.
		if by, ok := c.supersededIn(ctx, rec.ID); ok {
			me.cancel(supersededError{by: by})
		}
	}
	if ctx.Err() != nil {
		c.stopped(ctx, h, rec, runs...)
		return ctx.Err()
	}
	if errors.Is(err, cache.ErrArchiveTooLarge) {
		// The repository's own content: another try downloads the same archive.
		reason := fmt.Sprintf("The repository cannot be checked, nothing was rendered: %v.", err)
		c.finish(ctx, rec, store.PullCheckCompleted, github.ConclusionFailure, reason, nil)
		c.conclude(ctx, h, rec, runs, github.ConclusionFailure, "Repository over the service's limits", reason)
		return nil
	}
	if err != nil {
		c.finish(ctx, rec, store.PullCheckFailed, "", "The check could not be completed; the service retries it.", nil)
		return err
	}
	report := rep.checkReport(h)
	report.DetailsURL = details
	rep.policyOutcome(pol)
	if dry != nil {
		rep.dryRunOutcome(pol)
	}
	// Recorded first, so the details links show the result as soon as GitHub
	// shows the runs.
	res := rep.result()
	res.Policy = policyResult(pol)
	result, err := res.encode()
	if err != nil {
		return err
	}
	c.finish(ctx, rec, store.PullCheckCompleted, report.Conclusion, "", result)
	if _, err := c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, ref.ID, report); err != nil {
		c.finish(ctx, rec, store.PullCheckFailed, "", "The check's outcome could not be published on GitHub.", nil)
		return err
	}
	polReport := pol.CheckReport(h.Key)
	polReport.DetailsURL = policyURL(details)
	if _, err = c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, polRef.ID, polReport); err != nil {
		return err
	}
	c.movedWhileRunning(ctx, rec.ID)
	return nil
}

// policyURL is the kukie/policy run's details link: the check's page at its
// findings; "" when the check has no page.
func policyURL(checkURL string) string {
	if checkURL == "" {
		return ""
	}
	return checkURL + PolicyAnchor
}

// notStarted records a check whose runs could not be published: superseded while
// it started, or failed.
func (c *Checker) notStarted(ctx context.Context, rec store.PullCheck) {
	var sup supersededError
	if errors.As(context.Cause(ctx), &sup) {
		c.finish(ctx, rec, store.PullCheckSuperseded, "", "A newer check took over before this one started.", nil)
		return
	}
	c.finish(ctx, rec, store.PullCheckFailed, "", "The check run could not be published on GitHub.", nil)
}

// startedRun is a check run published in progress.
type startedRun struct {
	name string
	id   int64
}

// watch cancels the check id with supersededError once Records says a newer check
// took its key, asking every SupersedePoll, until the returned stop is called.
func (c *Checker) watch(ctx context.Context, id string, cancel context.CancelCauseFunc) (stop func()) {
	ctx, end := context.WithCancel(ctx)
	done := make(chan struct{})
	poll := c.SupersedePoll
	if poll <= 0 {
		poll = DefaultSupersedePoll
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if by, ok := c.supersededIn(ctx, id); ok {
				cancel(supersededError{by: by})
				return
			}
		}
	}()
	return func() { end(); <-done }
}

// supersededIn reports whether a newer check took the key of the check id, and
// the head it checks. A store that cannot answer supersedes nothing: the check
// publishes on its own head, which is never another's.
func (c *Checker) supersededIn(ctx context.Context, id string) (by string, superseded bool) {
	if id == "" {
		return "", false
	}
	holds, by, err := c.Records.PullCheckHolder(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("check", id).Msg("Could not ask whether a newer check superseded this one")
		}
		return "", false
	}
	if holds {
		return "", false
	}
	if by == "" {
		by = closedBy
	}
	return by, true
}

// finish records how the check rec ended; a check without a record has nothing
// to record.
func (c *Checker) finish(ctx context.Context, rec store.PullCheck, state, conclusion, note string, result json.RawMessage) {
	if rec.ID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := c.Records.FinishPullCheck(ctx, rec.ID, state, conclusion, note, result); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("check", rec.ID).Msg("Could not record how a check ended")
	}
}

// stopped concludes the runs of a check that was stopped, on the check's own
// head, unless a newer check of the same head took them over.
func (c *Checker) stopped(ctx context.Context, h Head, rec store.PullCheck, runs ...startedRun) {
	var sup supersededError
	if !errors.As(context.Cause(ctx), &sup) {
		c.finish(ctx, rec, store.PullCheckFailed, "", "The check was stopped before it completed.", nil)
		return
	}
	reason := "A newer commit (" + short(sup.by) + ") was pushed; it is checked instead."
	if sup.by == closedBy {
		reason = "The pull request was closed."
	}
	if sup.by == h.HeadSHA {
		c.finish(ctx, rec, store.PullCheckSuperseded, "", "A newer check of the same commit took over.", nil)
		return
	}
	c.finish(ctx, rec, store.PullCheckSuperseded, github.ConclusionCancelled, reason, nil)
	c.conclude(ctx, h, rec, runs, github.ConclusionCancelled, "Superseded", reason)
}

// conclude publishes the same conclusion on each of a check's runs, which did
// not get a report of their own.
func (c *Checker) conclude(ctx context.Context, h Head, rec store.PullCheck, runs []startedRun, conclusion, title, summary string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	for _, r := range runs {
		report := github.CheckReport{Name: r.name, ExternalID: h.Key, Conclusion: conclusion, Title: title, Summary: summary}
		switch r.name {
		case github.CheckRunName:
			report.DetailsURL = CheckURL(c.PublicURL, rec.ID)
		case github.PolicyCheckRunName:
			report.DetailsURL = policyURL(CheckURL(c.PublicURL, rec.ID))
		}
		if _, err := c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, r.id, report); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("head", h.HeadSHA).Str("run", r.name).Str("conclusion", conclusion).Msg("Could not conclude a check run")
		}
	}
}

// appInfo is what the report says of an Application besides its render.
type appInfo struct {
	cluster string
	level   argocd.Level
	// destination is the registered cluster the app deploys to: cluster when it
	// deploys in-cluster, the team's cluster at its destination's address, or
	// "" when the team registered none there.
	destination string
	// capabilities says why a Helm app renders with Helm's default capabilities
	// instead of its cluster's ("" when it does not).
	capabilities string
}

// evaluate renders what the change reaches.
// With cfg's rules on, each app's head render is also checked against them; with
// headOnly, the base is not rendered (the policy needs the head alone). With dry,
// each app's added and modified objects are dry-run against its cluster (within
// the check's bounds) and the refusals are findings of the dry_run rule.
func (c *Checker) evaluate(ctx context.Context, h Head, team string, clusters []string, cfg *policy.Config, headOnly bool, dry DryRunner) (*report, error) {
	rep := &report{repo: h.Repo, branch: h.BaseBranch}
	cmp, err := c.GitHub.Compare(ctx, h.InstallationID, h.Repo, h.BaseSHA, h.HeadSHA)
	if err != nil {
		return nil, err
	}
	rep.files = cmp.Files
	rep.incomplete = !cmp.Complete
	base := cmp.MergeBase
	if base == "" {
		base = h.BaseSHA
	}
	apps, info := c.apps(ctx, h, team, clusters, rep)
	if len(apps) == 0 {
		return rep, nil
	}
	rep.deploying = len(apps)
	var files []string
	for _, f := range cmp.Files {
		files = append(files, f.Path)
		if f.PreviousPath != "" {
			files = append(files, f.PreviousPath)
		}
	}
	baseSnap, err := c.GitHub.Snapshot(ctx, h.InstallationID, h.Repo, base)
	if err != nil {
		return nil, err
	}
	defer baseSnap.Release()
	var reached []render.Reached
	if cmp.Complete {
		if reached, err = render.Affected(ctx, baseSnap.Dir, h.Repo+"@"+base, apps, files); err != nil {
			return nil, fmt.Errorf("find the Applications the change reaches: %w", err)
		}
	} else {
		// GitHub listed only part of the change: every app may be reached.
		for _, a := range apps {
			reached = append(reached, render.Reached{App: a})
		}
	}
	if len(reached) == 0 {
		return rep, nil
	}
	headDir, releaseHead, err := c.headTree(ctx, h, baseSnap.Dir, cmp)
	if err != nil {
		return nil, err
	}
	defer releaseHead()
	var pc *policyCheck
	if cfg != nil && cfg.Enabled() {
		// The policy reads manifests to point at their lines, confined to the tree.
		root, err := os.OpenRoot(headDir)
		if err != nil {
			return nil, fmt.Errorf("open the head tree: %w", err)
		}
		defer root.Close()
		pc = &policyCheck{cfg: cfg, fsys: root.FS()}
		if dry != nil && !headOnly {
			pc.dryRun = newDryRunCheck(ctx, dry, team)
			defer pc.dryRun.stop()
		}
	}
	rep.apps = make([]appResult, len(reached))
	workers := c.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(reached)) {
		wg.Go(func() {
			for i := range next {
				r := reached[i]
				rep.apps[i] = compareApp(ctx, baseSnap.Dir, headDir, r, info[r.App.Name], pc, headOnly)
			}
		})
	}
	for i := range reached {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return rep, ctx.Err()
}

// apps lists render's view of the Applications of the team's clusters that
// deploy from the repository at the base branch, each named "<app> (cluster
// <name>)"; clusters that cannot be read are noted in rep.
func (c *Checker) apps(ctx context.Context, h Head, team string, clusters []string, rep *report) ([]render.Application, map[string]appInfo) {
	sort.Strings(clusters)
	type read struct {
		apps []argocd.Application
		err  error
	}
	reads := make([]read, len(clusters))
	var wg sync.WaitGroup
	for i, name := range clusters {
		wg.Go(func() { reads[i].apps, reads[i].err = c.Applications.Applications(ctx, team, name) })
	}
	wg.Wait()
	var out []render.Application
	info := map[string]appInfo{}
	// Capabilities are asked once per cluster and check, when a Helm app first
	// needs them; destinations are looked up once per address and check.
	capsOf := map[string]func() (kube.Capabilities, error){}
	capsRead := func(name string) func() (kube.Capabilities, error) {
		if read, ok := capsOf[name]; ok {
			return read
		}
		read := sync.OnceValues(func() (kube.Capabilities, error) {
			if c.Capabilities == nil {
				return kube.Capabilities{}, errNoCapabilities
			}
			caps, err := c.Capabilities.Capabilities(ctx, team, name)
			if err != nil {
				zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", name).Msg("Could not read the cluster's capabilities; its Helm apps render with Helm's defaults")
			}
			return caps, err
		})
		capsOf[name] = read
		return read
	}
	registeredAt := map[string]string{}
	registered := func(server string) string {
		if name, ok := registeredAt[server]; ok || c.Destinations == nil {
			return name
		}
		name, ok, err := c.Destinations.ClusterByServer(ctx, team, server)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("Could not look up the cluster an Application deploys to; it is treated as not registered")
		}
		if !ok {
			name = ""
		}
		registeredAt[server] = name
		return name
	}
	for i, name := range clusters {
		if err := reads[i].err; err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", name).Msg("Could not read the Applications of a cluster; the change is not checked there")
			rep.notChecked = append(rep.notChecked, fmt.Sprintf("cluster %s: its Applications could not be read", name))
			continue
		}
		for _, a := range reads[i].apps {
			converted := render.FromArgoCD(a, func(src argocd.AppSource) bool { return plan.DeploysFrom(src, h.Repo, h.BaseBranch) })
			dest := ""
			read := plan.DestinationRead(a, capsRead(name), func(server string) func() (kube.Capabilities, error) {
				if dest = registered(server); dest == "" {
					return nil
				}
				return capsRead(dest)
			})
			if a.Spec.Destination.InCluster() {
				dest = name
			}
			note, _ := plan.ClusterCapabilities(a, converted, read)
			for _, ra := range converted {
				ra.Name += " (cluster " + name + ")"
				in := appInfo{cluster: name, level: a.Level(), destination: dest}
				if ra.SourceType == render.SourceHelm {
					in.capabilities = note
				}
				info[ra.Name] = in
				out = append(out, ra)
			}
		}
	}
	return out, info
}

// compareApp renders one reached Application at the head and, unless headOnly, at
// the base; pc, when set, checks the head's objects against the policy, so only
// the findings outlive the render.
func compareApp(ctx context.Context, baseDir, headDir string, r render.Reached, info appInfo, pc *policyCheck, headOnly bool) appResult {
	res := appResult{name: r.App.Name, cluster: info.cluster, level: info.level, files: r.Files, capabilities: info.capabilities}
	if r.App.Unsupported != "" {
		res.notChecked = r.App.Unsupported
		return res
	}
	after, err := render.Render(ctx, headDir, r.App)
	if err != nil {
		res.failed = reasonOf(err)
		return res
	}
	if pc != nil {
		res.findings = pc.cfg.Evaluate(policy.App{Name: r.App.Name, Namespace: r.App.Namespace, Objects: after}, pc.fsys)
	}
	if headOnly {
		return res
	}
	before, err := render.Render(ctx, baseDir, r.App)
	if err != nil {
		// It did not render before and does now: every object is new to compare.
		res.brokenBefore = reasonOf(err)
		before = nil
	}
	diffs, err := render.CompareRenders(r.App, before, after)
	if err != nil {
		res.failed = reasonOf(err)
		return res
	}
	res.diffs = diffs
	switch {
	case pc == nil || pc.dryRun == nil:
	case info.destination == "":
		// Sent to the cluster the Application is read from, another destination's
		// objects would be asked of the wrong API server.
		res.dryRun.elsewhere = len(changedObjects(r.App, after, diffs)) > 0
	default:
		res.dryRun = pc.dryRun.run(r.App, info.destination, after, diffs)
		res.findings = append(res.findings, pc.cfg.DryRunFindings(policy.App{Name: r.App.Name, Namespace: r.App.Namespace}, pc.fsys, res.dryRun.refusals)...)
	}
	return res
}

// reasonOf is what a check run says of a failed render: a refusal's reason.
func reasonOf(err error) string {
	var ref *render.Refusal
	if errors.As(err, &ref) {
		return ref.Reason
	}
	return err.Error()
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
