package github

import (
	"errors"
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
	// GitHub logins: alphanumerics and single hyphens, and for the managed users of
	// an enterprise (who own repositories too) the enterprise's short code after an
	// underscore ("mona_acme"); repository names also allow '.' and '_'. Both are
	// checked loosely (GitHub enforces the details), strictly enough that nothing
	// else, like a path traversal or a query, gets through.
	ownerPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,38})(?:_[a-z0-9]{1,8})?$`)
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
// Credentials in the URL are dropped, and an error names the URL without them. Ports are kept for http(s) (a web host on a
// non-default port is a different host) and dropped for ssh and git (the ssh port
// says nothing about which repository it is). A path that is not exactly
// owner/name, a query or a fragment is an error: such a URL names something else.
func ParseRepoURL(raw string) (Repo, error) {
	r, err := parseRepoURL(raw)
	if err != nil {
		return r, fmt.Errorf("parse repository URL %q: %w", shownRepoURL(raw), err)
	}
	return r, nil
}

// shownRepoURL is raw as an error names it: with the user part of a URL that has
// a scheme (https://x-access-token:<token>@host/..., or a token as the user) shown
// as xxxxx, since it is a credential, unless it is ssh's git. It works on the text,
// so a URL that does not parse is shown so too.
func shownRepoURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw // scp-like user@host:path, whose user is ssh's (git)
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 || strings.EqualFold(authority[:at], "git") {
		return raw
	}
	return scheme + "://xxxxx@" + rest[at+1:]
}

func parseRepoURL(raw string) (Repo, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Repo{}, errors.New("empty")
	}
	var host, path string
	if !strings.Contains(s, "://") {
		m := scpPattern.FindStringSubmatch(s)
		if m == nil {
			return Repo{}, errors.New("want https://host/owner/repo, ssh://git@host/owner/repo or git@host:owner/repo")
		}
		host, path = m[1], m[2]
	} else {
		u, err := url.Parse(s)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error names the URL whole, credentials and all
			}
			return Repo{}, err
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return Repo{}, errors.New("a repository URL has no query or fragment")
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			host = stripPort(u.Host, "443")
		case "http":
			host = stripPort(u.Host, "80")
		case "ssh", "git+ssh", "git":
			host = u.Hostname()
		default:
			return Repo{}, fmt.Errorf("unsupported scheme %q", u.Scheme)
		}
		path = u.Path
	}
	host = strings.ToLower(host)
	if host == "" {
		return Repo{}, errors.New("no host")
	}

	path = strings.ToLower(strings.Trim(path, "/"))
	path = strings.TrimSuffix(path, ".git")
	parts := strings.Split(path, "/")
	if len(parts) != 2 {
		return Repo{}, fmt.Errorf("path %q is not owner/repository", path)
	}
	owner, name := parts[0], parts[1]
	if err := checkOwnerName(owner, name); err != nil {
		return Repo{}, err
	}
	return Repo{Host: host, Owner: owner, Name: name}, nil
}

// checkOwnerName checks a lower-case owner and repository name.
func checkOwnerName(owner, name string) error {
	if !ownerPattern.MatchString(owner) {
		return fmt.Errorf("%q is not a valid owner", owner)
	}
	if !namePattern.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%q is not a valid repository name", name)
	}
	return nil
}

// ParseFullName reads a repository as a webhook payload or the API spells it,
// "owner/name", and returns its key, the lower-case form NormalizeFullName gives. It
// is an error unless fullName is exactly an owner and a name ParseRepoURL takes,
// and one ParseRepoURL reads as the same repository (a name ending in ".git" it
// reads without), so that a payload naming no repository ("", "acme", "acme/",
// "a/b/c") is never taken for one, nor one name for two keys.
func ParseFullName(fullName string) (string, error) {
	owner, name, ok := strings.Cut(NormalizeFullName(fullName), "/")
	if !ok {
		return "", fmt.Errorf("repository %q is not owner/name", fullName)
	}
	if err := checkOwnerName(owner, name); err != nil {
		return "", fmt.Errorf("repository %q: %w", fullName, err)
	}
	if strings.HasSuffix(name, ".git") {
		return "", fmt.Errorf("repository %q: its name ends in .git, which a repository URL drops", fullName)
	}
	return owner + "/" + name, nil
}

// stripPort drops the port from hostport when it is the scheme's default.
func stripPort(hostport, defaultPort string) string {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil || p != defaultPort {
		return hostport
	}
	return h
}
