package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// Defaults of Config.
const (
	DefaultClaimTTL      = 2 * time.Minute
	DefaultDeployTimeout = 15 * time.Minute
	DefaultDeployPoll    = 5 * time.Second
	// Three more tries, 2, 4 and 8 s apart: GitHub's 5xx and dropped connections
	// mostly pass within seconds, and a failure that lasts longer is worth a
	// person's look.
	DefaultTransientRetries = 3
	DefaultTransientBackoff = 2 * time.Second
	// An unchanged pull request costs a 304, which GitHub does not count against
	// the rate limit; a missed event is made up for within minutes.
	DefaultPullSweepInterval = 5 * time.Minute
)

// Config tunes the pipeline.
type Config struct {
	// WorkerID names this process in plan claims; unique per replica.
	WorkerID string
	// ClaimTTL is how long a claim on a plan lasts without renewal; a crashed
	// worker's plans are resumed by others after it.
	ClaimTTL time.Duration
	// DeployTimeout bounds how long a merged change may take to be running.
	DeployTimeout time.Duration
	// DeployPoll is the interval between deployment checks of what cannot be
	// watched (and the retry of a check whose read failed).
	DeployPoll time.Duration
	// PublicURL is the service's base URL, for details links in check runs.
	PublicURL string
	// BotLogin is the App's own login ("<slug>[bot]"); its pushes are not "someone else".
	BotLogin string
	// TransientRetries is how many times a step that failed transiently (a 5xx of GitHub, no
	// answer in time, a broken connection) is taken again by itself before the plan
	// fails and waits for an operator's retry; TransientBackoff is the first wait
	// between tries, doubled after each (see retryTransient). A negative
	// TransientRetries retries nothing.
	TransientRetries int
	TransientBackoff time.Duration
	// PullSweepInterval is how often the pull request of each open plan is read
	// by one of the replicas (see SweepPulls), for the events GitHub never
	// delivered.
	PullSweepInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.WorkerID == "" {
		c.WorkerID = "worker-" + newCode()
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.DeployTimeout <= 0 {
		c.DeployTimeout = DefaultDeployTimeout
	}
	if c.DeployPoll <= 0 {
		c.DeployPoll = DefaultDeployPoll
	}
	if c.TransientRetries == 0 {
		c.TransientRetries = DefaultTransientRetries
	}
	if c.TransientBackoff <= 0 {
		c.TransientBackoff = DefaultTransientBackoff
	}
	if c.PullSweepInterval <= 0 {
		c.PullSweepInterval = DefaultPullSweepInterval
	}
	return c
}

// Hooks let tests stop the pipeline between steps, the way a crash would.
type Hooks struct {
	// BeforeStep is called at each step boundary: before each step (decide, prepare,
	// commit, branch, pull_request, check_run) and between a step's write to GitHub
	// and its record in the store (the step name with the prefix "record_"), the
	// window in which a crash leaves GitHub ahead of the store. A non-nil error stops
	// the run at once with nothing recorded, as if the process had died there.
	BeforeStep func(code, step string) error
}

// recordHook names the boundary between a step's write to GitHub and its record.
func recordHook(step string) string { return "record_" + step }

// Deps are what a pipeline works through. The pipeline holds no client, credential
// or cache of its own: each is built by the service's wiring and handed in here.
type Deps struct {
	// Store keeps the plans, their claims, locks and history.
	Store *store.DB
	// Clusters reads (and dry-runs against) the team's clusters.
	Clusters Cluster
	// Renderer locates, edits and verifies changes.
	Renderer Renderer
	// Repos is every read and write on GitHub.
	Repos Repos
	// Connections says through which installation a repository is reached.
	Connections Connections
	// Policy, when set, publishes kukie/policy on each head the pipeline publishes
	// kukie/render on.
	Policy Policy
	// Observer is told of transitions, steps, refusals and deploys, for metrics;
	// nil observes nothing.
	Observer Observer
	// Hooks stop the pipeline between steps in tests; the zero value stops nowhere.
	Hooks Hooks
}

// Pipeline runs plans. Create one per process with New; Start resumes unfinished
// plans and Close waits for running steps.
type Pipeline struct {
	db       *store.DB
	cluster  Cluster
	render   Renderer
	repos    Repos
	conns    Connections
	policy   Policy
	observer Observer
	cfg      Config
	hooks    Hooks

	baseCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	// running holds the plans with a run in this process; true means a Kick came
	// while it ran, so it runs once more when done (the run may already have read the
	// plan before the change that kicked it, such as a merge, was saved).
	running map[string]bool
	// follows are the Applications followed by this process's runs, by plan.
	follows map[string]*following
	// plannedCommits is, per repository branch, the commit last planned on: the
	// next commit's reach index is derived from its (treeSince).
	plannedCommits *lru.Cache[plannedBranch, string]
}

// New builds a pipeline working through deps, tuned by cfg (its zero fields take
// the defaults).
func New(deps Deps, cfg Config) *Pipeline {
	ctx, cancel := context.WithCancel(context.Background())
	observer := deps.Observer
	if observer == nil {
		observer = nopObserver{}
	}
	return &Pipeline{
		db: deps.Store, cluster: deps.Clusters, render: deps.Renderer, repos: deps.Repos, conns: deps.Connections,
		policy: deps.Policy, observer: observer, cfg: cfg.withDefaults(), hooks: deps.Hooks,
		baseCtx: ctx, cancel: cancel, running: map[string]bool{}, plannedCommits: newPlannedCommits(),
	}
}

// Start resumes every plan whose next step is the pipeline's own (a restart picks up
// where the previous process stopped) and keeps retrying plans whose claim expired.
func (p *Pipeline) Start(ctx context.Context) error {
	p.baseCtx = zerolog.Ctx(ctx).WithContext(p.baseCtx)
	if err := p.resumeAll(ctx); err != nil {
		return err
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.cfg.ClaimTTL / 2)
		defer t.Stop()
		for {
			select {
			case <-p.baseCtx.Done():
				return
			case <-t.C:
				if err := p.resumeAll(p.baseCtx); err != nil {
					zerolog.Ctx(p.baseCtx).Error().Err(err).Msg("Resume plans failed")
				}
			}
		}
	}()
	return nil
}

