package githubtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

const getRepoEndpoint = "GET /repos/{owner}/{repo}"

func TestFaultPathPatterns(t *testing.T) {
	cases := map[string]struct {
		pattern, path string
		want          bool
	}{
		"empty matches all":        {"", "/repos/acme/deploy", true},
		"star is one segment":      {"/repos/*/*/check-runs", "/repos/acme/deploy/check-runs", true},
		"star is not two segments": {"/repos/*/check-runs", "/repos/acme/deploy/check-runs", false},
		"no prefix match":          {"/repos/*/*/check-runs", "/repos/acme/deploy/check-runs/7", false},
		"star inside a segment":    {"/repos/acme/*/git/*", "/repos/acme/deploy/git/blobs", true},
		"glob within a segment":    {"/repos/*/*/check-*", "/repos/acme/deploy/check-runs", true},
		"literal mismatch":         {"/repos/acme/*", "/repos/other/deploy", false},
		"double star tail":         {"/repos/*/*/git/refs/**", "/repos/acme/deploy/git/refs/heads/kukie/p-1", true},
		"double star needs one":    {"/repos/*/*/tarball/**", "/repos/acme/deploy/tarball", false},
		"shorter path":             {"/repos/*/*/pulls", "/repos/acme/deploy", false},
		"slashes at the ends":      {"repos/*/*/", "/repos/acme/deploy", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := matchSegments(splitPath(tc.pattern), splitPath(tc.path)); got != tc.want {
				t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
			}
		})
	}
}

func TestFaultBadPatternPanics(t *testing.T) {
	s := New(t)
	defer func() {
		if recover() == nil {
			t.Fatal("a malformed pattern was accepted")
		}
	}()
	s.InjectFault(Fault{Path: "/repos/[/x", Status: 502})
}

func TestServerErrorTimesThenPassThrough(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	s.ResetRequestCounts()
	first := ServerError(http.StatusBadGateway).On(http.MethodGet, "/repos/*/*")
	first.Times = 1
	s.InjectFault(first)
	second := ServerError(http.StatusServiceUnavailable).On(http.MethodGet, "/repos/acme/deploy")
	second.Times = 2
	s.InjectFault(second)

	// The fault injected first answers while it has requests left, then the next.
	_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	if er := wantStatus(t, err, http.StatusBadGateway); er.Message != "Bad Gateway" {
		t.Errorf("message = %q, want the status text", er.Message)
	}
	for i := 0; i < 2; i++ {
		_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
		wantStatus(t, err, http.StatusServiceUnavailable)
	}
	if _, _, err := c.Repositories.Get(ctx, "acme", "deploy"); err != nil {
		t.Fatalf("request after both ran out: %v", err)
	}
	if n := s.FaultHits(http.MethodGet, "/repos/*/*"); n != 1 {
		t.Errorf("first fault hits = %d, want 1", n)
	}
	if n := s.FaultHits(http.MethodGet, "/repos/acme/deploy"); n != 2 {
		t.Errorf("second fault hits = %d, want 2", n)
	}
	if n := s.RequestCount(getRepoEndpoint); n != 1 {
		t.Errorf("endpoint served %d requests, want 1 (faulted ones are not served)", n)
	}
	if n := s.TotalRequests(); n != 4 {
		t.Errorf("total requests = %d, want 4", n)
	}
}

func TestFaultMatchesMethodAndRemoves(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	head := s.Head(t, "acme/deploy", "main")
	remove := s.InjectFault(ServerError(http.StatusInternalServerError).On(http.MethodPost, "/repos/*/*/check-runs"))

	if _, _, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "deploy", head, nil); err != nil {
		t.Fatalf("a GET was affected by a POST fault: %v", err)
	}
	opts := github.CreateCheckRunOptions{Name: "kukie/render", HeadSHA: head}
	_, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", opts)
	wantStatus(t, err, http.StatusInternalServerError)
	if n := len(s.CheckRuns(t, "acme/deploy", head)); n != 0 {
		t.Fatalf("a faulted create made %d check runs", n)
	}
	remove()
	if _, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", opts); err != nil {
		t.Fatalf("create after remove: %v", err)
	}
	if n := s.FaultHits(http.MethodPost, "/repos/*/*/check-runs"); n != 1 {
		t.Errorf("fault hits = %d, want 1", n)
	}
}

