package github_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// budgetClient is an installation client of acme/deploy whose budget keeps to limits.
func budgetClient(t *testing.T, s *githubtest.Server, limits github.Limits, reg prometheus.Registerer) (*gh.Client, int64) {
	t.Helper()
	s.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "hi\n"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	cc, err := github.NewClientCreator(github.Config{
		AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL(), Limits: limits,
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cc.NewInstallationClient(id)
	if err != nil {
		t.Fatal(err)
	}
	return c, id
}

func createBlob(ctx context.Context, c *gh.Client, content string) error {
	_, _, err := c.Git.CreateBlob(ctx, "acme", "deploy", &gh.Blob{Content: gh.String(content), Encoding: gh.String("utf-8")})
	return err
}

// TestBudgetPacesContentCreationWithinTheLimits: 40 blobs created at once by 40
// goroutines against a GitHub that allows 10 content-creating requests a second and 4
// at a time: every one is created, none was refused, and the budget says how many it
// still allows.
func TestBudgetPacesContentCreationWithinTheLimits(t *testing.T) {
	s := githubtest.New(t)
	s.EnforceSecondaryLimits(githubtest.SecondaryLimits{Concurrent: 4, Content: 10, Per: time.Second})
	reg := prometheus.NewPedanticRegistry()
	c, id := budgetClient(t, s, github.Limits{Concurrent: 4, Content: []github.Window{{Requests: 10, Per: time.Second}}}, reg)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := createBlob(ctx, c, "blob "+strconv.Itoa(i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := s.RequestCount("POST /repos/{owner}/{repo}/git/blobs"); n != 40 {
		t.Errorf("%d blobs created, want 40", n)
	}
	if v := s.LimitViolations(); v != 0 {
		t.Errorf("%d requests over GitHub's secondary limits", v)
	}
	inst := strconv.FormatInt(id, 10)
	if got := testutil.ToFloat64(gauge(t, reg, "kukie_github_content_budget_remaining", inst)); got < 0 || got > 9 {
		t.Errorf("content budget remaining %v, want what is left of 10 after the last request", got)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name, installation string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "installation" && l.GetValue() == installation {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "copy"})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no %s series for installation %s", name, installation)
	return nil
}

// TestBudgetWaitsOutSecondaryRateLimit: GitHub refuses a write with a secondary rate
// limit of one second; the client waits and sends it again, body and all, and the
// caller sees the write done.
func TestBudgetWaitsOutSecondaryRateLimit(t *testing.T) {
	s := githubtest.New(t)
	c, _ := budgetClient(t, s, github.Limits{}, nil)
	limited := githubtest.SecondaryRateLimit(time.Second).On("POST", "/repos/acme/deploy/git/blobs")
	limited.Times = 1
	s.InjectFault(limited)
	s.RecordRequests()
	if err := createBlob(context.Background(), c, "kept across the resend"); err != nil {
		t.Fatal(err)
	}
	if hits := s.FaultHits("POST", "/repos/acme/deploy/git/blobs"); hits != 1 {
		t.Fatalf("fault hit %d times, want 1", hits)
	}
	var bodies []string
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/git/blobs") {
			bodies = append(bodies, string(r.Body))
		}
	}
	if len(bodies) != 2 || bodies[0] != bodies[1] || !strings.Contains(bodies[1], "kept across the resend") {
		t.Fatalf("blob requests %q, want the same body twice", bodies)
	}
}

// TestBudgetDefersWaitsLongerThanARequestMayBeHeld: a secondary rate limit of a minute
// is longer than a request may wait in the client. The request fails at once with
// GitHub's answer, and the next request is not sent at all but refused with a
// *github.BudgetError naming when GitHub allows requests again, which RetryAt reads.
func TestBudgetDefersWaitsLongerThanARequestMayBeHeld(t *testing.T) {
	s := githubtest.New(t)
	c, _ := budgetClient(t, s, github.Limits{MaxWait: 100 * time.Millisecond}, nil)
	limited := githubtest.SecondaryRateLimit(time.Minute).On("POST", "/repos/acme/deploy/git/blobs")
	limited.Times = 1
	s.InjectFault(limited)
	ctx := context.Background()
	first := time.Now()
	err := createBlob(ctx, c, "a")
	var abuse *gh.AbuseRateLimitError
	if !errors.As(err, &abuse) {
		t.Fatalf("first write: %v, want GitHub's secondary rate limit answer", err)
	}
	// A fresh client of the same installation shares its budget (go-github's own
	// memory of the limit is per client).
	c2 := gh.NewClient(c.Client())
	c2.BaseURL = c.BaseURL
	before := s.TotalRequests()
	err = createBlob(ctx, c2, "b")
	var be *github.BudgetError
	if !errors.As(err, &be) || be.Reason != "secondary" {
		t.Fatalf("second write: %v, want a *github.BudgetError for the secondary limit", err)
	}
	if s.TotalRequests() != before {
		t.Errorf("the budget sent the request GitHub asked not to get")
	}
	at, ok := github.RetryAt(err, time.Now())
	if !ok || at.Before(first.Add(59*time.Second)) {
		t.Errorf("RetryAt %v %v, want a minute after the first answer", at, ok)
	}
}

// TestReadsRevalidateWithETags: a repeated read is a conditional request; the fake
// GitHub answers 304 and the client serves its cached copy, until the resource
// changes and the next read gets the new one.
func TestReadsRevalidateWithETags(t *testing.T) {
	s := githubtest.New(t)
	reg := prometheus.NewPedanticRegistry()
	c, _ := budgetClient(t, s, github.Limits{}, reg)
	ctx := context.Background()
	read := func() string {
		t.Helper()
		ref, _, err := c.Git.GetRef(ctx, "acme", "deploy", "heads/main")
		if err != nil {
			t.Fatal(err)
		}
		return ref.GetObject().GetSHA()
	}
	first := read()
	if again := read(); again != first {
		t.Fatalf("second read %s, want %s", again, first)
	}
	if n := s.NotModifiedCount(); n != 1 {
		t.Fatalf("%d answers were 304, want 1", n)
	}
	moved := s.PushCommit(t, "acme/deploy", "main", map[string]string{"README.md": "moved\n"}, githubtest.DefaultAuthor)
	if now := read(); now != moved {
		t.Fatalf("read after the push %s, want %s: a stale copy was served", now, moved)
	}
	if n := s.NotModifiedCount(); n != 1 {
		t.Errorf("%d answers were 304 after the change, want still 1", n)
	}
	if got := testutil.ToFloat64(requestsCounter(reg, "GET", "2xx", "true")); got != 1 {
		t.Errorf("%v GETs answered from the cache, want 1", got)
	}
}

func requestsCounter(reg *prometheus.Registry, method, status, cached string) prometheus.Collector {
	mfs, _ := reg.Gather()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "copy"})
	for _, mf := range mfs {
		if mf.GetName() != "kukie_github_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["status"] == status && labels["cached"] == cached {
				c.Add(m.GetCounter().GetValue())
			}
		}
	}
	return c
}

