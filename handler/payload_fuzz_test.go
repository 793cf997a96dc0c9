package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// payloadEvents are the events FuzzWebhookPayloads delivers, picked by index so the
// fuzzer spends its time on payloads, not on event names no handler takes.
var payloadEvents = []string{"check_run", "check_suite", "pull_request", "push", "issue_comment",
	"installation", "installation_repositories", "merge_group"}

const (
	fuzzInstallation = 51234567
	fuzzHead         = "1111111111111111111111111111111111111111"
)

// handSeeds are small payloads of each event, valid and broken, written to reach
// each handler's branches; GitHub's documented payloads are added from the fixtures.
var handSeeds = map[string][]string{
	"check_run": {
		`{"action":"rerequested","check_run":{"name":"kukie/render","external_id":"abc123"},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567},"sender":{"login":"octocat"}}`,
		`{"action":"rerequested","check_run":{"name":"kukie/render","external_id":"pull/7"},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567},"sender":{"login":"octocat"}}`,
		`{"action":"rerequested","check_run":{"name":"kukie/policy","external_id":"pull/0"},"repository":{},"installation":{"id":-1}}`,
		`{"action":"requested_action","check_run":{"name":"kukie/render","external_id":"pull/-7"},"requested_action":{"identifier":"rerender"},"repository":{"full_name":"acme/deploy"}}`,
		`{"action":"rerequested","check_run":{"name":"kukie/render","external_id":"merge_group/refs/heads/gh-readonly-queue/main/pr-7"}}`,
		`{"action":"rerequested","check_run":{"name":"kukie/render","external_id":7}}`,
		`{"action":"rerequested","check_run":null}`,
	},
	"check_suite": {
		`{"action":"requested","check_suite":{"head_branch":"kukie/abc123","head_sha":"1111111111111111111111111111111111111111"},"repository":{"full_name":"acme/deploy"},"sender":{"login":"octocat"}}`,
		`{"action":"requested","check_suite":{"head_branch":"kukie/abc123","head_sha":""},"repository":{"full_name":""}}`,
		`{"action":"rerequested","check_suite":{"head_branch":"main","pull_requests":[{"number":7},{"number":0}]},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567}}`,
		`{"action":"rerequested","check_suite":{"head_branch":"main","pull_requests":[{"number":"7"}]}}`,
	},
	"pull_request": {
		`{"action":"closed","pull_request":{"number":7,"merged":true,"merge_commit_sha":"2222222222222222222222222222222222222222","head":{"ref":"kukie/abc123","sha":"1111111111111111111111111111111111111111","repo":{"full_name":"acme/deploy"}},"base":{"ref":"main","sha":"3333333333333333333333333333333333333333","repo":{"full_name":"acme/deploy"}}},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567},"sender":{"login":"octocat"}}`,
		`{"action":"closed","pull_request":{"merged":true,"head":{"ref":"kukie/abc123"},"base":{}}}`,
		`{"action":"edited","changes":{"base":{"ref":{"from":"main"}}},"pull_request":{"number":7,"head":{"ref":"kukie/abc123","repo":{"full_name":"acme/deploy"}},"base":{"ref":"release","repo":{"full_name":"acme/deploy"}}},"repository":{"full_name":"acme/deploy"}}`,
		`{"action":"synchronize","pull_request":{"number":7,"head":{"ref":"kukie/abc123","sha":"not-a-sha","repo":{"full_name":"Acme/Deploy"}},"base":{"ref":"main","repo":{"full_name":"acme/deploy"}}},"repository":{"full_name":"Acme/Deploy"},"sender":{"login":"octocat"}}`,
		`{"action":"opened","pull_request":{"number":8,"head":{"ref":"feature","sha":"1111111111111111111111111111111111111111","repo":null},"base":{"ref":"main","sha":"3333333333333333333333333333333333333333","repo":{"full_name":"acme/deploy"}}},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567},"sender":{"login":"octocat"}}`,
		`{"action":"closed","pull_request":{"number":8,"head":{"ref":"feature"}},"repository":{"full_name":"acme/deploy"}}`,
		`{"action":"opened","pull_request":{"number":1e3}}`,
		`{"action":"opened","pull_request":{"number":9223372036854775808}}`,
	},
	"push": {
		`{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"2222222222222222222222222222222222222222","commits":[{"modified":["apps/web/deployment.yaml"]}],"repository":{"full_name":"acme/deploy","default_branch":"main"},"installation":{"id":51234567}}`,
		`{"ref":"refs/heads/","after":"","repository":{}}`,
		`{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000","repository":{"full_name":"acme/deploy"}}`,
		`{"ref":"refs/heads/main","before":"../../../user","after":"2222222222222222222222222222222222222222","repository":{"full_name":"acme/deploy/x"}}`,
		`{"ref":"refs/tags/v1","after":"2222222222222222222222222222222222222222","repository":{"full_name":"acme/deploy"}}`,
		`{"ref":"refs/heads/main","commits":[{"added":[null,""]}],"repository":{"full_name":"acme/deploy"}}`,
	},
	"issue_comment": {
		`{"action":"created","issue":{"number":7,"pull_request":{}},"comment":{"id":5,"body":"/kukie rerender","user":{"login":"octocat"}},"repository":{"full_name":"acme/deploy"},"sender":{"login":"octocat"}}`,
		`{"action":"created","issue":{"pull_request":{}},"comment":{"body":"/kukie cancel wrong cluster","user":{"login":"octocat"}},"repository":{"full_name":"acme/deploy"}}`,
		`{"action":"created","issue":{"number":7,"pull_request":{}},"comment":{"body":"/kukie cancel","user":{"login":"rex"}},"repository":{}}`,
		`{"action":"created","issue":{"number":7,"pull_request":null},"comment":{"body":"/kukie rerender"}}`,
		`{"action":"created","issue":{"number":7,"pull_request":{}},"comment":{"id":5,"created_at":"yesterday","body":"/kukie cancel","user":{"login":"rex"}},"repository":{"full_name":"acme/deploy"}}`,
	},
	"installation": {
		`{"action":"created","installation":{"id":51234567,"account":{"login":"acme"}},"repositories":[{"id":1,"full_name":"acme/deploy"}],"sender":{"id":583231,"login":"octocat"}}`,
		`{"action":"created","installation":{"id":0},"sender":{"id":583231,"login":"octocat"}}`,
		`{"action":"suspend","installation":{"id":-51234567}}`,
		`{"action":"deleted","installation":{}}`,
		`{"action":"created","installation":{"id":51234567},"repositories":[{"full_name":"acme"}],"requester":{"id":-1}}`,
	},
	"installation_repositories": {
		`{"action":"added","installation":{"id":51234567,"account":{"login":"acme"}},"repositories_added":[{"id":2,"full_name":"acme/platform"}],"sender":{"login":"octocat"}}`,
		`{"action":"removed","installation":{"id":0},"repositories_removed":[{"full_name":"acme/platform"}]}`,
		`{"action":"removed","installation":{"id":51234567},"repositories_removed":[{"full_name":"../etc"}]}`,
	},
	"merge_group": {
		`{"action":"checks_requested","merge_group":{"head_sha":"1111111111111111111111111111111111111111","head_ref":"refs/heads/gh-readonly-queue/main/pr-7","base_sha":"3333333333333333333333333333333333333333","base_ref":"refs/heads/main"},"repository":{"full_name":"acme/deploy"},"installation":{"id":51234567}}`,
		`{"action":"checks_requested","merge_group":{},"repository":{"full_name":"acme/deploy"}}`,
		`{"action":"destroyed","merge_group":{"head_ref":""},"repository":{}}`,
	},
}

