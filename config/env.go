package config

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kukie/kukie-gitops/secret"
)

// EnvPrefix starts every environment variable the service reads.
const EnvPrefix = "KUKIE_"

// envSetting binds one environment variable to one field.
type envSetting struct {
	name string
	set  func(c *Config, v string) error
}

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func sec(dst func(*Config) *secret.Secret) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = secret.New(v); return nil }
}

func dur(dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration such as 30s or 2m: %q", v)
		}
		*dst(c) = d
		return nil
	}
}

func integer(dst func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*dst(c) = n
		return nil
	}
}

func boolean(dst func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false: %q", v)
		}
		*dst(c) = b
		return nil
	}
}

// list reads a comma-separated list; blanks around items are dropped, and an empty
// value is an empty list.
func list(dst func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		*dst(c) = out
		return nil
	}
}

// envSettings lists every variable; README's configuration table mirrors it.
var envSettings = []envSetting{
	{"KUKIE_SERVER_ADDRESS", str(func(c *Config) *string { return &c.Server.Address })},
	{"KUKIE_SERVER_PUBLIC_URL", str(func(c *Config) *string { return &c.Server.PublicURL })},
	{"KUKIE_SERVER_READ_HEADER_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Server.ReadHeaderTimeout })},
	{"KUKIE_SERVER_READ_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Server.ReadTimeout })},
	{"KUKIE_SERVER_WRITE_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Server.WriteTimeout })},
	{"KUKIE_SERVER_IDLE_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Server.IdleTimeout })},
	{"KUKIE_SERVER_SHUTDOWN_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Server.ShutdownTimeout })},
	{"KUKIE_SERVER_DRAIN_DELAY", dur(func(c *Config) *time.Duration { return &c.Server.DrainDelay })},
	{"KUKIE_SERVER_MAX_BODY_BYTES", integer(func(c *Config) *int64 { return &c.Server.MaxBodyBytes })},
	{"KUKIE_SERVER_TRUST_FORWARDED_FOR", boolean(func(c *Config) *bool { return &c.Server.TrustForwardedFor })},
	{"KUKIE_DATABASE_URL", sec(func(c *Config) *secret.Secret { return &c.Database.SecretURL })},
	{"KUKIE_DATABASE_URL_FILE", str(func(c *Config) *string { return &c.Database.URLFile })},
	{"KUKIE_GITHUB_APP_ID", integer(func(c *Config) *int64 { return &c.GitHub.AppID })},
	{"KUKIE_GITHUB_APP_SLUG", str(func(c *Config) *string { return &c.GitHub.AppSlug })},
	{"KUKIE_GITHUB_WEB_URL", str(func(c *Config) *string { return &c.GitHub.WebURL })},
	{"KUKIE_GITHUB_API_URL", str(func(c *Config) *string { return &c.GitHub.APIURL })},
	{"KUKIE_GITHUB_GRAPHQL_URL", str(func(c *Config) *string { return &c.GitHub.GraphQLURL })},
	{"KUKIE_GITHUB_PRIVATE_KEY", sec(func(c *Config) *secret.Secret { return &c.GitHub.PrivateKey })},
	{"KUKIE_GITHUB_PRIVATE_KEY_FILE", str(func(c *Config) *string { return &c.GitHub.PrivateKeyFile })},
	{"KUKIE_GITHUB_WEBHOOK_SECRET", sec(func(c *Config) *secret.Secret { return &c.GitHub.WebhookSecret })},
	{"KUKIE_GITHUB_WEBHOOK_SECRET_FILE", str(func(c *Config) *string { return &c.GitHub.WebhookSecretFile })},
	{"KUKIE_GITHUB_CLIENT_ID", str(func(c *Config) *string { return &c.GitHub.ClientID })},
	{"KUKIE_GITHUB_CLIENT_SECRET", sec(func(c *Config) *secret.Secret { return &c.GitHub.ClientSecret })},
	{"KUKIE_GITHUB_CLIENT_SECRET_FILE", str(func(c *Config) *string { return &c.GitHub.ClientSecretFile })},
	{"KUKIE_GITHUB_REQUEST_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.GitHub.RequestTimeout })},
	{"KUKIE_AUTH_DEV_TEAM", str(func(c *Config) *string { return &c.Auth.DevTeam })},
	{"KUKIE_ENCRYPTION_KEY", sec(func(c *Config) *secret.Secret { return &c.Encryption.Key })},
	{"KUKIE_ENCRYPTION_KEY_FILE", str(func(c *Config) *string { return &c.Encryption.KeyFile })},
	{"KUKIE_LOG_FORMAT", str(func(c *Config) *string { return &c.Log.Format })},
	{"KUKIE_LOG_LEVEL", str(func(c *Config) *string { return &c.Log.Level })},
	{"KUKIE_PIPELINE_DEPLOY_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Pipeline.DeployTimeout })},
	{"KUKIE_PIPELINE_DEPLOY_POLL_INTERVAL", dur(func(c *Config) *time.Duration { return &c.Pipeline.DeployPollInterval })},
	{"KUKIE_PIPELINE_CLAIM_TTL", dur(func(c *Config) *time.Duration { return &c.Pipeline.ClaimTTL })},
	{"KUKIE_PIPELINE_PULL_SWEEP_INTERVAL", dur(func(c *Config) *time.Duration { return &c.Pipeline.PullSweepInterval })},
	{"KUKIE_WEBHOOKS_RETENTION", dur(func(c *Config) *time.Duration { return &c.Webhooks.Retention })},
	{"KUKIE_NOTIFICATIONS_ALLOW_HTTP", boolean(func(c *Config) *bool { return &c.Notifications.AllowHTTP })},
	{"KUKIE_NOTIFICATIONS_ALLOW_PRIVATE_NETWORKS", boolean(func(c *Config) *bool { return &c.Notifications.AllowPrivateNetworks })},
	{"KUKIE_NOTIFICATIONS_RETENTION", dur(func(c *Config) *time.Duration { return &c.Notifications.Retention })},
	{"KUKIE_PIPELINE_CACHE_DIR", str(func(c *Config) *string { return &c.Pipeline.CacheDir })},
	{"KUKIE_PIPELINE_ARCHIVE_CACHE_BYTES", integer(func(c *Config) *int64 { return &c.Pipeline.ArchiveCacheBytes })},
	{"KUKIE_RENDER_HELM_WORKERS", integer(func(c *Config) *int64 { return &c.Render.HelmWorkers })},
	{"KUKIE_RENDER_HELM_WORKER_MEMORY", integer(func(c *Config) *int64 { return &c.Render.HelmWorkerMemory })},
	{"KUKIE_RENDER_KUSTOMIZE_WORKERS", integer(func(c *Config) *int64 { return &c.Render.KustomizeWorkers })},
	{"KUKIE_RENDER_KUSTOMIZE_WORKER_MEMORY", integer(func(c *Config) *int64 { return &c.Render.KustomizeWorkerMemory })},
	{"KUKIE_RENDER_TIMEOUT", dur(func(c *Config) *time.Duration { return &c.Render.Timeout })},
	{"KUKIE_RATE_LIMITS_TEAM_CHANGES_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.TeamChangesPerMinute })},
	{"KUKIE_RATE_LIMITS_TEAM_CHANGES_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.TeamChangesBurst })},
	{"KUKIE_RATE_LIMITS_CLIENT_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.ClientPerMinute })},
	{"KUKIE_RATE_LIMITS_CLIENT_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.ClientBurst })},
	{"KUKIE_RATE_LIMITS_TEAM_REPOSITORY_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.TeamRepositoryPerMinute })},
	{"KUKIE_RATE_LIMITS_TEAM_REPOSITORY_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.TeamRepositoryBurst })},
	{"KUKIE_RATE_LIMITS_TEAM_CLUSTER_READS_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.TeamClusterReadsPerMinute })},
	{"KUKIE_RATE_LIMITS_TEAM_CLUSTER_READS_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.TeamClusterReadsBurst })},
	{"KUKIE_RATE_LIMITS_TEAM_ADMIN_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.TeamAdminPerMinute })},
	{"KUKIE_RATE_LIMITS_TEAM_ADMIN_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.TeamAdminBurst })},
	{"KUKIE_RATE_LIMITS_USER_PAGES_PER_MINUTE", integer(func(c *Config) *int64 { return &c.RateLimits.UserPagesPerMinute })},
	{"KUKIE_RATE_LIMITS_USER_PAGES_BURST", integer(func(c *Config) *int64 { return &c.RateLimits.UserPagesBurst })},
	{"KUKIE_METRICS_ADDRESS", str(func(c *Config) *string { return &c.Metrics.Address })},
	{"KUKIE_CLUSTERS_IN_CLUSTER_TEAMS", list(func(c *Config) *[]string { return &c.Clusters.InClusterTeams })},
	{"KUKIE_CLUSTERS_ALLOW_INSECURE_TLS", boolean(func(c *Config) *bool { return &c.Clusters.AllowInsecureTLS })},
	{"KUKIE_CLUSTERS_MAX_RESPONSE_BYTES", integer(func(c *Config) *int64 { return &c.Clusters.MaxResponseBytes })},
}

// Variables read by the process but not settings of Config.
var otherEnv = map[string]bool{
	"KUKIE_CONFIG":  true,
	"KUKIE_PROFILE": true,
}

func applyEnv(cfg *Config, lookupEnv func(string) (string, bool)) []error {
	var problems []error
	for _, s := range envSettings {
		v, ok := lookupEnv(s.name)
		if !ok {
			continue
		}
		if err := s.set(cfg, v); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return problems
}

// UnknownEnv lists KUKIE_* variables in environ that the service does not read, so
// a misspelt setting is reported instead of silently ignored. Variables of the test
// tooling (KUKIE_TEST_*, KUKIE_ENVTEST_*) are not settings and are left out.
func UnknownEnv(environ []string) []string {
	known := map[string]bool{}
	for _, s := range envSettings {
		known[s.name] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || known[name] || otherEnv[name] ||
			strings.HasPrefix(name, "KUKIE_TEST_") || strings.HasPrefix(name, "KUKIE_ENVTEST_") {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// EnvNames returns the names of all configuration variables.
func EnvNames() []string {
	out := make([]string, len(envSettings))
	for i, s := range envSettings {
		out[i] = s.name
	}
	return out
}

// OSEnv is os.LookupEnv, the lookup Load uses outside tests.
var OSEnv = os.LookupEnv