func TestFaultOnArchiveDownload(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	f := ServerError(http.StatusBadGateway).On("", "/repos/*/*/tarball/**")
	f.Times = 1
	s.InjectFault(f)
	_, resp, err := c.Repositories.GetArchiveLink(ctx, "acme", "deploy", github.Tarball, &github.RepositoryContentGetOptions{Ref: "main"}, 0)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("want 502, got %v %v", resp, err)
	}
	link, _, err := c.Repositories.GetArchiveLink(ctx, "acme", "deploy", github.Tarball, &github.RepositoryContentGetOptions{Ref: "main"}, 0)
	if err != nil {
		t.Fatalf("archive link after the fault: %v", err)
	}

	// The redirect target is a path of its own.
	s.InjectFault(ServerError(http.StatusServiceUnavailable).On(http.MethodGet, "/_codeload/**"))
	dl, err := s.Client().Get(link.String())
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	_ = dl.Body.Close()
	if dl.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("download status = %d, want 503", dl.StatusCode)
	}
}

func TestPrimaryRateLimitIsGoGithubsRateLimitError(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	s.InjectFault(PrimaryRateLimit(reset).On(http.MethodGet, "/repos/*/*"))

	_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("want *github.RateLimitError, got %T: %v", err, err)
	}
	if !rl.Rate.Reset.Time.Equal(reset) || rl.Rate.Remaining != 0 || rl.Rate.Limit != rateLimitPerHour {
		t.Errorf("rate = %+v, want reset %v with nothing remaining", rl.Rate, reset)
	}
	if rl.Response.StatusCode != http.StatusForbidden || rl.Message == "" {
		t.Errorf("status %d message %q", rl.Response.StatusCode, rl.Message)
	}
}

func TestSecondaryRateLimitIsGoGithubsAbuseRateLimitError(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	s.InjectFault(SecondaryRateLimit(1500*time.Millisecond).On(http.MethodGet, "/repos/*/*"))

	_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	var al *github.AbuseRateLimitError
	if !errors.As(err, &al) {
		t.Fatalf("want *github.AbuseRateLimitError, got %T: %v", err, err)
	}
	if al.RetryAfter == nil || *al.RetryAfter != 2*time.Second {
		t.Errorf("retry after = %v, want 2s (whole seconds, rounded up)", al.RetryAfter)
	}
}

func TestRateLimitAs429KeepsHeaders(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	f := SecondaryRateLimit(time.Minute).On(http.MethodGet, "/repos/*/*")
	f.Status = http.StatusTooManyRequests
	s.InjectFault(f)

	_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	er := wantStatus(t, err, http.StatusTooManyRequests)
	if got := er.Response.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After = %q, want 60", got)
	}
}

func TestHangHoldsUntilTheClientGivesUp(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	s.ResetRequestCounts()
	remove := s.InjectFault(Fault{Method: http.MethodGet, Path: "/repos/*/*", Hang: true})

	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err := c.Repositories.Get(tctx, "acme", "deploy")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the client's deadline, got %v", err)
	}
	if n := s.RequestCount(getRepoEndpoint); n != 0 {
		t.Errorf("a hung request was served %d times", n)
	}
	remove()
	if _, _, err := c.Repositories.Get(ctx, "acme", "deploy"); err != nil {
		t.Fatalf("after remove: %v", err)
	}
	if n := s.FaultHits(http.MethodGet, "/repos/*/*"); n != 1 {
		t.Errorf("fault hits = %d, want 1", n)
	}
}

func TestDelayHoldsThenPassesThrough(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	s.ResetRequestCounts()

	// A delay longer than the client waits: the request never reaches the handler.
	remove := s.InjectFault(Fault{Method: http.MethodGet, Path: "/repos/*/*", Delay: time.Hour})
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Repositories.Get(tctx, "acme", "deploy"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the client's deadline, got %v", err)
	}
	if n := s.RequestCount(getRepoEndpoint); n != 0 {
		t.Errorf("a held request was served %d times", n)
	}
	remove()

	// A short delay with no status: the real handler answers.
	f := Fault{Method: http.MethodGet, Path: "/repos/*/*", Delay: time.Millisecond, Times: 1}
	s.InjectFault(f)
	repo, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	if err != nil || repo.GetFullName() != "acme/deploy" {
		t.Fatalf("delayed request: %v %v", repo, err)
	}
	if n := s.RequestCount(getRepoEndpoint); n != 1 {
		t.Errorf("endpoint served %d, want 1", n)
	}

	// A delay then a status.
	s.InjectFault(Fault{Method: http.MethodGet, Path: "/repos/*/*", Delay: time.Millisecond, Status: http.StatusGatewayTimeout, Times: 1})
	_, _, err = c.Repositories.Get(ctx, "acme", "deploy")
	wantStatus(t, err, http.StatusGatewayTimeout)
	if n := s.FaultHits(http.MethodGet, "/repos/*/*"); n != 3 {
		t.Errorf("fault hits = %d, want 3", n)
	}
}