// TestBudgetKeepsTheSlotOfARequestGivenUp: two reads GitHub is slow to answer fill
// the two concurrent requests allowed, and their callers give up on them. GitHub
// goes on serving them until its own timeout, so the next read waits in the client
// until the abandoned ones no longer count, instead of going out as a third request
// in flight that GitHub refuses.
func TestBudgetKeepsTheSlotOfARequestGivenUp(t *testing.T) {
	s := githubtest.New(t)
	// The client keeps a slot given up on longer than GitHub serves a request, as
	// the defaults do: the two clocks start apart and a machine under load runs
	// timers late.
	s.EnforceSecondaryLimits(githubtest.SecondaryLimits{Concurrent: 2, ServerTimeout: time.Second})
	c, _ := budgetClient(t, s, github.Limits{Concurrent: 2, Abandoned: 2 * time.Second}, nil)
	slow := githubtest.Fault{Hold: make(chan struct{}), Times: 2}.On(http.MethodGet, "/repos/acme/deploy")
	s.InjectFault(slow)
	gctx, giveUp := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := c.Repositories.Get(gctx, "acme", "deploy")
			errs <- err
		}()
	}
	// The callers give up once GitHub has both requests, as a timeout would.
	for s.FaultHits(http.MethodGet, "/repos/acme/deploy") < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	giveUp()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("read given up on: %v, want context.Canceled", err)
		}
	}
	repo, _, err := c.Repositories.Get(context.Background(), "acme", "deploy")
	if err != nil || repo.GetFullName() != "acme/deploy" {
		t.Fatalf("read after the ones given up on: %v %v", repo, err)
	}
	if v := s.LimitViolations(); v != 0 {
		t.Errorf("%d requests went over GitHub's concurrency limit", v)
	}
}

// TestBudgetDefersAWaitForASlotLongerThanARequestMayBeHeld: the one concurrent
// request allowed is in flight and GitHub is slow to answer it. The next request
// does not wait for its slot longer than a request may wait in the client, whose
// timeout would otherwise run out in the queue and look like GitHub failing to
// answer: it is not sent and fails with a *github.BudgetError the caller waits on.
func TestBudgetDefersAWaitForASlotLongerThanARequestMayBeHeld(t *testing.T) {
	s := githubtest.New(t)
	c, _ := budgetClient(t, s, github.Limits{Concurrent: 1, MaxWait: 200 * time.Millisecond}, nil)
	hold := make(chan struct{})
	s.InjectFault(githubtest.Fault{Hold: hold, Times: 1}.On(http.MethodGet, "/repos/acme/deploy"))
	first := make(chan error, 1)
	go func() {
		_, _, err := c.Repositories.Get(context.Background(), "acme", "deploy")
		first <- err
	}()
	for s.FaultHits(http.MethodGet, "/repos/acme/deploy") < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	before := s.TotalRequests()
	second := make(chan error, 1)
	go func() {
		_, _, err := c.Repositories.Get(context.Background(), "acme", "deploy")
		second <- err
	}()
	var err error
	select {
	case err = <-second:
	case <-time.After(30 * time.Second): // far beyond MaxWait: it waited for the slot
		close(hold)
		err = <-second
	}
	var be *github.BudgetError
	if !errors.As(err, &be) || be.Reason != "concurrent" {
		t.Fatalf("read while the only slot is taken: %v, want a *github.BudgetError for the concurrency limit", err)
	}
	if _, ok := github.RetryAt(err, time.Now()); !ok {
		t.Errorf("RetryAt does not read the budget's refusal %v", err)
	}
	if n := s.TotalRequests(); n != before {
		t.Errorf("%d requests sent while the only slot was taken, want none", n-before)
	}
	select {
	case <-hold:
	default:
		close(hold)
	}
	if err := <-first; err != nil {
		t.Errorf("the read in flight: %v", err)
	}
}