// FuzzWebhookPayloads delivers any payload to each event's handler, wired to fakes
// that record what the handler acts on: a handler must not panic and must finish
// in bounded time; whatever it acts on names a repository by its owner/name, a
// pull request by a positive number, a commit by a full SHA, an installation by a
// positive ID; a command comment reaches the plan of the pull request it was
// written on only; and a payload it refuses is refused for good with an error that
// names the event payload (or skipped with such a reason), never retried for
// something in its bytes.
func FuzzWebhookPayloads(f *testing.F) {
	for i, event := range payloadEvents {
		for _, s := range handSeeds[event] {
			f.Add(uint8(i), []byte(s))
		}
		dir := filepath.Join("..", githubtest.FixtureDir, event)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			f.Add(uint8(i), githubtest.Fixture(f, event, strings.TrimSuffix(e.Name(), ".json")))
		}
	}
	for i, event := range payloadEvents {
		entries, _ := os.ReadDir("testdata")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), event+"_") {
				b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
				if err != nil {
					f.Fatal(err)
				}
				f.Add(uint8(i), b)
			}
		}
	}
	h := newPayloadHarness(f)
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		h.deliver(t, payloadEvents[int(which)%len(payloadEvents)], payload, 10*time.Second)
	})
}

// payloadHarness is one store and the handlers of every event over fakes that
// check what they are asked to act on.
type payloadHarness struct {
	db       *store.DB
	plan     store.Plan
	handlers map[string]githubapp.EventHandler
	fakes    *payloadFakes
}