func (p *Pipeline) resumeAll(ctx context.Context) error {
	var statuses []string
	for _, s := range AllStatuses {
		if s.Working() {
			statuses = append(statuses, string(s))
		}
	}
	plans, err := p.db.ListPlans(ctx, store.PlanFilter{Statuses: statuses, Limit: 1000})
	if err != nil {
		return fmt.Errorf("list plans to resume: %w", err)
	}
	for _, pl := range plans {
		if Status(pl.Status) == StatusPROpen && pl.CheckRunID != 0 {
			continue // waits for GitHub
		}
		p.Kick(pl.Code)
	}
	return nil
}

// Close stops background work and waits for running steps to return.
func (p *Pipeline) Close() {
	p.cancel()
	p.wg.Wait()
}

// Kick runs a plan's pending steps in the background (at most one run per plan in
// this process; the store claim keeps other processes off it).
func (p *Pipeline) Kick(code string) {
	p.mu.Lock()
	if p.baseCtx.Err() != nil {
		p.mu.Unlock()
		return
	}
	if _, ok := p.running[code]; ok {
		p.running[code] = true
		p.mu.Unlock()
		return
	}
	p.running[code] = false
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		ctx := zerolog.Ctx(p.baseCtx).With().Str("plan", code).Logger().WithContext(p.baseCtx)
		for {
			err := p.Run(ctx, code)
			if err != nil && !errors.Is(err, errStopped) {
				zerolog.Ctx(ctx).Error().Err(err).Msg("Plan run stopped with an error")
			}
			p.mu.Lock()
			again := p.running[code] && err == nil && p.baseCtx.Err() == nil
			if !again {
				delete(p.running, code)
				p.mu.Unlock()
				return
			}
			p.running[code] = false
			p.mu.Unlock()
		}
	}()
}

// errStopped ends a run without recording anything (a test hook's simulated crash,
// or shutdown).
var errStopped = errors.New("run stopped")

// errHookCrash marks a stop caused by a test hook, which behaves like a dead process.
var errHookCrash = errors.New("simulated crash")

