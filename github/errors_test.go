package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// TestRetryAtAndTransientReadGitHubsAnswers sends real requests through go-github to
// the fake answering each kind of failure and checks how the error is classified.
func TestRetryAtAndTransientReadGitHubsAnswers(t *testing.T) {
	reset := time.Now().Add(37 * time.Minute).Truncate(time.Second)
	tooMany := githubtest.SecondaryRateLimit(90 * time.Second)
	tooMany.Status = http.StatusTooManyRequests
	primary429 := githubtest.PrimaryRateLimit(reset)
	primary429.Status = http.StatusTooManyRequests
	cases := map[string]struct {
		fault githubtest.Fault
		// wantWait is how long after the request the retry may come (0: not a rate limit).
		wantWait      time.Duration
		wantReset     time.Time
		wantTransient bool
	}{
		"primary rate limit":        {fault: githubtest.PrimaryRateLimit(reset), wantReset: reset, wantTransient: true},
		"primary rate limit as 429": {fault: primary429, wantReset: reset, wantTransient: true},
		"secondary rate limit":      {fault: githubtest.SecondaryRateLimit(42 * time.Second), wantWait: 42 * time.Second, wantTransient: true},
		"secondary as 429":          {fault: tooMany, wantWait: 90 * time.Second, wantTransient: true},
		"429 without headers":       {fault: githubtest.Fault{Status: http.StatusTooManyRequests}, wantWait: time.Minute, wantTransient: true},
		"bad gateway":               {fault: githubtest.ServerError(http.StatusBadGateway), wantTransient: true},
		"service unavailable":       {fault: githubtest.ServerError(http.StatusServiceUnavailable), wantTransient: true},
		"refused permission":        {fault: githubtest.Fault{Status: http.StatusForbidden, Body: `{"message":"Resource not accessible by integration"}`}},
		"not found":                 {fault: githubtest.Fault{Status: http.StatusNotFound}},
		"validation":                {fault: githubtest.Fault{Status: http.StatusUnprocessableEntity}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := githubtest.New(t)
			c := installationClient(t, s, map[string]string{"f": "1\n"})
			s.InjectFault(tc.fault.On(http.MethodGet, "/repos/*/*"))
			before := time.Now()
			_, _, err := c.Repositories.Get(context.Background(), "acme", "deploy")
			after := time.Now()
			if err == nil {
				t.Fatal("the fault did not fail the request")
			}
			checkClassified(t, err, before, after, tc.wantReset, tc.wantWait, tc.wantTransient)
		})
	}
}

func checkClassified(t *testing.T, err error, before, after, wantReset time.Time, wantWait time.Duration, wantTransient bool) {
	t.Helper()
	at, ok := github.RetryAt(err, before)
	switch {
	case !wantReset.IsZero():
		if !ok || !at.Equal(wantReset) {
			t.Errorf("RetryAt = %v %v, want the reset %v", at, ok, wantReset)
		}
	case wantWait > 0:
		// Retry-After counts from the answer, which came between before and after.
		if !ok || at.Before(before.Add(wantWait)) || at.After(after.Add(wantWait)) {
			t.Errorf("RetryAt = %v %v, want %v after the request", at, ok, wantWait)
		}
	default:
		if ok {
			t.Errorf("RetryAt = %v for %v, want no rate limit", at, err)
		}
	}
	if got := github.Transient(err); got != wantTransient {
		t.Errorf("Transient(%v) = %v, want %v", err, got, wantTransient)
	}
}

func TestTarballFetcherFailuresAreClassified(t *testing.T) {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	cases := map[string]struct {
		fault         githubtest.Fault
		wantReset     time.Time
		wantTransient bool
	}{
		"link 502":             {fault: githubtest.ServerError(http.StatusBadGateway).On("", "/repos/*/*/tarball/**"), wantTransient: true},
		"link rate limited":    {fault: githubtest.PrimaryRateLimit(reset).On("", "/repos/*/*/tarball/**"), wantReset: reset, wantTransient: true},
		"download 503":         {fault: githubtest.ServerError(http.StatusServiceUnavailable).On("", "/_codeload/**"), wantTransient: true},
		"link 404":             {fault: githubtest.Fault{Status: http.StatusNotFound}.On("", "/repos/*/*/tarball/**")},
		"download rate limits": {fault: githubtest.PrimaryRateLimit(reset).On("", "/_codeload/**"), wantReset: reset, wantTransient: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := githubtest.New(t)
			c := installationClient(t, s, map[string]string{"f": "1\n"})
			sha := s.Head(t, "acme/deploy", "main")
			s.InjectFault(tc.fault)
			now := time.Now()
			_, err := github.TarballFetcher(c, "acme", "deploy", sha)(context.Background())
			if err == nil {
				t.Fatal("the fault did not fail the download")
			}
			checkClassified(t, err, now, now, tc.wantReset, 0, tc.wantTransient)
		})
	}
}

