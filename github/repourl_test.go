package github

import (
	"strings"
	"testing"
)

func TestParseRepoURL(t *testing.T) {
	want := "https://github.com/org/repo"
	cases := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"https":                      {in: "https://github.com/org/repo", want: want},
		"https with .git":            {in: "https://github.com/Org/Repo.git", want: want},
		"trailing slash":             {in: "https://github.com/org/repo/", want: want},
		".git and trailing slash":    {in: "https://github.com/org/repo.git/", want: want},
		"upper-case host and path":   {in: "HTTPS://GitHub.COM/ORG/REPO", want: want},
		"upper-case .GIT":            {in: "https://github.com/org/repo.GIT", want: want},
		"http":                       {in: "http://github.com/org/repo", want: want},
		"default https port":         {in: "https://github.com:443/org/repo", want: want},
		"credentials dropped":        {in: "https://x-access-token:ghs_abc@github.com/org/repo.git", want: want},
		"scp-like":                   {in: "git@github.com:org/repo.git", want: want},
		"scp-like without user":      {in: "github.com:org/repo", want: want},
		"scp-like leading slash":     {in: "git@github.com:/org/repo.git", want: want},
		"ssh":                        {in: "ssh://git@github.com/org/repo", want: want},
		"ssh with port and .git":     {in: "ssh://git@github.com:22/org/repo.git", want: want},
		"git+ssh":                    {in: "git+ssh://git@github.com/org/repo", want: want},
		"git protocol":               {in: "git://github.com/org/repo.git", want: want},
		"surrounding spaces":         {in: "  https://github.com/org/repo  ", want: want},
		"dots and underscores":       {in: "https://github.com/my-org/my_repo.v2.git", want: "https://github.com/my-org/my_repo.v2"},
		"managed user's repository":  {in: "https://github.com/Mona-Lisa_ACME/deploy", want: "https://github.com/mona-lisa_acme/deploy"},
		"owner with two short codes": {in: "https://github.com/mona_acme_x/deploy", wantErr: true},
		"owner ending in underscore": {in: "https://github.com/mona_/deploy", wantErr: true},

		"enterprise https":            {in: "https://GHE.example.com/Platform/Deploy.git", want: "https://ghe.example.com/platform/deploy"},
		"enterprise custom web port":  {in: "https://ghe.example.com:8443/platform/deploy", want: "https://ghe.example.com:8443/platform/deploy"},
		"enterprise scp-like":         {in: "git@ghe.example.com:platform/deploy.git", want: "https://ghe.example.com/platform/deploy"},
		"enterprise ssh port dropped": {in: "ssh://git@ghe.example.com:7999/platform/deploy", want: "https://ghe.example.com/platform/deploy"},

		"empty":                {in: "   ", wantErr: true},
		"owner only":           {in: "https://github.com/org", wantErr: true},
		"too deep":             {in: "https://github.com/org/repo/tree/main", wantErr: true},
		"query":                {in: "https://github.com/org/repo?ref=main", wantErr: true},
		"fragment":             {in: "https://github.com/org/repo#readme", wantErr: true},
		"unknown scheme":       {in: "ftp://github.com/org/repo", wantErr: true},
		"file scheme":          {in: "file:///srv/git/org/repo", wantErr: true},
		"no host":              {in: "https:///org/repo", wantErr: true},
		"path traversal":       {in: "https://github.com/org/..", wantErr: true},
		"bad owner characters": {in: "https://github.com/or%20g/repo", wantErr: true},
		"owner and name only":  {in: "org/repo", wantErr: true},
		"local path":           {in: "/srv/git/repo", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NormalizeRepoURL(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("NormalizeRepoURL(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizeRepoURL(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("NormalizeRepoURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSameRepo(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"https and scp-like":               {a: "https://github.com/Org/Repo.git", b: "git@github.com:org/repo", want: true},
		"ssh with port and trailing slash": {a: "ssh://git@github.com:22/org/repo.git", b: "https://github.com/org/repo/", want: true},
		"another repository":               {a: "https://github.com/org/repo", b: "https://github.com/org/other", want: false},
		"another owner":                    {a: "https://github.com/org/repo", b: "https://github.com/else/repo", want: false},
		"another host":                     {a: "https://github.com/org/repo", b: "https://ghe.example.com/org/repo", want: false},
		"unparsed, same spelling":          {a: "https://git.example.com/group/sub/repo", b: " https://git.example.com/group/sub/repo", want: true},
		"unparsed, other spelling":         {a: "https://git.example.com/group/sub/repo", b: "https://git.example.com/group/sub/repo.git", want: false},
		"unparsed against parsed":          {a: "https://github.com/org/repo/tree/main", b: "https://github.com/org/repo", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameRepo(tc.a, tc.b); got != tc.want {
				t.Errorf("SameRepo(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := SameRepo(tc.b, tc.a); got != tc.want {
				t.Errorf("SameRepo(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

func TestNormalizeFullNameIsTheFullNameOfTheParsedRepo(t *testing.T) {
	for _, full := range []string{"Org/Repo", "org/repo", "My-Org/my_repo.v2"} {
		r, err := ParseRepoURL("https://github.com/" + full)
		if err != nil {
			t.Fatal(err)
		}
		if got := NormalizeFullName(full); got != r.FullName() {
			t.Errorf("NormalizeFullName(%q) = %q, want %q as ParseRepoURL names it", full, got, r.FullName())
		}
	}
}

func TestRepoFullName(t *testing.T) {
	r, err := ParseRepoURL("git@github.com:Org/Repo.git")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.FullName(); got != "org/repo" {
		t.Errorf("FullName() = %q, want org/repo", got)
	}
	if r.Host != "github.com" {
		t.Errorf("Host = %q, want github.com", r.Host)
	}
}

func TestAppInstallURLAndBotLogin(t *testing.T) {
	a := App{Slug: "kukie", HTMLURL: "https://ghe.example.com/github-apps/kukie"}
	if got, want := a.BotLogin(), "kukie[bot]"; got != want {
		t.Errorf("BotLogin() = %q, want %q", got, want)
	}
	if got, want := a.InstallURL("a b+c"), "https://ghe.example.com/github-apps/kukie/installations/new?state=a+b%2Bc"; got != want {
		t.Errorf("InstallURL() = %q, want %q", got, want)
	}
}

// TestRepoURLErrorsDoNotShowItsCredentials: a repository URL may carry a token
// (an Application's repoURL written https://x-access-token:<token>@github.com/...,
// or the token as the user); ParseRepoURL drops it from what it returns, and an
// error that names a URL it refuses, which reaches the API's answers, plan
// histories and logs, names it without the token, whatever is wrong with it.
func TestRepoURLErrorsDoNotShowItsCredentials(t *testing.T) {
	const token = "ghs_s3cretInstallationToken"
	for _, raw := range []string{
		"https://x-access-token:" + token + "@github.com/org/repo/tree/main", // not owner/repo
		"https://" + token + "@github.com/org/repo?ref=main",                 // a query
		"https://" + token + ":x-oauth-basic@github.com/-org/repo",           // a bad owner
		"https://x-access-token:" + token + "@github.com/org/re po",          // a bad name
		"https://x-access-token:" + token + "@github.com:bad/org/repo",       // does not parse
		"ftp://x-access-token:" + token + "@github.com/org/repo",             // a scheme
		"https://x-access-token:" + token + "@/org/repo",                     // no host
	} {
		_, err := ParseRepoURL(raw)
		if err == nil {
			t.Errorf("ParseRepoURL(%q) accepted it", raw)
			continue
		}
		if strings.Contains(err.Error(), token) {
			t.Errorf("ParseRepoURL error %q shows the token", err)
		}
		if !strings.Contains(err.Error(), "xxxxx@") {
			t.Errorf("ParseRepoURL error %q does not name the URL with its credentials hidden", err)
		}
	}
	// A user that is no secret stays, as the URL was written.
	if _, err := ParseRepoURL("ssh://git@github.com/org/repo/sub"); err == nil || !strings.Contains(err.Error(), `"ssh://git@github.com/org/repo/sub"`) {
		t.Errorf("ParseRepoURL error %v, want it naming the ssh URL whole", err)
	}
}

// TestParseFullNameTakesOnlyAnOwnerAndAName: a payload's "owner/name" is read as
// the key ParseRepoURL gives it, and what names no one repository is refused.
func TestParseFullNameTakesOnlyAnOwnerAndAName(t *testing.T) {
	for full, want := range map[string]string{"Acme/Deploy": "acme/deploy", "my-org/my_repo.v2": "my-org/my_repo.v2", "mona_acme/deploy": "mona_acme/deploy"} {
		got, err := ParseFullName(full)
		r, perr := ParseRepoURL("https://github.com/" + full)
		if err != nil || perr != nil || got != want || got != r.FullName() {
			t.Errorf("ParseFullName(%q) = %q, %v; want %q, as ParseRepoURL names it (%q, %v)", full, got, err, want, r.FullName(), perr)
		}
	}
	for _, full := range []string{"", "acme", "acme/", "/deploy", "acme/deploy/x", "../etc", "acme/..", "acme/deploy.git", "-acme/deploy", "acme/de ploy", "acme/deploy?x"} {
		if got, err := ParseFullName(full); err == nil {
			t.Errorf("ParseFullName(%q) = %q, want an error", full, got)
		}
	}
}