// Submit validates and stores a request as a plan and decides its path at once, so
// the caller learns right away whether a pull request will follow; the rest runs in
// the background. The same (team, idempotency key) returns the existing plan.
func (p *Pipeline) Submit(ctx context.Context, teamID, actor string, req Request) (store.Plan, bool, error) {
	if err := req.Validate(); err != nil {
		return store.Plan{}, false, err
	}
	change, err := jsonOf(req.Change)
	if err != nil {
		return store.Plan{}, false, err
	}
	pl := Payload{}
	if req.Application != nil {
		pl.App = &argocd.PayloadApp{Namespace: req.Application.Namespace, Name: req.Application.Name}
	}
	plan := store.Plan{
		Code: newCode(), TeamID: teamID, IdempotencyKey: req.IdempotencyKey, Cluster: req.Cluster,
		Target: req.Target, Change: change, Reason: req.Reason, RequestedBy: req.RequestedBy,
		Status: string(StatusDeciding),
	}
	if err := encodePayload(&plan, pl); err != nil {
		return store.Plan{}, false, err
	}
	stored, created, err := p.db.CreatePlan(ctx, plan, store.PlanEvent{Actor: actor, Step: "request", Message: req.Reason})
	if err != nil {
		return store.Plan{}, false, fmt.Errorf("store plan: %w", err)
	}
	if !created {
		if err := sameRequest(stored, req, change); err != nil {
			return store.Plan{}, false, err
		}
		return stored, false, nil
	}
	p.observer.Transition("", StatusDeciding)
	if hctx, held, ok, err := p.hold(ctx, stored.Code); err == nil && ok {
		decided, derr := p.stepDecide(hctx, stored, req.ExpectedPath)
		held.end(ctx, true)
		if derr == nil {
			stored = decided
		} else if !errors.Is(derr, errStopped) {
			zerolog.Ctx(ctx).Error().Err(derr).Str("plan", stored.Code).Msg("Decide step failed")
		}
	}
	p.Kick(stored.Code)
	return p.reload(ctx, stored)
}

// sameRequest refuses an idempotency key sent again with another request: the key
// names one change, and answering its plan to a request for another cluster,
// target or change would tell the caller that change was taken when nothing of it
// was. The wording (reason, requested_by) may differ between a request and its
// retry. change is req.Change as Submit encoded it; the stored one is decoded and
// encoded again the same way, so the comparison does not hang on how it was kept.
func sameRequest(stored store.Plan, req Request, change []byte) error {
	var was render.Change
	storedChange := stored.Change
	if err := json.Unmarshal(stored.Change, &was); err == nil {
		if b, err := jsonOf(was); err == nil {
			storedChange = b
		}
	}
	var differ []string
	if stored.Cluster != req.Cluster {
		differ = append(differ, fmt.Sprintf("cluster %s, not %s", stored.Cluster, req.Cluster))
	}
	if stored.Target != req.Target {
		differ = append(differ, fmt.Sprintf("target %s, not %s", stored.Target, req.Target))
	}
	switch {
	case bytes.Equal(storedChange, change):
	case holdsSecret(stored.Target, was) || holdsSecret(req.Target, req.Change):
		// A view of a Secret's change shows none of its values; nor does this.
		differ = append(differ, "another change of a Secret, whose values are not quoted")
	default:
		differ = append(differ, fmt.Sprintf("change %s, not %s", storedChange, change))
	}
	if len(differ) == 0 {
		return nil
	}
	return refusal(CodeConflict, "idempotency key %q was used for change %s (%s); send another change with a new key",
		req.IdempotencyKey, stored.Code, strings.Join(differ, "; "))
}

// holdsSecret reports whether c of target changes a Secret or adds one, as a
// change view judges it (a target's kind in any case).
func holdsSecret(target objref.Target, c render.Change) bool {
	return strings.EqualFold(target.Kind, "Secret") || c.NewResource != nil && c.NewResource.HoldsSecret()
}

func (p *Pipeline) reload(ctx context.Context, pl store.Plan) (store.Plan, bool, error) {
	fresh, err := p.db.PlanByCode(ctx, pl.Code)
	if err != nil {
		return store.Plan{}, true, err
	}
	return fresh, true, nil
}

