// Package github owns the service's connection to GitHub: the App's client creator
// (HTTP response cache, timeouts, user agent, logging, metrics and the per-installation
// request budget below GitHub's secondary rate limits), the App's identity read at
// startup, installation lookups, repository-scoped installation tokens for agents,
// whether the person who installed the App can access an installation, the
// normalization of repository URLs so every part of the service names a repository
// the same way, and every repository operation the change pipeline makes: git data
// (branches, commits), pull requests, check runs and the tarball download of a
// commit, each as a function over a client and, for the pipeline, as [Repos] over an
// installation's client.
//
// It talks to GitHub and reports what GitHub answered; it must not decide anything
// about plans, clusters or the content of a repository, and it imports nothing of the
// service above it (no plan, store or HTTP package): its callers hand it what a call
// needs. It writes only to branches named kukie/… (DeleteBranch and SetBranch refuse
// others). Extracted trees and renders are kept by package cache, not here.
package github

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	gogithub "github.com/google/go-github/v62/github"
	"github.com/gregjones/httpcache"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/shurcooL/githubv4"
	"golang.org/x/oauth2"

	"github.com/kukie/kukie-gitops/secret"
)

// Defaults for talking to github.com; GitHub Enterprise Server installations set all
// three URLs.
const (
	DefaultAPIURL     = "https://api.github.com/"
	DefaultGraphQLURL = "https://api.github.com/graphql"
	DefaultWebURL     = "https://github.com"

	// DefaultTimeout bounds one request to GitHub, including reading the body.
	DefaultTimeout = 30 * time.Second

	// DefaultUserAgent names the service in GitHub's logs; the version is appended.
	DefaultUserAgent = "kukie-gitops"

	// cacheMaxBytes bounds the HTTP cache of one client; cacheMaxEntryBytes keeps large
	// bodies (archives) out of it, they have their own on-disk cache.
	cacheMaxBytes      = 32 << 20
	cacheMaxEntryBytes = 1 << 20
)

// Config is what the service needs to act as the GitHub App.
type Config struct {
	// AppID is the App's numeric id (the JWT issuer).
	AppID int64
	// PrivateKey is the App's PEM-encoded RSA private key. It never leaves the server.
	PrivateKey secret.Secret
	// APIURL is the REST base URL ("https://HOST/api/v3/" on GitHub Enterprise Server).
	APIURL string
	// GraphQLURL is the GraphQL endpoint ("https://HOST/api/graphql" on Enterprise).
	GraphQLURL string
	// WebURL is where people and git clients see repositories ("https://HOST").
	WebURL string
	// UserAgent is sent with every request.
	UserAgent string
	// Timeout bounds each request.
	Timeout time.Duration
	// ClientID and ClientSecret are the App's OAuth client credentials, with which the
	// setup callback learns who installed the App (see UserInstallations).
	ClientID     string
	ClientSecret secret.Secret
	// Limits is the budget each installation keeps below GitHub's secondary rate
	// limits; the zero value takes GitHub's documented ones.
	Limits Limits
}

// withDefaults fills unset fields with github.com's values.
func (c Config) withDefaults() Config {
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.GraphQLURL == "" {
		c.GraphQLURL = DefaultGraphQLURL
	}
	if c.WebURL == "" {
		c.WebURL = DefaultWebURL
	}
	c.WebURL = strings.TrimSuffix(c.WebURL, "/")
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// WebHost is the host (with port, when one is set) on which this GitHub serves
// repositories; repository URLs on other hosts are not ours to act on.
func (c Config) WebHost() (string, error) {
	u, err := url.Parse(c.withDefaults().WebURL)
	if err != nil {
		return "", fmt.Errorf("parse GitHub web URL: %w", err)
	}
	if u.Host == "" {
		return "", fmt.Errorf("parse GitHub web URL %q: no host", c.WebURL)
	}
	return strings.ToLower(u.Host), nil
}

// NewClientCreator builds the App's client creator: installation clients are cached
// (LRU), GET responses go through a bounded HTTP cache that always revalidates with
// ETags (a 304 is cheap and the pipeline must never act on stale refs), every
// request is bounded by the timeout, logged at debug level through the logger in its
// context, counted in metrics registered on reg (nil: not registered), and paced by
// each installation's budget (see Limits) so GitHub's secondary rate limits are
// waited for rather than hit.
func NewClientCreator(cfg Config, reg prometheus.Registerer) (githubapp.ClientCreator, error) {
	cfg = cfg.withDefaults()
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("create GitHub client: app id is not set")
	}
	if !cfg.PrivateKey.IsSet() {
		return nil, fmt.Errorf("create GitHub client: app private key is not set")
	}
	metrics, err := newClientMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("create GitHub client: %w", err)
	}
	budgets := newBudgets(cfg.Limits, metrics)
	// One delegate per rate limit, each counting its clients' requests under its
	// own label: the App's own (JWT) requests, people's tokens, and each
	// installation's. Delegates only hold settings; the clients they create are
	// cached by installation below.
	creator := func(label string) githubapp.ClientCreator {
		return githubapp.NewClientCreator(cfg.APIURL, cfg.GraphQLURL, cfg.AppID, []byte(cfg.PrivateKey.Reveal()),
			githubapp.WithClientUserAgent(cfg.UserAgent),
			githubapp.WithClientTimeout(cfg.Timeout),
			githubapp.WithClientCaching(true, func() httpcache.Cache {
				return newBoundedCache(cacheMaxBytes, cacheMaxEntryBytes)
			}),
			githubapp.WithClientMiddleware(
				// Paths and status codes only: request and response bodies may carry
				// installation tokens and are never logged, nor are query strings.
				logRequests(zerolog.DebugLevel),
				// The budget holds a request back before it is counted: the
				// metrics see each request GitHub sees, resends included.
				budgets.middleware(label),
				metrics.middleware(label),
			),
		)
	}
	cc, err := githubapp.NewCachingClientCreator(byRateLimit{app: creator("app"), user: creator("user"), installation: creator},
		githubapp.DefaultCachingClientCapacity)
	if err != nil {
		return nil, fmt.Errorf("create GitHub client: %w", err)
	}
	return cc, nil
}

// byRateLimit creates each client with the delegate of its rate limit, so the
// rate-limit gauge is reported per installation.
type byRateLimit struct {
	app, user    githubapp.ClientCreator
	installation func(label string) githubapp.ClientCreator
}

func (c byRateLimit) NewAppClient() (*gogithub.Client, error) { return c.app.NewAppClient() }

func (c byRateLimit) NewAppV4Client() (*githubv4.Client, error) { return c.app.NewAppV4Client() }

func (c byRateLimit) NewInstallationClient(id int64) (*gogithub.Client, error) {
	return c.installation(strconv.FormatInt(id, 10)).NewInstallationClient(id)
}

func (c byRateLimit) NewInstallationV4Client(id int64) (*githubv4.Client, error) {
	return c.installation(strconv.FormatInt(id, 10)).NewInstallationV4Client(id)
}

func (c byRateLimit) NewTokenSourceClient(ts oauth2.TokenSource) (*gogithub.Client, error) {
	return c.user.NewTokenSourceClient(ts)
}

func (c byRateLimit) NewTokenSourceV4Client(ts oauth2.TokenSource) (*githubv4.Client, error) {
	return c.user.NewTokenSourceV4Client(ts)
}

func (c byRateLimit) NewTokenClient(token string) (*gogithub.Client, error) {
	return c.user.NewTokenClient(token)
}

func (c byRateLimit) NewTokenV4Client(token string) (*githubv4.Client, error) {
	return c.user.NewTokenV4Client(token)
}
