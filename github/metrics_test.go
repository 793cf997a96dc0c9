package github_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kukie/kukie-gitops/internal/githubtest"
)

func TestRateLimitRemainingIsReportedPerInstallation(t *testing.T) {
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "one", map[string]string{"a": "1\n"}, "main")
	s.CreateRepo(t, "acme", "two", map[string]string{"a": "1\n"}, "main")
	one := s.CreateInstallation(t, "acme", "one")
	two := s.CreateInstallation(t, "acme", "two")
	s.InjectFault(githubtest.PrimaryRateLimit(time.Now().Add(time.Hour)).On("GET", "/repos/acme/one"))
	s.InjectFault(githubtest.Fault{Status: http.StatusNotFound, Header: http.Header{"X-Ratelimit-Remaining": {"4321"}}}.On("GET", "/repos/acme/two"))
	reg := prometheus.NewPedanticRegistry()
	cc := appClients(t, s, reg)
	ctx := context.Background()
	for id, repo := range map[int64]string{one: "one", two: "two"} {
		c, err := cc.NewInstallationClient(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Repositories.Get(ctx, "acme", repo); err == nil {
			t.Fatalf("GET acme/%s passed the fault", repo)
		}
	}
	want := `
# HELP kukie_github_rate_limit_remaining Requests left in the current rate limit window, as last reported by GitHub, per installation id ("app": the App's own requests, "user": people's tokens).
# TYPE kukie_github_rate_limit_remaining gauge
kukie_github_rate_limit_remaining{installation="` + strconv.FormatInt(one, 10) + `"} 0
kukie_github_rate_limit_remaining{installation="` + strconv.FormatInt(two, 10) + `"} 4321
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kukie_github_rate_limit_remaining"); err != nil {
		t.Fatal(err)
	}
}