func newPayloadHarness(tb testing.TB) *payloadHarness {
	ctx := context.Background()
	db := storetest.SQLite(tb)
	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: fuzzInstallation, AccountLogin: "acme"}); err != nil {
		tb.Fatal(err)
	}
	pl, _, err := db.CreatePlan(ctx, store.Plan{Code: "abc123", TeamID: team.ID, Status: "pr_open", Change: json.RawMessage(`{}`),
		Repo: "acme/deploy", InstallationID: fuzzInstallation, Branch: "kukie/abc123", PRNumber: 7, HeadSHA: fuzzHead},
		store.PlanEvent{Actor: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	fakes := &payloadFakes{plan: pl}
	b := Base{ClientCreator: fakeClients{p: fakes}, Store: db, App: github.App{ID: 1, Slug: "kukie"}, WebHost: "github.com", Installations: fakes}
	pipeline, checks := fakePipeline{fakes}, fakeChecker{fakes}
	handlers := map[string]githubapp.EventHandler{}
	for _, h := range []githubapp.EventHandler{
		&CheckRun{Base: b, Pipeline: pipeline, Checks: checks}, &CheckSuite{Base: b, Pipeline: pipeline, Checks: checks},
		&PullRequest{Base: b, Pipeline: pipeline, Checks: checks}, &Push{Base: b, Pipeline: pipeline, Checks: checks},
		&IssueComment{Base: b, Pipeline: pipeline, Access: fakes}, &Installation{Base: b}, &InstallationRepositories{Base: b},
		&MergeGroup{Base: b, Checks: checks},
	} {
		for _, event := range h.Handles() {
			handlers[event] = h
		}
	}
	return &payloadHarness{db: db, plan: pl, handlers: handlers, fakes: fakes}
}

// deliver hands payload to the event's handler, with budget as its deadline, and
// checks how it ended.
func (h *payloadHarness) deliver(t *testing.T, event string, payload []byte, budget time.Duration) {
	t.Helper()
	h.fakes.begin(t, payload)
	defer h.fakes.end()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	err := h.handlers[event].Handle(ctx, event, "fuzz", payload)
	if d := time.Since(start); d > budget {
		t.Errorf("%s payload of %d bytes took %s, over its %s", event, len(payload), d, budget)
	}
	// A deleted installation stays deleted; the next payload starts from a bound one.
	if _, err := h.db.SetInstallationStatus(context.Background(), fuzzInstallation, store.InstallationActive); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		return
	}
	if n := len(err.Error()); n > maxPayloadErrorLength {
		t.Errorf("%s payload of %d bytes failed with an error of %d bytes: %.200q…", event, len(payload), n, err.Error())
	}
	if reason, ok := SkipReason(err); ok {
		if !strings.HasPrefix(reason, event+" event payload ") {
			t.Errorf("%s payload skipped with %q, which does not say what it lacks", event, reason)
		}
		return
	}
	if IsPermanent(err) {
		if msg := err.Error(); !strings.Contains(msg, event+" event payload") && !strings.HasPrefix(msg, "reply to a command: ") {
			t.Errorf("%s payload refused with %q, which does not say what is wrong with it", event, msg)
		}
		return
	}
	if !errors.Is(err, errNoFuzzGitHub) {
		t.Errorf("%s payload failed with %v, which the inbox retries, yet only its bytes can be at fault", event, err)
	}
}