// TestTarballOfACommitTheRepositoryDoesNotHold: the archive of a commit GitHub does
// not know (a SHA mistyped, or a commit Argo CD synced before a force push removed
// it) is ErrRevisionNotFound, which callers answer as revision_not_found (failed
// before: a bare 404 that reached the caller as "internal: the request failed; it
// can be retried", which no retry mends).
func TestTarballOfACommitTheRepositoryDoesNotHold(t *testing.T) {
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"f": "1\n"})
	_, err := github.TarballFetcher(c, "acme", "deploy", strings.Repeat("d", 40))(context.Background())
	if !errors.Is(err, github.ErrRevisionNotFound) || github.Transient(err) {
		t.Fatalf("tarball of a commit acme/deploy does not hold: %v, want ErrRevisionNotFound, not transient", err)
	}
	// A 404 of the download itself, after GitHub gave the link, is not the commit's.
	s.InjectFault(githubtest.Fault{Status: http.StatusNotFound}.On("", "/_codeload/**"))
	_, err = github.TarballFetcher(c, "acme", "deploy", s.Head(t, "acme/deploy", "main"))(context.Background())
	if err == nil || errors.Is(err, github.ErrRevisionNotFound) {
		t.Fatalf("a download answered 404: %v, want an error other than ErrRevisionNotFound", err)
	}
}

func TestTransientTimeoutsAndCancels(t *testing.T) {
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"f": "1\n"})
	s.InjectFault(githubtest.Fault{Hang: true})

	// A client timeout (http.Client.Timeout, as the App's clients set it).
	hc := *s.Client()
	hc.Timeout = 50 * time.Millisecond
	tc, err := gh.NewClient(&hc).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = tc.Repositories.Get(context.Background(), "acme", "deploy")
	if err == nil || !github.Transient(err) {
		t.Errorf("client timeout %v: Transient = false", err)
	}

	// A deadline of the caller.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err = c.Repositories.Get(ctx, "acme", "deploy")
	if err == nil || !github.Transient(err) {
		t.Errorf("deadline %v: Transient = false", err)
	}

	// Shutdown is not something to retry.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, _, err = c.Repositories.Get(ctx, "acme", "deploy")
	if err == nil || github.Transient(err) {
		t.Errorf("cancelled %v: Transient = true", err)
	}
}