// Run drives one plan until it needs something from outside (a merge, a lock, a
// person) or ends. It is safe to call for any plan at any time.
func (p *Pipeline) Run(ctx context.Context, code string) error {
	ctx, held, ok, err := p.hold(ctx, code)
	if err != nil {
		return err
	}
	if !ok {
		return nil // another worker runs it
	}
	crashed := false
	// A simulated crash keeps its claim, as a dead process would, until it expires.
	defer func() { held.end(ctx, !crashed) }()
	defer p.endFollow(code)
	for {
		if lost := held.lostErr(); lost != nil {
			// Another worker may run the plan now: nothing more is done or recorded
			// here, whatever the step in flight returned.
			zerolog.Ctx(ctx).Warn().Err(lost).Str("plan", code).Msg("Plan claim lost; stopping work on the plan")
			return fmt.Errorf("%w: %w", errStopped, lost)
		}
		if err := ctx.Err(); err != nil {
			return errStopped
		}
		pl, err := p.db.PlanByCode(ctx, code)
		if err != nil {
			if held.lostErr() != nil {
				continue // cancelled by the lost claim: reported at the top
			}
			return err
		}
		if c := held.current(); pl.ClaimedBy != c.Owner || pl.ClaimEpoch != c.Epoch {
			return nil // claim lost (expired and taken); the other worker continues
		}
		_, done, err := p.step(ctx, pl)
		if errors.Is(err, store.ErrStale) {
			// A webhook or a person changed the plan while the step ran (a merge, a
			// recorded branch deletion): read it again and go on from there; steps
			// are idempotent.
			continue
		}
		if errors.Is(err, errHookCrash) {
			crashed = true
		}
		if errors.Is(err, store.ErrClaimLost) {
			held.lose(err) // the store refused a record: the claim ran out
		}
		if held.lostErr() != nil {
			continue // reported at the top of the loop
		}
		if sleepOutRateLimit(ctx, err) {
			continue // the claim is kept (and renewed) while the plan waits
		}
		if err != nil || done {
			return err
		}
	}
}

// StepStates are the states a plan is in when the pipeline runs a step of its own
// (see step); the others wait for a person, a webhook or another plan.
var StepStates = []Status{StatusDeciding, StatusPreparing, StatusCommitting, StatusPROpen, StatusMerged, StatusDeploying}

// step runs the next step of pl and reports whether the run is done.
func (p *Pipeline) step(ctx context.Context, pl store.Plan) (store.Plan, bool, error) {
	var err error
	state := Status(pl.Status)
	if state != StatusPROpen || pl.CheckRunID == 0 {
		defer func(start time.Time) { p.observer.Step(state, time.Since(start)) }(time.Now())
	}
	switch state {
	case StatusDeciding:
		pl, err = p.stepDecide(ctx, pl, "")
	case StatusPreparing:
		pl, err = p.stepPrepare(ctx, pl)
	case StatusCommitting:
		pl, err = p.stepCommit(ctx, pl)
	case StatusPROpen:
		if pl.CheckRunID != 0 {
			return pl, true, nil
		}
		pl, err = p.stepCheckRun(ctx, pl)
	case StatusMerged:
		pl, err = p.stepStartDeploy(ctx, pl)
	case StatusDeploying:
		return p.stepTrackDeploy(ctx, pl)
	default:
		return pl, true, nil
	}
	return pl, false, err
}

// hook runs the test hook before a step.
func (p *Pipeline) hook(code, step string) error {
	if p.hooks.BeforeStep == nil {
		return nil
	}
	if err := p.hooks.BeforeStep(code, step); err != nil {
		return fmt.Errorf("%w: %w: %v", errStopped, errHookCrash, err)
	}
	return nil
}

// save records pl (with its payload) as one event. from is the state the step
// started in; a state change is validated against the state machine.
func (p *Pipeline) save(ctx context.Context, pl store.Plan, pay Payload, to Status, actor, step, msg string) (store.Plan, error) {
	from := Status(pl.Status)
	if to != from && !CanMove(from, to) {
		return pl, &TransitionError{Code: pl.Code, From: from, To: to}
	}
	if err := encodePayload(&pl, pay); err != nil {
		return pl, err
	}
	pl.Status = string(to)
	if actor == "" {
		actor = "system"
	}
	ev := store.PlanEvent{Actor: actor, Step: step, Message: msg}
	var saved store.Plan
	var released []store.FileLock
	var err error
	if h := heldFor(ctx, pl.Code); h != nil {
		// Recorded only while this worker's claim still holds the plan.
		saved, released, err = p.db.UpdateClaimedPlan(ctx, h.current(), pl, ev, lockChange(from, to, pay))
	} else {
		saved, released, err = p.db.UpdatePlanLocks(ctx, pl, ev, lockChange(from, to, pay))
	}
	if err != nil {
		return pl, err
	}
	zerolog.Ctx(ctx).Info().Str("plan", pl.Code).Str("from", string(from)).Str("to", string(to)).Str("step", step).Msg("Plan step recorded")
	p.observeSaved(ctx, from, saved)
	if len(released) > 0 {
		p.wakeWaiters(ctx, saved.Code)
	}
	return saved, nil
}

