package githubtest_test

import (
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