// TestTarballFetcherObeysClientTimeout: go-github sends the archive link request past
// the HTTP client's timeout; a GitHub that never answers it must still fail the
// download after the timeout rather than hold the plan forever.
func TestTarballFetcherObeysClientTimeout(t *testing.T) {
	s := githubtest.New(t)
	installationClient(t, s, map[string]string{"f": "1\n"})
	sha := s.Head(t, "acme/deploy", "main")
	hc := *s.Client()
	hc.Timeout = 100 * time.Millisecond
	c, err := gh.NewClient(&hc).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	s.InjectFault(githubtest.Fault{Hang: true}.On(http.MethodGet, "/repos/*/*/tarball/**"))
	done := make(chan error, 1)
	go func() {
		_, err := github.TarballFetcher(c, "acme", "deploy", sha)(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !github.Transient(err) {
			t.Fatalf("hung link request: %v, want a transient timeout", err)
		}
	case <-time.After(20 * time.Second): // a liveness guard, far beyond the timeout
		t.Fatal("the archive link request ignored the client's timeout and never returned")
	}
}

// TestAnswerSaysWhatGitHubAnsweredInWords: what a change's problem and history say
// of a request to GitHub that failed is its status and GitHub's message, or that no
// answer came, and never the request's method, address or an archive link's token,
// which the error itself names. A connection that failed is GitHub's only when it
// was a call of Repos: a cluster's or a chart repository's is no answer of GitHub.
func TestAnswerSaysWhatGitHubAnsweredInWords(t *testing.T) {
	const forbidden = `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/git/refs#update-a-reference","status":"403"}`
	const invalid = `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for acme:kukie/abc."}],"status":"422"}`
	cases := map[string]struct {
		fault githubtest.Fault
		call  func(ctx context.Context, r github.Repos, inst int64, sha string) error
		want  string
	}{
		"503": {fault: githubtest.ServerError(http.StatusServiceUnavailable).On(http.MethodGet, "/repos/*/*/pulls/*"),
			call: func(ctx context.Context, r github.Repos, inst int64, _ string) error {
				_, err := r.GetPull(ctx, inst, "acme/deploy", 1)
				return err
			}, want: "GitHub answered 503 Service Unavailable"},
		"refused with a message": {fault: githubtest.Fault{Status: http.StatusForbidden, Body: forbidden}.On(http.MethodPatch, "/repos/*/*/git/refs/**"),
			call: func(ctx context.Context, r github.Repos, inst int64, sha string) error {
				return r.SetBranch(ctx, inst, "acme/deploy", "kukie/abc", sha)
			}, want: "GitHub answered 403 Forbidden: Resource not accessible by integration"},
		"invalid, with the errors GitHub lists": {fault: githubtest.Fault{Status: http.StatusUnprocessableEntity, Body: invalid}.On(http.MethodPatch, "/repos/*/*/pulls/*"),
			call: func(ctx context.Context, r github.Repos, inst int64, _ string) error {
				return r.EditPull(ctx, inst, "acme/deploy", 1, "title", "body")
			}, want: "GitHub answered 422 Unprocessable Entity: Validation Failed; A pull request already exists for acme:kukie/abc."},
		"a message naming an address": {fault: githubtest.Fault{Status: http.StatusBadRequest, Body: `{"message":"see https://x.example/?token=abc"}`}.On(http.MethodGet, "/repos/*/*/pulls/*"),
			call: func(ctx context.Context, r github.Repos, inst int64, _ string) error {
				_, err := r.GetPull(ctx, inst, "acme/deploy", 1)
				return err
			}, want: "GitHub answered 400 Bad Request"},
		"no answer to the download": {fault: githubtest.Fault{Hang: true}.On(http.MethodGet, "/_codeload/**"),
			call: func(ctx context.Context, r github.Repos, inst int64, sha string) error {
				_, err := r.Snapshot(ctx, inst, "acme/deploy", sha)
				return err
			}, want: "GitHub did not answer in time"},
		"archive link refused": {fault: githubtest.Fault{Status: http.StatusForbidden}.On(http.MethodGet, "/repos/*/*/tarball/**"),
			call: func(ctx context.Context, r github.Repos, inst int64, sha string) error {
				_, err := r.Snapshot(ctx, inst, "acme/deploy", sha)
				return err
			}, want: "GitHub answered 403 Forbidden"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := githubtest.New(t)
			s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1\n"}, "main")
			inst := s.CreateInstallation(t, "acme", "deploy")
			sha := s.Head(t, "acme/deploy", "main")
			s.PushCommit(t, "acme/deploy", "kukie/abc", map[string]string{"g": "2\n"}, githubtest.DefaultAuthor)
			s.OpenPullRequest(t, "acme/deploy", "kukie/abc", "main", "kukie: scale Deployment/web", githubtest.DefaultAuthor)
			cc, err := github.NewClientCreator(github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL(),
				Timeout: 500 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.DefaultArchiveLimits)
			if err != nil {
				t.Fatal(err)
			}
			s.InjectFault(tc.fault)
			err = tc.call(context.Background(), github.Repos{Clients: cc, Archives: archives}, inst, sha)
			if err == nil {
				t.Fatal("the fault did not fail the call")
			}
			got, ok := github.Answer(err)
			if !ok || got != tc.want {
				t.Errorf("Answer(%v) = %q, %v; want %q", err, got, ok, tc.want)
			}
			for _, raw := range append([]string{s.URL(), "/repos/", "token"}, s.ArchiveTokens()...) {
				if strings.Contains(got, raw) {
					t.Errorf("answer %q holds %q", got, raw)
				}
			}
		})
	}
	t.Run("a connection to another server", func(t *testing.T) {
		err := fmt.Errorf("list applications: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/apis", Err: errors.New("connection refused")})
		if got, ok := github.Answer(err); ok {
			t.Errorf("Answer of a cluster's connection = %q, want none", got)
		}
	})
}