func TestCloseEndsHungRequests(t *testing.T) {
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	s.InjectFault(Fault{Hang: true})
	done := make(chan error, 1)
	go func() {
		resp, err := s.Client().Get(s.URL() + "/app")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		done <- err
	}()
	for s.FaultHits("", "") == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close() // must not wait for the client, which has no deadline
	<-done
}

func TestFaultCustomBodyAndHeaders(t *testing.T) {
	s := New(t)
	s.InjectFault(Fault{
		Path:   "/app",
		Status: http.StatusServiceUnavailable,
		Header: http.Header{"Retry-After": {"5"}},
		Body:   "<html>unicorn</html>",
	})
	resp, err := s.Client().Get(s.URL() + "/api/v3/app")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "<html>unicorn</html>" || resp.Header.Get("Retry-After") != "5" {
		t.Errorf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

func TestHoldAnswersOnceReleased(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	s.ResetRequestCounts()
	release := make(chan struct{})
	s.InjectFault(Fault{Method: http.MethodGet, Path: "/repos/*/*", Hold: release, Times: 1})
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
		answered <- err
	}()
	for s.FaultHits(http.MethodGet, "/repos/*/*") == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-answered:
		t.Fatalf("a held request was answered before its release: %v", err)
	default:
	}
	if n := s.RequestCount(getRepoEndpoint); n != 0 {
		t.Errorf("a held request was served %d times", n)
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatalf("released request: %v", err)
	}
	if n := s.RequestCount(getRepoEndpoint); n != 1 {
		t.Errorf("endpoint served %d, want 1", n)
	}
}

// TestServedFaultMakesTheEffectAndLosesTheAnswer: a Served fault lets the request
// do its work (the check run exists) and answers its status instead, or nothing
// with Hang; the request counts once, as one its endpoint served.
func TestServedFaultMakesTheEffectAndLosesTheAnswer(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	head := s.Head(t, "acme/deploy", "main")
	s.ResetRequestCounts()
	const endpoint = "POST /repos/{owner}/{repo}/check-runs"

	lost := ServerError(http.StatusBadGateway).On(http.MethodPost, "/repos/*/*/check-runs")
	lost.Served, lost.Times = true, 1
	s.InjectFault(lost)
	_, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{Name: "first", HeadSHA: head})
	wantStatus(t, err, http.StatusBadGateway)
	if runs := s.CheckRuns(t, "acme/deploy", head); len(runs) != 1 || runs[0].GetName() != "first" {
		t.Fatalf("check runs after a lost answer: %v, want the one created", runs)
	}

	hung := Fault{Method: http.MethodPost, Path: "/repos/*/*/check-runs", Served: true, Hang: true, Times: 1}
	s.InjectFault(hung)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Checks.CreateCheckRun(tctx, "acme", "deploy", github.CreateCheckRunOptions{Name: "second", HeadSHA: head}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the client's deadline, got %v", err)
	}
	if runs := s.CheckRuns(t, "acme/deploy", head); len(runs) != 2 {
		t.Fatalf("%d check runs after a hung answer, want both created", len(runs))
	}
	if n := s.RequestCount(endpoint); n != 2 {
		t.Errorf("endpoint served %d requests, want 2", n)
	}
	if n := s.TotalRequests(); n != 2 {
		t.Errorf("total requests = %d, want 2 (a served fault counts once)", n)
	}
	if n := s.FaultHits(http.MethodPost, "/repos/*/*/check-runs"); n != 2 {
		t.Errorf("fault hits = %d, want 2", n)
	}

	defer func() {
		if recover() == nil {
			t.Error("a Served fault without a status or Hang was accepted")
		}
	}()
	s.InjectFault(Fault{Served: true})
}
