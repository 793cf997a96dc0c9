package github

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Repo names one repository on one GitHub host. All fields are lower case: GitHub
// treats owner and repository names case-insensitively, so the lower-case form is the
// one key under which a repository is stored, compared and locked.
type Repo struct {
	Host  string // "github.com", "ghe.example.com", "ghe.example.com:8443"
	Owner string
	Name  string
}

// URL is the canonical form: "https://<host>/<owner>/<name>".
func (r Repo) URL() string { return "https://" + r.Host + "/" + r.Owner + "/" + r.Name }

// FullName is "<owner>/<name>", as GitHub's API spells a repository.
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// String implements fmt.Stringer with the canonical URL.
func (r Repo) String() string { return r.URL() }

var (
	// GitHub logins: alphanumerics and single hyphens; repository names also allow
	// '.' and '_'. Both are checked loosely (GitHub enforces the details), strictly
	// enough that nothing else, like a path traversal or a query, gets through.
	ownerPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,38})$`)
	namePattern  = regexp.MustCompile(`^[a-z0-9._-]{1,100}$`)
	// scp-like git syntax: [user@]host:path, with no scheme.
	scpPattern = regexp.MustCompile(`^(?:[^@/:]+@)?([^@/:]+):(.+)$`)
)

// NormalizeRepoURL returns the canonical URL of the repository that raw names; see
// ParseRepoURL.
func NormalizeRepoURL(raw string) (string, error) {
	r, err := ParseRepoURL(raw)
	if err != nil {
		return "", err
	}
	return r.URL(), nil
}

// SameRepo reports whether two repository URLs name one repository, however each is
// spelled (see ParseRepoURL). A URL that does not parse as a repository names
// nothing this package can normalize, so it is the same only as its own spelling.
func SameRepo(a, b string) bool {
	ra, errA := ParseRepoURL(a)
	rb, errB := ParseRepoURL(b)
	if errA != nil || errB != nil {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	return ra == rb
}

// NormalizeFullName returns the key of a repository that a webhook payload or the
// API spells "owner/name": the lower-case form Repo.FullName gives, under which
// plans, locks and connections name it.
func NormalizeFullName(fullName string) string { return strings.ToLower(fullName) }

// ParseRepoURL reads a repository URL as Argo CD and git clients spell it and returns
// the repository it names. These all name one repository:
//
//	https://github.com/Org/Repo.git
//	https://github.com/org/repo/
//	http://github.com/org/repo
//	git@github.com:org/repo.git
//	ssh://git@github.com/org/repo
//	ssh://git@github.com:22/org/repo.git
//	git://github.com/org/repo
//
// Credentials in the URL are dropped. Ports are kept for http(s) (a web host on a
// non-default port is a different host) and dropped for ssh and git (the ssh port
// says nothing about which repository it is). A path that is not exactly
// owner/name, a query or a fragment is an error: such a URL names something else.
func ParseRepoURL(raw string) (Repo, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Repo{}, fmt.Errorf("parse repository URL: empty")
	}
	var host, path string
	if !strings.Contains(s, "://") {
		m := scpPattern.FindStringSubmatch(s)
		if m == nil {
			return Repo{}, fmt.Errorf("parse repository URL %q: want https://host/owner/repo, ssh://git@host/owner/repo or git@host:owner/repo", raw)
		}
		host, path = m[1], m[2]
	} else {
		u, err := url.Parse(s)
		if err != nil {
			return Repo{}, fmt.Errorf("parse repository URL %q: %w", raw, err)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return Repo{}, fmt.Errorf("parse repository URL %q: a repository URL has no query or fragment", raw)
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			host = stripPort(u.Host, "443")
		case "http":
			host = stripPort(u.Host, "80")
		case "ssh", "git+ssh", "git":
			host = u.Hostname()
		default:
			return Repo{}, fmt.Errorf("parse repository URL %q: unsupported scheme %q", raw, u.Scheme)
		}
		path = u.Path
	}
	host = strings.ToLower(host)
	if host == "" {
		return Repo{}, fmt.Errorf("parse repository URL %q: no host", raw)
	}

	path = strings.ToLower(strings.Trim(path, "/"))
	path = strings.TrimSuffix(path, ".git")
	parts := strings.Split(path, "/")
	if len(parts) != 2 {
		return Repo{}, fmt.Errorf("parse repository URL %q: path %q is not owner/repository", raw, path)
	}
	owner, name := parts[0], parts[1]
	if !ownerPattern.MatchString(owner) {
		return Repo{}, fmt.Errorf("parse repository URL %q: %q is not a valid owner", raw, owner)
	}
	if !namePattern.MatchString(name) || name == "." || name == ".." {
		return Repo{}, fmt.Errorf("parse repository URL %q: %q is not a valid repository name", raw, name)
	}
	return Repo{Host: host, Owner: owner, Name: name}, nil
}

// stripPort drops the port from hostport when it is the scheme's default.
func stripPort(hostport, defaultPort string) string {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil || p != defaultPort {
		return hostport
	}
	return h
}