// lockChange keeps a plan's file locks in step with its state, in the transaction
// that moves it: a plan leaving the states that hold locks (for failed, refused,
// closed, merged alike) lets its files go, and a plan entering them (a retry
// resuming at the commit) takes its edited files again, or the move fails with
// *store.LockHeldError.
func lockChange(from, to Status, pay Payload) store.LockChange {
	switch {
	case from == to:
		return store.LockChange{}
	case !to.HoldsLocks():
		return store.LockChange{ReleaseAll: true}
	case !from.HoldsLocks():
		return store.LockChange{Take: editPaths(pay.Edits)}
	}
	return store.LockChange{}
}

func editPaths(edits []StoredEdit) []string {
	paths := make([]string, len(edits))
	for i, e := range edits {
		paths[i] = e.Path
	}
	return paths
}

// stop moves pl to refused or failed with a problem; for failed the step to retry is
// kept. Either way the plan's file locks go with the move (see lockChange).
//
// A rate limit of GitHub is no failure: the plan records that it waits for it and
// stays where it is (see waitForRateLimit). Nor, the first few times, is a transient
// failure of GitHub (see retryTransient).
func (p *Pipeline) stop(ctx context.Context, pl store.Plan, pay Payload, cause error, step string) (store.Plan, error) {
	if saved, err, limited := p.waitForRateLimit(ctx, pl, pay, cause, step); limited {
		return saved, err
	}
	if saved, err, retrying := p.retryTransient(ctx, pl, pay, cause, step); retrying {
		return saved, err
	}
	if errors.Is(cause, cache.ErrArchiveTooLarge) {
		// The repository's own content: another try downloads the same archive.
		ref := &render.Refusal{Code: render.CodeTooLarge, Reason: cause.Error()}
		cause = &Error{Code: CodeRefused, Reason: ref.Reason, Details: ref}
	}
	e, ok := AsError(cause)
	to := StatusRefused
	if !ok {
		// People read the step and GitHub's answer in words; the error itself, with
		// the request it names, is for the log.
		zerolog.Ctx(ctx).Error().Err(cause).Str("plan", pl.Code).Str("step", step).Msg("Plan step failed")
		e = &Error{Code: CodeRemoteError, Reason: p.failureReason(step, cause)}
		to = StatusFailed
		pl.FailedStep = pl.Status
	}
	pl.ErrorCode, pl.StatusReason = e.Code, e.Reason
	pay.Problem = e
	return p.save(ctx, pl, pay, to, "system", step, e.Reason)
}

// stepWords names what each step that may fail was doing, as its problem says it.
var stepWords = map[string]string{
	"decide":       "deciding the change's path",
	"prepare":      "preparing the change",
	"commit":       "committing the edit",
	"branch":       "pushing the change's branch",
	"pull_request": "opening the pull request",
	"check_run":    "checking the pull request's head",
}

// failureReason is the problem of a plan that step failed for cause, no refusal:
// the step and what failed, "opening the pull request failed: GitHub answered 503
// Service Unavailable on every try" (see failureWords).
func (p *Pipeline) failureReason(step string, cause error) string {
	what, ok := stepWords[step]
	if !ok {
		what = "the " + step + " step"
	}
	words, ofGitHub := failureWords(cause)
	if ofGitHub && github.Transient(cause) && p.cfg.TransientRetries > 0 {
		words += " on every try" // retryTransient took the step again until its tries were spent
	}
	return what + " failed: " + words
}

// failureWords says what failed, for a plan's problem, history and check run, and
// whether it was GitHub (github.Answer: its status and message, never the request's
// method and address, where an archive link's token may be). Any other cause (a
// cluster's read, the service's own) is its error with every address it names cut
// to its scheme and host: a user or password, path or query of one is not shown.
func failureWords(cause error) (string, bool) {
	if answer, ok := github.Answer(cause); ok {
		return answer, true
	}
	return withoutAddresses(cause.Error()), false
}

// addressPattern finds the URLs an error names.
var addressPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

func withoutAddresses(s string) string {
	return addressPattern.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "[address]"
		}
		return u.Scheme + "://" + u.Host
	})
}

// Decide runs the path decision alone (for the assistant's tool results); nothing is
// stored.
func (p *Pipeline) Decide(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) argocd.Decision {
	return p.cluster.Decide(ctx, cluster, target)
}