// maxPayloadErrorLength bounds the error a payload gets: it is logged whole, on
// every attempt.
const maxPayloadErrorLength = 1000

// errNoFuzzGitHub is the answer of the fake GitHub to every request.
var errNoFuzzGitHub = errors.New("no GitHub in this test")

// payloadFakes stands in for the pipeline, the pull request checker, GitHub's
// installations and write access, and checks every value it is handed.
type payloadFakes struct {
	mu      sync.Mutex
	t       *testing.T
	payload []byte
	plan    store.Plan
}

func (p *payloadFakes) begin(t *testing.T, payload []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t, p.payload = t, payload
}

func (p *payloadFakes) end() { p.begin(nil, nil) }

func (p *payloadFakes) errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Helper()
	p.t.Errorf(format+" (payload %.300q)", append(args, p.payload)...)
}

func (p *payloadFakes) repo(call, repo string) {
	if got, err := github.ParseFullName(repo); err != nil || got != repo {
		p.errorf("%s on repository %q", call, repo)
	}
}

// installedRepo checks the installation and repository a check is made in.
func (p *payloadFakes) installedRepo(call string, installationID int64, repo, url string) {
	p.positive(call, "installation", installationID)
	p.repo(call, repo)
	if url != "https://github.com/"+repo {
		p.errorf("%s of %s with URL %q", call, repo, url)
	}
}

func (p *payloadFakes) sha(call, field, sha string) {
	if !isCommitSHA(sha) || strings.Trim(sha, "0") == "" {
		p.errorf("%s with %s %q", call, field, sha)
	}
}

func (p *payloadFakes) positive(call, field string, n int64) {
	if n <= 0 {
		p.errorf("%s with %s %d", call, field, n)
	}
}

func (p *payloadFakes) text(call, field, s string) {
	if s == "" {
		p.errorf("%s with an empty %s", call, field)
	}
}

func (p *payloadFakes) key(call, key string) {
	if n, ok := strings.CutPrefix(key, pullKeyPrefix); ok {
		if i, err := strconv.ParseInt(n, 10, 64); err != nil || i <= 0 || pullKey(i) != key {
			p.errorf("%s with key %q", call, key)
		}
		return
	}
	if ref, ok := strings.CutPrefix(key, mergeGroupKeyPrefix); !ok || ref == "" {
		p.errorf("%s with key %q", call, key)
	}
}

func (p *payloadFakes) branch(call, branch string) {
	if !strings.HasPrefix(branch, github.BranchPrefix) || branch == github.BranchPrefix {
		p.errorf("%s with branch %q", call, branch)
	}
}

// fakePipeline is the pipeline's side of payloadFakes.
type fakePipeline struct{ *payloadFakes }

// fakeChecker is the pull request checker's side of payloadFakes.
type fakeChecker struct{ *payloadFakes }

func (p fakePipeline) PlanForPull(_ context.Context, repo, branch string) (store.Plan, bool, error) {
	p.repo("PlanForPull", repo)
	p.branch("PlanForPull", branch)
	return p.plan, true, nil
}

