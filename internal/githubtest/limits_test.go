package githubtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/githubtest"
)

func TestSecondaryLimitsRefuseContentOverTheWindow(t *testing.T) {
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"a": "1\n"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	token := s.InstallationToken(t, id, nil, nil).Reveal()
	s.EnforceSecondaryLimits(githubtest.SecondaryLimits{Content: 2, Per: time.Minute})
	post := func() *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.APIURL()+"repos/acme/deploy/git/blobs", strings.NewReader(`{"content":"x","encoding":"utf-8"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token "+token)
		res, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for i := range 2 {
		if res := post(); res.StatusCode != http.StatusCreated {
			t.Fatalf("write %d: %d, want 201", i, res.StatusCode)
		}
	}
	res := post()
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Retry-After") == "" {
		t.Fatalf("third write in the minute: %d Retry-After %q, want 403 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if v := s.LimitViolations(); v != 1 {
		t.Fatalf("%d violations, want 1", v)
	}
	if n := s.RequestCount("POST /repos/{owner}/{repo}/git/blobs"); n != 2 {
		t.Errorf("%d writes served, want 2", n)
	}
}

// TestSecondaryLimitsCountARequestItsClientGaveUpOn: GitHub serves a request whose
// client gave up as long as it would have, and counts it in flight meanwhile: a read
// given up on that GitHub holds, is slow to answer or never answers still fills the
// one concurrent request allowed, and the next is refused until the hold is over,
// the answer would have been sent, or GitHub's server timeout ended the request.
func TestSecondaryLimitsCountARequestItsClientGaveUpOn(t *testing.T) {
	held := make(chan struct{})
	for _, tc := range []struct {
		name          string
		fault         githubtest.Fault
		serverTimeout time.Duration
		over          func() // ends the fault's hold, if the test does
	}{
		{name: "held", fault: githubtest.Fault{Hold: held}, serverTimeout: time.Hour, over: func() { close(held) }},
		{name: "slow", fault: githubtest.Fault{Delay: 2 * time.Second}, serverTimeout: time.Hour},
		{name: "hangs", fault: githubtest.Fault{Hang: true}, serverTimeout: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := githubtest.New(t)
			s.CreateRepo(t, "acme", "deploy", map[string]string{"a": "1\n"}, "main")
			id := s.CreateInstallation(t, "acme", "deploy")
			token := s.InstallationToken(t, id, nil, nil).Reveal()
			s.EnforceSecondaryLimits(githubtest.SecondaryLimits{Concurrent: 1, ServerTimeout: tc.serverTimeout})
			f := tc.fault.On(http.MethodGet, "/repos/acme/deploy")
			f.Times = 1
			s.InjectFault(f)
			get := func(ctx context.Context) (*http.Response, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.APIURL()+"repos/acme/deploy", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "token "+token)
				res, err := s.Client().Do(req)
				if err == nil {
					res.Body.Close()
				}
				return res, err
			}
			gctx, giveUp := context.WithCancel(context.Background())
			gaveUp := make(chan error, 1)
			go func() {
				_, err := get(gctx)
				gaveUp <- err
			}()
			for s.FaultHits(http.MethodGet, "/repos/acme/deploy") < 1 {
				time.Sleep(10 * time.Millisecond)
			}
			giveUp()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Fatalf("read given up on: %v, want context.Canceled", err)
			}
			res, err := get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusForbidden || s.LimitViolations() != 1 {
				t.Fatalf("read beside the one given up on: %d, %d violations, want 403 and 1", res.StatusCode, s.LimitViolations())
			}
			if tc.over != nil {
				tc.over()
			}
			// Once GitHub is done with it, reads go through; until then each is refused.
			deadline := time.Now().Add(time.Minute)
			for res.StatusCode == http.StatusForbidden && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				if res, err = get(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if res.StatusCode != http.StatusOK {
				t.Fatalf("read once GitHub is done with the one given up on: %d, want 200", res.StatusCode)
			}
		})
	}
}
