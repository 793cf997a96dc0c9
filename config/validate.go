package config

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// ValidationError lists every problem that keeps a profile from starting.
type ValidationError struct {
	Profile  Profile
	Problems []string
}

func (e *ValidationError) Error() string {
	count := "1 problem"
	if len(e.Problems) != 1 {
		count = fmt.Sprintf("%d problems", len(e.Problems))
	}
	return fmt.Sprintf("configuration is not valid for profile %s (%s):\n  - %s",
		e.Profile, count, strings.Join(e.Problems, "\n  - "))
}

// Validate checks the configuration for profile and returns a *ValidationError
// listing all problems at once, or nil. The production profile fails closed: it
// refuses anything that would run without the App's credentials (client credentials
// included, without which anyone could bind another's installation), with insecure
// transport to GitHub or from browsers (an http public URL), on SQLite, without the
// credential encryption key, or with dev authentication.
func (c Config) Validate(profile Profile) error {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if c.Server.Address != "" {
		if _, _, err := net.SplitHostPort(c.Server.Address); err != nil {
			add("server.address %q is not host:port: %v", c.Server.Address, err)
		}
	}
	if c.Metrics.Address != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Address); err != nil {
			add("metrics.address %q is not host:port: %v", c.Metrics.Address, err)
		} else if main := cmp.Or(c.Server.Address, server.DefaultAddress); sameListener(c.Metrics.Address, main) {
			add("metrics.address %q takes the port of server.address %q: leave it empty to serve /metrics on the main listener, or give it a port of its own",
				c.Metrics.Address, main)
		}
	}
	if c.Server.PublicURL != "" {
		// In production the pages' session cookie carries a person's GitHub token:
		// it is Secure only when browsers reach the service over https.
		if err := checkURL(c.Server.PublicURL, profile == Production); err != nil {
			add("server.public_url: %v", err)
		}
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"server.read_header_timeout", int64(c.Server.ReadHeaderTimeout)},
		{"server.read_timeout", int64(c.Server.ReadTimeout)},
		{"server.write_timeout", int64(c.Server.WriteTimeout)},
		{"server.idle_timeout", int64(c.Server.IdleTimeout)},
		{"server.shutdown_timeout", int64(c.Server.ShutdownTimeout)},
		{"server.drain_delay", int64(c.Server.DrainDelay)},
		{"server.max_body_bytes", c.Server.MaxBodyBytes},
	} {
		if f.value < 0 {
			add("%s must not be negative", f.name)
		}
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"rate_limits.team_changes_per_minute", c.RateLimits.TeamChangesPerMinute},
		{"rate_limits.team_changes_burst", c.RateLimits.TeamChangesBurst},
		{"rate_limits.client_per_minute", c.RateLimits.ClientPerMinute},
		{"rate_limits.client_burst", c.RateLimits.ClientBurst},
		{"rate_limits.team_repository_per_minute", c.RateLimits.TeamRepositoryPerMinute},
		{"rate_limits.team_repository_burst", c.RateLimits.TeamRepositoryBurst},
		{"rate_limits.team_cluster_reads_per_minute", c.RateLimits.TeamClusterReadsPerMinute},
		{"rate_limits.team_cluster_reads_burst", c.RateLimits.TeamClusterReadsBurst},
		{"rate_limits.team_admin_per_minute", c.RateLimits.TeamAdminPerMinute},
		{"rate_limits.team_admin_burst", c.RateLimits.TeamAdminBurst},
		{"rate_limits.user_pages_per_minute", c.RateLimits.UserPagesPerMinute},
		{"rate_limits.user_pages_burst", c.RateLimits.UserPagesBurst},
	} {
		if f.value <= 0 || f.value > math.MaxInt32 {
			add("%s must be from 1 to %d, got %d", f.name, math.MaxInt32, f.value)
		}
	}

	dialect, err := store.DialectOf(c.DatabaseURL().Reveal())
	if err != nil {
		// The error names no part of the URL, which may hold a password.
		add("%v (set by %s)", err, c.databaseURLSource())
	}
	if u, err := url.Parse(c.Database.URL); err == nil {
		_, inUserInfo := u.User.Password()
		// lib/pq also takes the password as a query parameter.
		if inUserInfo || u.Query().Has("password") {
			add("database.url holds a password; put the URL in KUKIE_DATABASE_URL or database.url_file, or the password in PGPASSWORD")
		}
	}

	for _, f := range []struct{ name, raw string }{
		{"github.web_url", c.GitHub.WebURL},
		{"github.api_url", c.GitHub.APIURL},
		{"github.graphql_url", c.GitHub.GraphQLURL},
	} {
		if err := checkURL(f.raw, profile == Production); err != nil {
			add("%s: %v", f.name, err)
		}
	}
	if c.GitHub.AppID < 0 {
		add("github.app_id must be positive")
	}
	if c.GitHub.PrivateKey.IsSet() {
		if err := checkPrivateKey(c.GitHub.PrivateKey.Reveal()); err != nil {
			add("github private key (KUKIE_GITHUB_PRIVATE_KEY or github.private_key_file): %v", err)
		}
	}
	// Production lists each missing one below.
	if profile != Production && (c.GitHub.ClientID == "") != !c.GitHub.ClientSecret.IsSet() {
		add("github.client_id and the client secret (KUKIE_GITHUB_CLIENT_SECRET or github.client_secret_file) must be set together")
	}
	if c.Encryption.Key.IsSet() {
		if _, err := c.EncryptionKey(); err != nil {
			add("KUKIE_ENCRYPTION_KEY or encryption.key_file: %v (make one with: head -c 32 /dev/urandom | base64)", err)
		}
	}
	if c.Auth.DevTeam != "" {
		if err := store.ValidateTeamName(c.Auth.DevTeam); err != nil {
			add("auth.dev_team: %v", err)
		}
	}
	if c.Log.Format != "json" && c.Log.Format != "console" {
		add("log.format %q: want json or console", c.Log.Format)
	}
	if _, err := zerolog.ParseLevel(c.Log.Level); err != nil || c.Log.Level == "" {
		add("log.level %q: want trace, debug, info, warn or error", c.Log.Level)
	}

	for _, f := range []struct {
		name  string
		value time.Duration
	}{
		{"pipeline.deploy_timeout", c.Pipeline.DeployTimeout},
		{"pipeline.deploy_poll_interval", c.Pipeline.DeployPollInterval},
		{"pipeline.claim_ttl", c.Pipeline.ClaimTTL},
		{"pipeline.pull_sweep_interval", c.Pipeline.PullSweepInterval},
		{"github.request_timeout", c.GitHub.RequestTimeout},
		{"webhooks.retention", c.Webhooks.Retention},
		{"notifications.retention", c.Notifications.Retention},
		{"render.timeout", c.Render.Timeout},
	} {
		if f.value <= 0 {
			add("%s must be a positive duration such as 30s or 15m, got %s", f.name, f.value)
		}
	}
	if c.Pipeline.DeployPollInterval > 0 && c.Pipeline.DeployTimeout > 0 && c.Pipeline.DeployPollInterval >= c.Pipeline.DeployTimeout {
		add("pipeline.deploy_poll_interval (%s) must be shorter than pipeline.deploy_timeout (%s), or a deployment is never checked before it times out",
			c.Pipeline.DeployPollInterval, c.Pipeline.DeployTimeout)
	}
	// A plan claim is renewed for a full lifetime right before each GitHub write: if
	// one call could outlast it, another replica could take the plan over while the
	// write is still under way and make it a second time.
	if c.Pipeline.ClaimTTL > 0 && c.GitHub.RequestTimeout > 0 && c.Pipeline.ClaimTTL <= c.GitHub.RequestTimeout {
		add("pipeline.claim_ttl (%s) must be longer than github.request_timeout (%s): a single GitHub call must not outlast a plan claim, "+
			"or a second replica may take the plan over and repeat a write that is still under way", c.Pipeline.ClaimTTL, c.GitHub.RequestTimeout)
	}
	if c.Pipeline.ArchiveCacheBytes < MinArchiveCacheBytes {
		add("pipeline.archive_cache_bytes must be at least %d (16 MiB), got %d", MinArchiveCacheBytes, c.Pipeline.ArchiveCacheBytes)
	}
	if c.Render.HelmWorkers < 0 {
		add("render.helm_workers must be 0 (one per core) or more, got %d", c.Render.HelmWorkers)
	}
	if c.Render.HelmWorkerMemory < MinHelmWorkerMemory {
		add("render.helm_worker_memory must be at least %d (128 MiB), got %d", MinHelmWorkerMemory, c.Render.HelmWorkerMemory)
	}
	if c.Render.KustomizeWorkers < 0 {
		add("render.kustomize_workers must be 0 (one per core) or more, got %d", c.Render.KustomizeWorkers)
	}
	if c.Render.KustomizeWorkerMemory < MinKustomizeWorkerMemory {
		add("render.kustomize_worker_memory must be at least %d (128 MiB), got %d", MinKustomizeWorkerMemory, c.Render.KustomizeWorkerMemory)
	}
	if c.Render.Timeout > MaxRenderTimeout {
		add("render.timeout must be at most %s, got %s", MaxRenderTimeout, c.Render.Timeout)
	}

	if c.Clusters.MaxResponseBytes < MinClusterMaxResponseBytes {
		add("clusters.max_response_bytes must be at least %d (1 MiB), got %d", MinClusterMaxResponseBytes, c.Clusters.MaxResponseBytes)
	}
	for _, name := range c.Clusters.InClusterTeams {
		if err := store.ValidateTeamName(name); err != nil {
			add("clusters.in_cluster_teams: %v", err)
		}
	}

	switch profile {
	case Dev:
	case Production:
		if c.GitHub.AppID == 0 {
			add("github.app_id is required (KUKIE_GITHUB_APP_ID)")
		}
		if c.GitHub.AppSlug == "" {
			add("github.app_slug is required (KUKIE_GITHUB_APP_SLUG); installation links are built from it")
		}
		if !c.GitHub.PrivateKey.IsSet() {
			add("github private key is required (KUKIE_GITHUB_PRIVATE_KEY or github.private_key_file)")
		}
		if !c.GitHub.WebhookSecret.IsSet() {
			add("github webhook secret is required (KUKIE_GITHUB_WEBHOOK_SECRET or github.webhook_secret_file)")
		}
		if c.GitHub.ClientID == "" {
			add("github.client_id is required (KUKIE_GITHUB_CLIENT_ID); the setup callback checks with it who installed the app")
		}
		if !c.GitHub.ClientSecret.IsSet() {
			add("github client secret is required (KUKIE_GITHUB_CLIENT_SECRET or github.client_secret_file)")
		}
		if dialect != store.Postgres {
			add("database must be PostgreSQL (KUKIE_DATABASE_URL=postgres://...); SQLite is for local runs")
		}
		if !c.Encryption.Key.IsSet() {
			add("encryption key for stored credentials is required (KUKIE_ENCRYPTION_KEY or encryption.key_file)")
		}
		if c.Auth.DevTeam != "" {
			add("auth.dev_team must be empty: dev authentication lets anyone act as a team")
		}
		if c.Notifications.AllowHTTP {
			add("notifications.allow_http must be false: notifications carry change details and are sent over https only")
		}
	default:
		add("unknown profile %q", profile)
	}
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Profile: profile, Problems: p}
}

