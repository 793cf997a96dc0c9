package githubtest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-github/v62/github"
)

// apiClient is a go-github client for the fake, authenticated with token (none if "").
func apiClient(t *testing.T, s *Server, token string) *github.Client {
	t.Helper()
	c := github.NewClient(s.Client())
	if token != "" {
		c = c.WithAuthToken(token)
	}
	c, err := c.WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatalf("enterprise client: %v", err)
	}
	return c
}

// installedRepo creates org/name with files, installs the App on it and returns a
// client with an installation token for it.
func installedRepo(t *testing.T, s *Server, files map[string]string) (*github.Client, int64) {
	t.Helper()
	s.CreateRepo(t, "acme", "deploy", files, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	return apiClient(t, s, s.InstallationToken(t, id, nil, nil).Reveal()), id
}

// errorStatus returns the HTTP status and GitHub error of a go-github error.
func errorStatus(t *testing.T, err error) (int, *github.ErrorResponse) {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("want a GitHub error response, got %v", err)
	}
	return er.Response.StatusCode, er
}

func wantStatus(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	if err == nil {
		t.Fatalf("want HTTP %d, got success", status)
	}
	got, er := errorStatus(t, err)
	if got != status {
		t.Fatalf("want HTTP %d, got %d: %v", status, got, err)
	}
	if er.DocumentationURL == "" {
		t.Errorf("error body has no documentation_url: %v", err)
	}
	return er
}

var ctx = context.Background()