func (p fakePipeline) PullClosed(_ context.Context, repo, branch, base string, number int64, merged bool, mergeSHA, head string) error {
	p.repo("PullClosed", repo)
	p.branch("PullClosed", branch)
	p.text("PullClosed", "base", base)
	p.positive("PullClosed", "number", number)
	if merged {
		p.sha("PullClosed", "merge SHA", mergeSHA)
	}
	if head != "" {
		p.sha("PullClosed", "head SHA", head)
	}
	return nil
}

func (p fakePipeline) PullRetargeted(_ context.Context, repo, branch, from, to string, number int64) error {
	p.repo("PullRetargeted", repo)
	p.branch("PullRetargeted", branch)
	p.text("PullRetargeted", "from", from)
	p.text("PullRetargeted", "to", to)
	p.positive("PullRetargeted", "number", number)
	return nil
}

func (p fakePipeline) HeadPushed(_ context.Context, repo, branch, sha, _ string) error {
	p.repo("HeadPushed", repo)
	p.branch("HeadPushed", branch)
	p.sha("HeadPushed", "head", sha)
	return nil
}

func (p fakePipeline) BasePushed(_ context.Context, repo, branch, after string, _ []string) error {
	p.repo("BasePushed", repo)
	p.text("BasePushed", "branch", branch)
	p.sha("BasePushed", "after", after)
	return nil
}

// Reverify knows one plan, as the pipeline knows those of its store.
func (p fakePipeline) Reverify(_ context.Context, code string) error {
	p.text("Reverify", "code", code)
	if code != p.plan.Code {
		return fmt.Errorf("plan %s: %w", code, store.ErrNotFound)
	}
	return nil
}

func (p fakePipeline) Cancel(_ context.Context, teamID, code, _ string) (store.Plan, error) {
	p.text("Cancel", "team", teamID)
	p.text("Cancel", "code", code)
	return p.plan, nil
}

func (p fakeChecker) Check(_ context.Context, h prcheck.Head) error {
	p.installedRepo("Check", h.InstallationID, h.Repo, h.RepoURL)
	p.text("Check", "base branch", h.BaseBranch)
	p.sha("Check", "base", h.BaseSHA)
	p.sha("Check", "head", h.HeadSHA)
	p.key("Check", h.Key)
	return nil
}

func (p fakeChecker) Cancel(_ context.Context, repo, key string) error {
	p.repo("Check cancel", repo)
	p.key("Check cancel", key)
	return nil
}

func (p fakeChecker) BaseMoved(_ context.Context, m prcheck.BaseMove) error {
	p.installedRepo("BaseMoved", m.InstallationID, m.Repo, m.RepoURL)
	p.text("BaseMoved", "branch", m.Branch)
	p.sha("BaseMoved", "SHA", m.SHA)
	if m.Before != "" && !isCommitSHA(m.Before) {
		p.errorf("BaseMoved with before %q", m.Before)
	}
	return nil
}

func (p *payloadFakes) Get(_ context.Context, id int64) (github.Installation, error) {
	p.positive("installation Get", "ID", id)
	return github.Installation{ID: id, AccountLogin: "acme"}, nil
}

func (p *payloadFakes) Repositories(_ context.Context, id int64, webHost string) ([]github.RepoRef, error) {
	p.positive("installation Repositories", "ID", id)
	return []github.RepoRef{{ID: 1, Repo: github.Repo{Host: webHost, Owner: "acme", Name: "deploy"}}}, nil
}

func (p *payloadFakes) HasRepository(_ context.Context, id int64, repo github.Repo) (bool, error) {
	p.positive("installation HasRepository", "ID", id)
	p.repo("installation HasRepository", repo.FullName())
	return true, nil
}

