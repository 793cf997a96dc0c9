package githubtest

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
)

func TestRecordRequestsKeepsBodiesAndServesThem(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"a.txt": "a\n"})
	if _, _, err := c.Git.CreateBlob(ctx, "acme", "deploy", &github.Blob{Content: github.String("before"), Encoding: github.String("utf-8")}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests recorded before RecordRequests", n)
	}
	s.RecordRequests()
	blob, _, err := c.Git.CreateBlob(ctx, "acme", "deploy", &github.Blob{Content: github.String("recorded-body"), Encoding: github.String("utf-8")})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/repos/acme/deploy/git/blobs" ||
		!strings.Contains(string(reqs[0].Body), "recorded-body") {
		t.Fatalf("recorded %+v", reqs)
	}
	if content, ok := readBlob(t, c, blob.GetSHA()); !ok || content != "recorded-body" {
		t.Fatalf("the blob the handler stored is %q: recording consumed the body", content)
	}
}

func readBlob(t *testing.T, c *github.Client, sha string) (string, bool) {
	t.Helper()
	b, _, err := c.Git.GetBlob(ctx, "acme", "deploy", sha)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(b.GetContent(), "\n", ""))
	return string(raw), err == nil
}