// Check validates cfg for profile and lists the problems of loadErr (the
// *LoadError Load returned with cfg, or nil) first, so that an operator sees
// everything there is to fix in one *ValidationError instead of one batch per
// attempt. Any other error from Load means there is no configuration to check, and
// it is returned as it is.
func Check(cfg Config, profile Profile, loadErr error) error {
	var loadProblems *LoadError
	if loadErr != nil && !errors.As(loadErr, &loadProblems) {
		return loadErr
	}
	var problems []string
	if loadProblems != nil {
		for _, p := range loadProblems.Problems {
			problems = append(problems, p.Error())
		}
	}
	var invalid *ValidationError
	if err := cfg.Validate(profile); errors.As(err, &invalid) {
		problems = append(problems, invalid.Problems...)
	} else if err != nil {
		return err
	}
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Profile: profile, Problems: problems}
}

// sameListener reports whether listening on a and on b would take one port: the
// same port, not 0 (any free one), on the same host or where either listens on
// every address.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || every(ha) || every(hb)
}

// databaseURLSource names the setting the database URL came from.
func (c Config) databaseURLSource() string {
	switch {
	case c.Database.SecretURL.IsSet():
		return "KUKIE_DATABASE_URL or database.url_file"
	case c.Database.URL != "":
		return "database.url"
	}
	return "the default database URL"
}

func checkURL(raw string, requireHTTPS bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	if requireHTTPS && u.Scheme != "https" {
		return fmt.Errorf("%q must use https", raw)
	}
	return nil
}

// checkPrivateKey accepts what GitHub issues (PKCS#1 RSA) and PKCS#8 RSA keys.
func checkPrivateKey(pemText string) error {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return fmt.Errorf("not PEM; expected the .pem file GitHub generated")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return nil
	}
	return fmt.Errorf("PEM block %q is not an RSA private key", block.Type)
}