// CanWrite is asked once a command comment found its plan: the comment must have
// been written on that plan's pull request.
func (p *payloadFakes) CanWrite(_ context.Context, installationID int64, repo, login string) (bool, error) {
	p.positive("CanWrite", "installation", installationID)
	p.repo("CanWrite", repo)
	p.text("CanWrite", "login", login)
	var event issueCommentEvent
	if err := json.Unmarshal(p.payload, &event); err != nil || event.Issue == nil ||
		event.Issue.Number != p.plan.PRNumber || github.NormalizeFullName(event.Repo.FullName) != p.plan.Repo {
		p.errorf("a command comment reached plan %s of %s#%d", p.plan.Code, p.plan.Repo, p.plan.PRNumber)
	}
	return login == "octocat", nil
}

// fakeClients answers every installation client with errNoFuzzGitHub; the
// handlers ask for no other client.
type fakeClients struct {
	githubapp.ClientCreator
	p *payloadFakes
}

func (c fakeClients) NewInstallationClient(id int64) (*gh.Client, error) {
	c.p.positive("NewInstallationClient", "installation", id)
	return nil, errNoFuzzGitHub
}

// TestPayloadsNearTheBodyLimitAreHandledInBoundedMemory delivers payloads of about
// the 25 MB the webhook route takes, in the shapes that cost a decoder the most,
// to the FuzzWebhookPayloads handlers: each ends within its time and memory, and
// one refused is refused with a short error, whatever the size of the value at
// fault. Before, a pull request number of 25 MB of digits was quoted whole in the
// error, which the inbox logs on every attempt.
func TestPayloadsNearTheBodyLimitAreHandledInBoundedMemory(t *testing.T) {
	// The inbox gives a handler its lease less a tenth; half of that leaves room
	// for a machine busy with other tests and for the race detector.
	const nearLimitBudget = (DefaultLease - DefaultLease/10) / 2
	const size = 25 << 20
	repeat := func(prefix, item, sep, suffix string) []byte {
		n := (size - len(prefix) - len(suffix)) / (len(item) + len(sep))
		return []byte(prefix + strings.Repeat(item+sep, n-1) + item + suffix)
	}
	repo := `"repository":{"full_name":"acme/deploy","default_branch":"main"},"installation":{"id":51234567}`
	cases := map[string]struct {
		event   string
		payload []byte
	}{
		"a push listing millions of files":   {"push", repeat(`{"ref":"refs/heads/main","after":"`+fuzzHead+`",`+repo+`,"commits":[{"added":[`, `"apps/web/deployment.yaml"`, ",", `]}]}`)},
		"a pull request nested to the limit": {"pull_request", repeat(`{"pull_request":{"head":`, "[", "", "")},
		"a pull request number of 25 MB":     {"pull_request", repeat(`{"action":"opened","pull_request":{"number":`, "9", "", `}}`)},
		"a repository name of 25 MB":         {"push", repeat(`{"ref":"refs/heads/main","after":"`+fuzzHead+`","repository":{"full_name":"`, "a", "", `"}}`)},
		"a suite of a million pull requests": {"check_suite", repeat(`{"action":"rerequested","check_suite":{"head_branch":"main","pull_requests":[`, `{"number":7}`, ",", `]},`+repo+`}`)},
		"half a million repositories added":  {"installation_repositories", repeat(`{"action":"added","installation":{"id":51234567},"repositories_added":[`, `{"id":2,"full_name":"acme/platform"}`, ",", `]}`)},
	}
	h := newPayloadHarness(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if len(tc.payload) > size {
				t.Fatalf("payload of %d bytes, over the route's %d", len(tc.payload), size)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			h.deliver(t, tc.event, tc.payload, nearLimitBudget)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes: %s, %d MB allocated", len(tc.payload), took, allocated>>20)
			if allocated > 16*size {
				t.Errorf("%d MB allocated for a payload of %d MB", allocated>>20, len(tc.payload)>>20)
			}
		})
	}
}
