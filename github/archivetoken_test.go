package github_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// TestTarballDownloadErrorNamesNoArchiveToken: the archive link GitHub redirects to
// authorizes the download with a token in its query (codeload's ?token=). A
// download that fails must not name it: the error reaches the log and a plan's
// history, which the team's API and the change's web page show.
func TestTarballDownloadErrorNamesNoArchiveToken(t *testing.T) {
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1\n"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	sha := s.Head(t, "acme/deploy", "main")
	hc := *s.Client()
	hc.Timeout = 200 * time.Millisecond
	c, err := gh.NewClient(&hc).WithAuthToken(s.InstallationToken(t, id, nil, nil).Reveal()).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	s.InjectFault(githubtest.Fault{Hang: true}.On(http.MethodGet, "/_codeload/**"))
	_, err = github.TarballFetcher(c, "acme", "deploy", sha)(context.Background())
	if err == nil {
		t.Fatal("a download that never answers did not fail")
	}
	tokens := s.ArchiveTokens()
	if len(tokens) != 1 {
		t.Fatalf("archive links handed out: %d, want 1 (%v)", len(tokens), err)
	}
	if strings.Contains(err.Error(), tokens[0]) {
		t.Errorf("download error names the archive token: %v", err)
	}
	if !strings.Contains(err.Error(), "/_codeload/acme/deploy/legacy.tar.gz/") {
		t.Errorf("download error %q does not say which download failed", err)
	}
	if !github.Transient(err) {
		t.Errorf("download timeout %v is no longer transient", err)
	}
}

// TestClientLogNamesNoArchiveToken: the App's clients log each request at debug
// level; the archive download's line names the link without its token.
func TestClientLogNamesNoArchiveToken(t *testing.T) {
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1\n"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	sha := s.Head(t, "acme/deploy", "main")
	cc, err := github.NewClientCreator(github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cc.NewInstallationClient(id)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(context.Background())
	body, err := github.TarballFetcher(c, "acme", "deploy", sha)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	tokens := s.ArchiveTokens()
	if len(tokens) != 1 {
		t.Fatalf("archive links handed out: %d, want 1", len(tokens))
	}
	if !strings.Contains(logs.String(), "/_codeload/acme/deploy/legacy.tar.gz/"+sha) {
		t.Fatalf("the download was not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), tokens[0]) {
		t.Errorf("the request log names the archive token:\n%s", logs.String())
	}
}
