package config

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

func secretOf(s string) secret.Secret { return secret.New(s) }

var (
	keyOnce sync.Once
	keyPEM  string
)

// testPrivateKey is an RSA key in the PKCS#1 PEM form GitHub issues.
func testPrivateKey(t *testing.T) string {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	})
	return keyPEM
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var encryptionKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, EncryptionKeyBytes))

func TestLoad(t *testing.T) {
	cases := map[string]struct {
		yaml    string // written to a file when not empty
		env     map[string]string
		files   map[string]string // name → content; "$name" in yaml/env is replaced by its path
		wantErr []string
		check   func(t *testing.T, c Config)
	}{
		"zero configuration": {
			check: func(t *testing.T, c Config) {
				if c.DatabaseURL().Reveal() != "sqlite:./kukie.db" || c.Log.Format != "json" || c.GitHub.APIURL != DefaultGitHubAPIURL {
					t.Fatalf("defaults: %+v", c)
				}
			},
		},
		"yaml file": {
			yaml: "server:\n  address: 0.0.0.0:9000\n  shutdown_timeout: 45s\ndatabase:\n  url: sqlite:/data/k.db\ngithub:\n  app_id: 42\nlog:\n  format: console\n",
			check: func(t *testing.T, c Config) {
				if c.Server.Address != "0.0.0.0:9000" || c.Server.ShutdownTimeout != 45*time.Second ||
					c.DatabaseURL().Reveal() != "sqlite:/data/k.db" || c.GitHub.AppID != 42 || c.Log.Format != "console" {
					t.Fatalf("yaml not applied: %+v", c)
				}
			},
		},
		"environment overrides yaml": {
			yaml: "server:\n  address: 0.0.0.0:9000\ngithub:\n  app_id: 42\n",
			env:  map[string]string{"KUKIE_SERVER_ADDRESS": "127.0.0.1:7000", "KUKIE_GITHUB_APP_ID": "7", "KUKIE_DATABASE_URL": "postgres://u:pw@db/k"},
			check: func(t *testing.T, c Config) {
				if c.Server.Address != "127.0.0.1:7000" || c.GitHub.AppID != 7 || c.DatabaseURL().Reveal() != "postgres://u:pw@db/k" {
					t.Fatalf("env not applied: %+v", c)
				}
			},
		},
		"secrets from files, trailing newline dropped": {
			files: map[string]string{"key.pem": "PEM-BODY\nline2\n", "hook": "s3cret\n", "enc": encryptionKey + "\n", "db": "postgres://u:pw@db/k\n"},
			yaml:  "github:\n  private_key_file: $key.pem\n  webhook_secret_file: $hook\nencryption:\n  key_file: $enc\n",
			env:   map[string]string{"KUKIE_DATABASE_URL_FILE": "$db"},
			check: func(t *testing.T, c Config) {
				if c.GitHub.PrivateKey.Reveal() != "PEM-BODY\nline2" || c.GitHub.WebhookSecret.Reveal() != "s3cret" ||
					c.Encryption.Key.Reveal() != encryptionKey || c.DatabaseURL().Reveal() != "postgres://u:pw@db/k" {
					t.Fatalf("secret files not read: key %q hook %q", c.GitHub.PrivateKey.Reveal(), c.GitHub.WebhookSecret.Reveal())
				}
			},
		},
		"client credentials from environment and file": {
			files: map[string]string{"client": "oauth-secret\n"},
			yaml:  "github:\n  client_id: Iv1.abc\n  client_secret_file: $client\n",
			check: func(t *testing.T, c Config) {
				if c.GitHub.ClientID != "Iv1.abc" || c.GitHub.ClientSecret.Reveal() != "oauth-secret" || !c.GitHub.UserAuthorization() {
					t.Fatalf("client credentials not read: id %q secret %q", c.GitHub.ClientID, c.GitHub.ClientSecret.Reveal())
				}
			},
		},
		"client secret from environment": {
			env: map[string]string{"KUKIE_GITHUB_CLIENT_ID": "Iv1.env", "KUKIE_GITHUB_CLIENT_SECRET": "env-secret"},
			check: func(t *testing.T, c Config) {
				if c.GitHub.ClientID != "Iv1.env" || c.GitHub.ClientSecret.Reveal() != "env-secret" {
					t.Fatal("client credentials from the environment not applied")
				}
			},
		},
		"client secret inline in yaml is refused": {
			yaml:    "github:\n  client_secret: hunter2\n",
			wantErr: []string{"client_secret"},
		},
		"secrets from environment": {
			env: map[string]string{"KUKIE_GITHUB_WEBHOOK_SECRET": "hooksecret", "KUKIE_ENCRYPTION_KEY": encryptionKey},
			check: func(t *testing.T, c Config) {
				if c.GitHub.WebhookSecret.Reveal() != "hooksecret" || c.Encryption.Key.Reveal() != encryptionKey {
					t.Fatal("secret env not applied")
				}
			},
		},
		"pipeline settings from yaml, environment wins": {
			yaml: "pipeline:\n  deploy_timeout: 40m\n  deploy_poll_interval: 10s\n  claim_ttl: 5m\n  cache_dir: /var/cache/kukie\n  pull_sweep_interval: 10m\n",
			env: map[string]string{"KUKIE_PIPELINE_DEPLOY_TIMEOUT": "1h", "KUKIE_PIPELINE_ARCHIVE_CACHE_BYTES": "1073741824",
				"KUKIE_PIPELINE_PULL_SWEEP_INTERVAL": "1m"},
			check: func(t *testing.T, c Config) {
				want := Pipeline{DeployTimeout: time.Hour, DeployPollInterval: 10 * time.Second, ClaimTTL: 5 * time.Minute,
					CacheDir: "/var/cache/kukie", ArchiveCacheBytes: 1 << 30, PullSweepInterval: time.Minute}
				if c.Pipeline != want {
					t.Fatalf("pipeline = %+v, want %+v", c.Pipeline, want)
				}
			},
		},
		"render settings from yaml, environment wins": {
			yaml: "render:\n  helm_workers: 3\n  helm_worker_memory: 268435456\n  kustomize_workers: 2\n  kustomize_worker_memory: 268435456\n  timeout: 20s\n",
			env:  map[string]string{"KUKIE_RENDER_HELM_WORKER_MEMORY": "1073741824", "KUKIE_RENDER_KUSTOMIZE_WORKERS": "4", "KUKIE_RENDER_TIMEOUT": "30s"},
			check: func(t *testing.T, c Config) {
				if want := (Render{HelmWorkers: 3, HelmWorkerMemory: 1 << 30, KustomizeWorkers: 4, KustomizeWorkerMemory: 256 << 20, Timeout: 30 * time.Second}); c.Render != want {
					t.Fatalf("render = %+v, want %+v", c.Render, want)
				}
			},
		},
		"render defaults": {
			check: func(t *testing.T, c Config) {
				if want := (Render{HelmWorkerMemory: DefaultHelmWorkerMemory, KustomizeWorkerMemory: DefaultKustomizeWorkerMemory, Timeout: DefaultRenderTimeout}); c.Render != want {
					t.Fatalf("render defaults = %+v, want %+v", c.Render, want)
				}
			},
		},
		"pipeline defaults": {
			check: func(t *testing.T, c Config) {
				if c.Pipeline.DeployTimeout != 15*time.Minute || c.Pipeline.DeployPollInterval != 5*time.Second ||
					c.Pipeline.ClaimTTL != 2*time.Minute || c.Pipeline.ArchiveCacheBytes != DefaultArchiveCacheBytes || c.Pipeline.CacheDir != "" ||
					c.Pipeline.PullSweepInterval != 5*time.Minute {
					t.Fatalf("pipeline defaults = %+v", c.Pipeline)
				}
			},
		},
		"webhook retention: 30 days by default, from yaml, environment wins": {
			yaml: "webhooks:\n  retention: 48h\n",
			env:  map[string]string{"KUKIE_WEBHOOKS_RETENTION": "72h"},
			check: func(t *testing.T, c Config) {
				if c.Webhooks.Retention != 72*time.Hour || Default().Webhooks.Retention != 720*time.Hour {
					t.Fatalf("retention = %s (default %s), want 72h (720h)", c.Webhooks.Retention, Default().Webhooks.Retention)
				}
			},
		},
		"notifications: public addresses only and 30 days of log by default, from yaml, environment wins": {
			yaml: "notifications:\n  allow_private_networks: false\n  retention: 48h\n",
			env:  map[string]string{"KUKIE_NOTIFICATIONS_ALLOW_PRIVATE_NETWORKS": "true", "KUKIE_NOTIFICATIONS_RETENTION": "72h"},
			check: func(t *testing.T, c Config) {
				d := Default().Notifications
				if !c.Notifications.AllowPrivateNetworks || c.Notifications.Retention != 72*time.Hour || d.AllowPrivateNetworks || d.Retention != 720*time.Hour {
					t.Fatalf("notifications = %+v (default %+v), want private networks allowed and 72h (off and 720h)", c.Notifications, d)
				}
			},
		},
		"notifications: https only by default, allow_http from yaml, environment wins": {
			yaml: "notifications:\n  allow_http: false\n",
			env:  map[string]string{"KUKIE_NOTIFICATIONS_ALLOW_HTTP": "true"},
			check: func(t *testing.T, c Config) {
				if !c.Notifications.AllowHTTP || Default().Notifications.AllowHTTP {
					t.Fatalf("allow_http = %v (default %v), want true (false)", c.Notifications.AllowHTTP, Default().Notifications.AllowHTTP)
				}
			},
		},
		"metrics: on the main listener by default, address from yaml, environment wins": {
			yaml: "metrics:\n  address: 127.0.0.1:9090\n",
			env:  map[string]string{"KUKIE_METRICS_ADDRESS": "0.0.0.0:9100"},
			check: func(t *testing.T, c Config) {
				if c.Metrics.Address != "0.0.0.0:9100" || Default().Metrics.Address != "" {
					t.Fatalf("metrics.address = %q (default %q), want 0.0.0.0:9100 (empty)", c.Metrics.Address, Default().Metrics.Address)
				}
			},
		},
		"in-cluster teams from yaml, environment wins": {
			yaml: "clusters:\n  in_cluster_teams: [platform]\n",
			env:  map[string]string{"KUKIE_CLUSTERS_IN_CLUSTER_TEAMS": " platform, payments ,"},
			check: func(t *testing.T, c Config) {
				if fmt.Sprint(c.Clusters.InClusterTeams) != "[platform payments]" {
					t.Fatalf("in_cluster_teams = %q", c.Clusters.InClusterTeams)
				}
			},
		},
		"no in-cluster teams by default": {
			check: func(t *testing.T, c Config) {
				if len(c.Clusters.InClusterTeams) != 0 {
					t.Fatalf("in_cluster_teams = %q, want none", c.Clusters.InClusterTeams)
				}
			},
		},
		"insecure TLS to clusters refused by default, allowed from yaml, environment wins": {
			yaml: "clusters:\n  allow_insecure_tls: false\n",
			env:  map[string]string{"KUKIE_CLUSTERS_ALLOW_INSECURE_TLS": "true"},
			check: func(t *testing.T, c Config) {
				if !c.Clusters.AllowInsecureTLS || Default().Clusters.AllowInsecureTLS {
					t.Fatalf("allow_insecure_tls = %t (default %t), want true (false)", c.Clusters.AllowInsecureTLS, Default().Clusters.AllowInsecureTLS)
				}
			},
		},
		"cluster response bound from yaml, environment wins": {
			yaml: "clusters:\n  max_response_bytes: 33554432\n",
			env:  map[string]string{"KUKIE_CLUSTERS_MAX_RESPONSE_BYTES": "67108864"},
			check: func(t *testing.T, c Config) {
				if c.Clusters.MaxResponseBytes != 64<<20 || Default().Clusters.MaxResponseBytes != DefaultClusterMaxResponseBytes {
					t.Fatalf("max_response_bytes = %d (default %d), want %d (%d)",
						c.Clusters.MaxResponseBytes, Default().Clusters.MaxResponseBytes, 64<<20, DefaultClusterMaxResponseBytes)
				}
			},
		},
		"cluster response bound from yaml": {
			yaml: "clusters:\n  max_response_bytes: 33554432\n",
			check: func(t *testing.T, c Config) {
				if c.Clusters.MaxResponseBytes != 32<<20 {
					t.Fatalf("max_response_bytes = %d, want %d", c.Clusters.MaxResponseBytes, 32<<20)
				}
			},
		},
		"cluster response bound that is not a number": {
			env:     map[string]string{"KUKIE_CLUSTERS_MAX_RESPONSE_BYTES": "256MiB"},
			wantErr: []string{"KUKIE_CLUSTERS_MAX_RESPONSE_BYTES", "not an integer"},
		},
		"pipeline duration that does not parse": {
			env:     map[string]string{"KUKIE_PIPELINE_DEPLOY_TIMEOUT": "20 minutes"},
			wantErr: []string{"KUKIE_PIPELINE_DEPLOY_TIMEOUT", "not a duration"},
		},
		"unknown yaml key": {
			yaml:    "server:\n  adress: 0.0.0.0:9000\n",
			wantErr: []string{"server.adress (line 2): unknown setting"},
		},
		"secret value inline in yaml is refused": {
			yaml:    "github:\n  webhook_secret: hunter2\n",
			wantErr: []string{"github.webhook_secret (line 2): a secret is never read from the config file: set KUKIE_GITHUB_WEBHOOK_SECRET, or name a file holding it with github.webhook_secret_file"},
		},
		"every bad value of the file at once, each with its key, line and reason": {
			yaml: "server:\n  read_timeout: soon\n  shutdown_timeout: 30\n  address: [a]\ngithub:\n  app_id: forty-two\n" +
				"clusters:\n  in_cluster_teams: platform\nnotifications:\n  allow_http: maybe\nmetrics: 9100\nlog:\n  level: info\n  level: debug\n" +
				"database:\n  secret_url: postgres://u:pw@db/k\nrender: {helm_workers: 2, typo: 1}\n",
			wantErr: []string{
				`config file `, `server.read_timeout (line 2): not a duration such as 30s or 2m: "soon"`,
				`server.shutdown_timeout (line 3): not a duration such as 30s or 2m: "30"`,
				`server.address (line 4): not a single value: a list`,
				`github.app_id (line 6): not an integer: "forty-two"`,
				`clusters.in_cluster_teams (line 8): not a list such as [a, b]: "platform"`,
				`notifications.allow_http (line 10): not true or false: "maybe"`,
				`metrics (line 11): want a mapping of settings (key: value), got "9100"`,
				`log.level (line 14): set twice (first at line 13)`,
				`database.secret_url (line 16): a secret is never read from the config file: set it in the environment`,
				`render.typo (line 17): unknown setting`,
			},
		},
		"merged keys and aliases, the section's own keys winning": {
			yaml: "server:\n  write_timeout: 9s\n  <<: {read_timeout: &five 5s, write_timeout: 7s}\n  idle_timeout: *five\n",
			check: func(t *testing.T, c Config) {
				if c.Server.ReadTimeout != 5*time.Second || c.Server.WriteTimeout != 9*time.Second || c.Server.IdleTimeout != 5*time.Second {
					t.Fatalf("server %+v, want read and idle 5s, write 9s", c.Server)
				}
			},
		},
		"an empty file": {
			yaml: "# nothing set\n",
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c, Default()) {
					t.Fatalf("got %+v, want the defaults", c)
				}
			},
		},
		"not YAML": {
			yaml:    "server: [\n",
			wantErr: []string{"config file", "yaml:"},
		},
		"two yaml documents": {
			yaml:    "log:\n  level: info\n---\nlog:\n  level: debug\n",
			wantErr: []string{"more than one YAML document"},
		},
		"every bad variable reported at once": {
			env:     map[string]string{"KUKIE_SERVER_READ_TIMEOUT": "soon", "KUKIE_GITHUB_APP_ID": "forty-two"},
			wantErr: []string{"KUKIE_SERVER_READ_TIMEOUT", "KUKIE_GITHUB_APP_ID"},
		},
		"secret both in env and file": {
			files:   map[string]string{"hook": "a"},
			env:     map[string]string{"KUKIE_GITHUB_WEBHOOK_SECRET": "b", "KUKIE_GITHUB_WEBHOOK_SECRET_FILE": "$hook"},
			wantErr: []string{"set both directly and as a file"},
		},
		"missing secret file": {
			env:     map[string]string{"KUKIE_GITHUB_PRIVATE_KEY_FILE": "/nonexistent/key.pem"},
			wantErr: []string{"read github private key file"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			paths := map[string]string{}
			for n, content := range tc.files {
				paths[n] = writeFile(t, n, content)
			}
			expand := func(s string) string {
				for n, p := range paths {
					s = strings.ReplaceAll(s, "$"+n, p)
				}
				return s
			}
			cfgPath := ""
			if tc.yaml != "" {
				cfgPath = writeFile(t, "config.yml", expand(tc.yaml))
			}
			vars := map[string]string{}
			for k, v := range tc.env {
				vars[k] = expand(v)
			}
			c, err := Load(cfgPath, env(vars))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Load succeeded; want an error mentioning %v", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// productionConfig is a complete, valid production configuration.
func productionConfig(t *testing.T) Config {
	c := Default()
	c.GitHub.AppID = 1234
	c.GitHub.AppSlug = "kukie"
	c.GitHub.PrivateKey = secretOf(testPrivateKey(t))
	c.GitHub.WebhookSecret = secretOf("webhook-secret-value")
	c.GitHub.ClientID = "Iv1.0123456789abcdef"
	c.GitHub.ClientSecret = secretOf("client-secret-value")
	c.Database.SecretURL = secretOf("postgres://kukie:pw@db.internal/kukie?sslmode=verify-full")
	c.Encryption.Key = secretOf(encryptionKey)
	return c
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		profile Profile
		edit    func(c *Config)
		base    func(t *testing.T) Config
		want    []string // each must appear among the problems; none → valid
		count   int      // exact number of problems when not zero
	}{
		"dev with zero configuration": {profile: Dev, base: func(*testing.T) Config { return Default() }},
		"production complete":         {profile: Production},
		"production with empty configuration lists every missing setting": {
			profile: Production,
			base:    func(*testing.T) Config { return Default() },
			want: []string{"github.app_id is required", "github.app_slug is required", "private key is required",
				"webhook secret is required", "github.client_id is required", "github client secret is required",
				"database must be PostgreSQL", "encryption key for stored credentials is required"},
			count: 8,
		},
		"production refuses missing client credentials": {
			profile: Production,
			edit:    func(c *Config) { c.GitHub.ClientID = ""; c.GitHub.ClientSecret = "" },
			want:    []string{"github.client_id is required", "github client secret is required"},
			count:   2,
		},
		"production refuses a client id without its secret": {
			profile: Production,
			edit:    func(c *Config) { c.GitHub.ClientSecret = "" },
			want:    []string{"github client secret is required"},
			count:   1,
		},
		"dev runs without client credentials": {
			profile: Dev,
			edit:    func(c *Config) { c.GitHub.ClientID = ""; c.GitHub.ClientSecret = "" },
		},
		"dev refuses a client secret without its id": {
			profile: Dev,
			edit:    func(c *Config) { c.GitHub.ClientID = "" },
			want:    []string{"must be set together"},
			count:   1,
		},
		"production refuses plain http to GitHub": {
			profile: Production,
			edit:    func(c *Config) { c.GitHub.APIURL = "http://ghe.internal/api/v3/" },
			want:    []string{"github.api_url", "must use https"},
		},
		"production refuses an http public URL": {
			profile: Production,
			edit:    func(c *Config) { c.Server.PublicURL = "http://kukie.example.com" },
			want:    []string{"server.public_url", "must use https"},
			count:   1,
		},
		"production takes an https public URL": {
			profile: Production,
			edit:    func(c *Config) { c.Server.PublicURL = "https://kukie.example.com" },
		},
		"dev accepts an http public URL": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.PublicURL = "http://127.0.0.1:8080" },
		},
		"dev accepts http GitHub URLs (a fake GitHub in tests)": {
			profile: Dev,
			edit:    func(c *Config) { c.GitHub.APIURL = "http://127.0.0.1:9999/" },
		},
		"in-cluster teams must be team names": {
			profile: Production,
			edit:    func(c *Config) { c.Clusters.InClusterTeams = []string{"platform", "Team A"} },
			want:    []string{"clusters.in_cluster_teams", `"Team A"`},
			count:   1,
		},
		"production refuses sqlite": {
			profile: Production,
			edit:    func(c *Config) { c.Database.SecretURL = ""; c.Database.URL = "sqlite:/data/k.db" },
			want:    []string{"database must be PostgreSQL"},
		},
		"production refuses dev authentication": {
			profile: Production,
			edit:    func(c *Config) { c.Auth.DevTeam = "dev" },
			want:    []string{"auth.dev_team must be empty"},
		},
		"production refuses http notification endpoints": {
			profile: Production,
			edit:    func(c *Config) { c.Notifications.AllowHTTP = true },
			want:    []string{"notifications.allow_http must be false"},
		},
		"dev allows http notification endpoints": {
			profile: Dev,
			edit:    func(c *Config) { c.Notifications.AllowHTTP = true },
		},
		"dev allows dev authentication": {
			profile: Dev,
			edit:    func(c *Config) { c.Auth.DevTeam = "dev" },
		},
		"bad dev team name": {
			profile: Dev,
			edit:    func(c *Config) { c.Auth.DevTeam = "Dev Team" },
			want:    []string{"auth.dev_team"},
		},
		"encryption key of wrong size": {
			profile: Dev,
			edit:    func(c *Config) { c.Encryption.Key = secretOf(base64.StdEncoding.EncodeToString([]byte("short"))) },
			want:    []string{"KUKIE_ENCRYPTION_KEY or encryption.key_file: encryption key must decode to 32 bytes"},
		},
		"encryption key not base64": {
			profile: Dev,
			edit:    func(c *Config) { c.Encryption.Key = "not base64!" },
			want:    []string{"KUKIE_ENCRYPTION_KEY or encryption.key_file: encryption key is not valid base64"},
		},
		"private key that is not PEM": {
			profile: Dev,
			edit:    func(c *Config) { c.GitHub.PrivateKey = "ssh-rsa AAAA" },
			want:    []string{"github private key (KUKIE_GITHUB_PRIVATE_KEY or github.private_key_file): not PEM"},
		},
		"password in the yaml database url": {
			profile: Dev,
			edit:    func(c *Config) { c.Database.SecretURL = ""; c.Database.URL = "postgres://u:pw@db/k" },
			want:    []string{"database.url holds a password"},
		},
		"password as a query parameter of the yaml database url": {
			profile: Dev,
			edit: func(c *Config) {
				c.Database.SecretURL = ""
				c.Database.URL = "postgres://u@db/k?sslmode=require&password=pw"
			},
			want: []string{"database.url holds a password"},
		},
		"unknown database scheme": {
			profile: Dev,
			edit:    func(c *Config) { c.Database.SecretURL = "mysql://db/k" },
			want:    []string{`database url: unsupported scheme, want "sqlite:PATH" or "postgres://..." (set by KUKIE_DATABASE_URL or database.url_file)`},
		},
		"unknown database scheme in the yaml": {
			profile: Dev,
			edit:    func(c *Config) { c.Database.SecretURL = ""; c.Database.URL = "mysql://db/k" },
			want:    []string{`database url: unsupported scheme, want "sqlite:PATH" or "postgres://..." (set by database.url)`},
		},
		"bad address, log format and level together": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.Address = "8080"; c.Log.Format = "xml"; c.Log.Level = "loud" },
			want:    []string{"server.address", "log.format", "log.level"},
			count:   3,
		},
		"metrics on the main listener's port": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.Address = "0.0.0.0:8080"; c.Metrics.Address = "127.0.0.1:8080" },
			want:    []string{`metrics.address "127.0.0.1:8080" takes the port of server.address "0.0.0.0:8080"`},
		},
		"metrics on the default main listener's port": {
			profile: Dev,
			edit:    func(c *Config) { c.Metrics.Address = "127.0.0.1:8080" },
			want:    []string{`metrics.address "127.0.0.1:8080" takes the port of server.address "127.0.0.1:8080"`},
		},
		"metrics on a port of their own, or on any free one": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.Address = "0.0.0.0:8080"; c.Metrics.Address = "0.0.0.0:9100" },
		},
		"metrics and the main listener both on any free port": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.Address = "127.0.0.1:0"; c.Metrics.Address = "127.0.0.1:0" },
		},
		"metrics on the main listener's port of another address": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.Address = "10.0.0.1:8080"; c.Metrics.Address = "127.0.0.1:8080" },
		},
		"negative timeout": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.ReadTimeout = -time.Second },
			want:    []string{"server.read_timeout must not be negative"},
		},
		"negative drain delay": {
			profile: Dev,
			edit:    func(c *Config) { c.Server.DrainDelay = -time.Second },
			want:    []string{"server.drain_delay must not be negative"},
		},
		"zero deploy timeout": {
			profile: Dev,
			edit:    func(c *Config) { c.Pipeline.DeployTimeout = 0 },
			want:    []string{"pipeline.deploy_timeout must be a positive duration"},
			count:   1,
		},
		"negative pipeline durations": {
			profile: Production,
			edit: func(c *Config) {
				c.Pipeline.DeployTimeout, c.Pipeline.DeployPollInterval, c.Pipeline.ClaimTTL = -time.Minute, -time.Second, -time.Second
				c.Pipeline.PullSweepInterval = -time.Minute
			},
			want:  []string{"pipeline.deploy_timeout", "pipeline.deploy_poll_interval", "pipeline.claim_ttl", "pipeline.pull_sweep_interval"},
			count: 4,
		},
		"deploy poll not shorter than the timeout": {
			profile: Dev,
			edit:    func(c *Config) { c.Pipeline.DeployTimeout, c.Pipeline.DeployPollInterval = time.Minute, time.Minute },
			want:    []string{"pipeline.deploy_poll_interval (1m0s) must be shorter than pipeline.deploy_timeout (1m0s)"},
		},
		"claim ttl a github call can outlast": {
			profile: Dev,
			edit:    func(c *Config) { c.Pipeline.ClaimTTL, c.GitHub.RequestTimeout = 30*time.Second, 30*time.Second },
			want:    []string{"pipeline.claim_ttl (30s) must be longer than github.request_timeout (30s)"},
			count:   1,
		},
		"zero github request timeout": {
			profile: Dev,
			edit:    func(c *Config) { c.GitHub.RequestTimeout = 0 },
			want:    []string{"github.request_timeout must be a positive duration"},
			count:   1,
		},
		"metrics address not host:port": {
			profile: Dev,
			edit:    func(c *Config) { c.Metrics.Address = "9090" },
			want:    []string{`metrics.address "9090" is not host:port`},
			count:   1,
		},
		"zero webhook retention": {
			profile: Dev,
			edit:    func(c *Config) { c.Webhooks.Retention = 0 },
			want:    []string{"webhooks.retention must be a positive duration"},
			count:   1,
		},
		"zero notification retention": {
			profile: Dev,
			edit:    func(c *Config) { c.Notifications.Retention = 0 },
			want:    []string{"notifications.retention must be a positive duration"},
			count:   1,
		},
		"archive cache too small": {
			profile: Dev,
			edit:    func(c *Config) { c.Pipeline.ArchiveCacheBytes = 1024 },
			want:    []string{"pipeline.archive_cache_bytes must be at least"},
		},
		"cluster response bound too small": {
			profile: Dev,
			edit:    func(c *Config) { c.Clusters.MaxResponseBytes = 4096 },
			want:    []string{"clusters.max_response_bytes must be at least 1048576 (1 MiB), got 4096"},
			count:   1,
		},
		"cluster response bound zero": {
			profile: Dev,
			edit:    func(c *Config) { c.Clusters.MaxResponseBytes = 0 },
			want:    []string{"clusters.max_response_bytes must be at least 1048576 (1 MiB), got 0"},
			count:   1,
		},
		"helm worker memory too small": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.HelmWorkerMemory = 64 << 20 },
			want:    []string{"render.helm_worker_memory must be at least 134217728 (128 MiB), got 67108864"},
			count:   1,
		},
		"negative helm workers": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.HelmWorkers = -1 },
			want:    []string{"render.helm_workers must be 0 (one per core) or more, got -1"},
			count:   1,
		},
		"kustomize worker memory too small": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.KustomizeWorkerMemory = 64 << 20 },
			want:    []string{"render.kustomize_worker_memory must be at least 134217728 (128 MiB), got 67108864"},
			count:   1,
		},
		"render timeout zero": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.Timeout = 0 },
			want:    []string{"render.timeout must be a positive duration such as 30s or 15m, got 0s"},
			count:   1,
		},
		"render timeout past the most": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.Timeout = 10 * time.Minute },
			want:    []string{"render.timeout must be at most 5m0s, got 10m0s"},
			count:   1,
		},
		"negative kustomize workers": {
			profile: Dev,
			edit:    func(c *Config) { c.Render.KustomizeWorkers = -1 },
			want:    []string{"render.kustomize_workers must be 0 (one per core) or more, got -1"},
			count:   1,
		},
		"unknown profile": {
			profile: "staging",
			want:    []string{"unknown profile"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c Config
			if tc.base != nil {
				c = tc.base(t)
			} else {
				c = productionConfig(t)
			}
			if tc.edit != nil {
				tc.edit(&c)
			}
			err := c.Validate(tc.profile)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate(%s) = %v; want valid", tc.profile, err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate(%s) = %v; want a *ValidationError", tc.profile, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("problems do not mention %q:\n%v", w, err)
				}
			}
			if tc.count != 0 && len(ve.Problems) != tc.count {
				t.Errorf("%d problems, want %d:\n%v", len(ve.Problems), tc.count, err)
			}
		})
	}
}

// TestCheckListsLoadAndValidationProblemsTogether: values that could not be read
// (an unreadable secret file, a bad number or duration) are listed with every
// validation problem in one answer, not alone.
func TestCheckListsLoadAndValidationProblemsTogether(t *testing.T) {
	c, err := Load(writeFile(t, "config.yml", "pipeline:\n  claim_ttl: 2 minutes\n"), env(map[string]string{
		"KUKIE_GITHUB_PRIVATE_KEY_FILE": filepath.Join(t.TempDir(), "missing.pem"),
		"KUKIE_PIPELINE_DEPLOY_TIMEOUT": "soon",
		"KUKIE_SERVER_MAX_BODY_BYTES":   "lots",
		"KUKIE_LOG_FORMAT":              "xml",
	}))
	var loadErr *LoadError
	if !errors.As(err, &loadErr) || len(loadErr.Problems) != 4 {
		t.Fatalf("Load = %v, want a *LoadError with 4 problems", err)
	}
	if c.Log.Format != "xml" || c.Pipeline.DeployTimeout != DefaultDeployTimeout {
		t.Errorf("configuration read so far = %+v, want the readable values applied and the others at their defaults", c)
	}
	err = Check(c, Production, loadErr)
	var invalid *ValidationError
	if !errors.As(err, &invalid) {
		t.Fatalf("Check = %v, want a *ValidationError", err)
	}
	all := strings.Join(invalid.Problems, "\n")
	for _, want := range []string{`pipeline.claim_ttl (line 2): not a duration such as 30s or 2m: "2 minutes"`,
		"read github private key file", "KUKIE_PIPELINE_DEPLOY_TIMEOUT", "KUKIE_SERVER_MAX_BODY_BYTES",
		"log.format", "github.app_id is required", "database must be PostgreSQL", "encryption key for stored credentials is required"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not mention %q:\n%s", want, all)
		}
	}
	if !strings.HasPrefix(invalid.Problems[0], "config file ") {
		t.Errorf("the problems of reading come after validation's: %q", invalid.Problems)
	}

	if err := Check(productionConfig(t), Production, nil); err != nil {
		t.Errorf("Check of a valid configuration = %v", err)
	}
	_, err = Load(writeFile(t, "config.yml", "server: ["), env(nil))
	if err == nil || errors.As(err, &loadErr) {
		t.Fatalf("Load of a broken file = %v, want an error that is not a *LoadError", err)
	}
	if got := Check(Config{}, Production, err); got != err {
		t.Errorf("Check with a file that does not decode = %v, want Load's error as it is", got)
	}
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	c := productionConfig(t)
	clear := []string{
		c.GitHub.WebhookSecret.Reveal(),
		"-----BEGIN RSA PRIVATE KEY-----",
		encryptionKey,
		"kukie:pw@",
	}
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	log.Info().Interface("config", c).Msg("Configuration loaded")
	log.Info().Object("config", c).Msg("Starting")
	jsonOut, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"%v":      fmt.Sprintf("%v", c),
		"%+v":     fmt.Sprintf("%+v", c),
		"%#v":     fmt.Sprintf("%#v", c),
		"json":    string(jsonOut),
		"zerolog": logs.String(),
		"error":   func() string { c.Log.Format = "xml"; return c.Validate(Production).Error() }(),
	} {
		t.Run(name, func(t *testing.T) {
			for _, s := range clear {
				if strings.Contains(out, s) {
					t.Fatalf("output contains secret %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"KUKIE_SERVER_ADDRESS=x", "KUKIE_SERVR_ADDRESS=typo", "KUKIE_PROFILE=dev", "KUKIE_CONFIG=/c.yml",
		"KUKIE_TEST_POSTGRES_URL=x", "KUKIE_ENVTEST_ASSETS=x", "HOME=/root", "KUKIE_LOG_FORMATT=json",
	})
	want := []string{"KUKIE_LOG_FORMATT", "KUKIE_SERVR_ADDRESS"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("UnknownEnv = %v, want %v", got, want)
	}
}

func TestExampleConfigIsCompleteAndValid(t *testing.T) {
	// config.example.yml documents every key: it must load strictly, and every
	// setting of Config must appear in it.
	c, err := Load(filepath.Join("..", "config.example.yml"), env(nil))
	if err != nil {
		t.Fatalf("config.example.yml does not load: %v", err)
	}
	if err := c.Validate(Dev); err != nil {
		t.Fatalf("config.example.yml is not valid for dev: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "config.example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, key := range nodeKeys(&doc, "") {
		shown[key] = true
	}
	for _, key := range settingKeys(reflect.TypeFor[Config](), "") {
		if !shown[key] {
			t.Errorf("config.example.yml does not set %s", key)
		}
	}
}

// settingKeys lists the dotted YAML keys of the settings of t (server.address),
// sections left out.
func settingKeys(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("yaml")
		if tag == "-" || tag == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, settingKeys(f.Type, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}

// nodeKeys lists the dotted keys of the scalars and sequences a YAML document
// sets, mappings left out.
func nodeKeys(n *yaml.Node, prefix string) []string {
	if n.Kind == yaml.DocumentNode {
		return nodeKeys(n.Content[0], prefix)
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i].Value, n.Content[i+1]
		if value.Kind == yaml.MappingNode {
			out = append(out, nodeKeys(value, prefix+key+".")...)
			continue
		}
		out = append(out, prefix+key)
	}
	return out
}

func TestParseProfile(t *testing.T) {
	for in, wantErr := range map[string]bool{"dev": false, "production": false, "prod": true, "": true} {
		t.Run(in, func(t *testing.T) {
			if _, err := ParseProfile(in); (err != nil) != wantErr {
				t.Fatalf("ParseProfile(%q) = %v", in, err)
			}
		})
	}
}

// TestREADMEDocumentsEverySetting: the configuration table of README.md has a
// row for every YAML key and no other, and each variable is in the row of the
// setting it sets (a secret's in its section's rows: it has no YAML key).
func TestREADMEDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "\n## Configuration\n")
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]string{}
	for line := range strings.Lines(table) {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			key, _, _ := strings.Cut(rest, "`")
			rows[key] = line
		}
	}
	keys := map[string]bool{}
	for _, key := range settingKeys(reflect.TypeFor[Config](), "") {
		keys[key] = true
		if rows[key] == "" {
			t.Errorf("README's configuration table has no row for %s", key)
		}
	}
	for key := range rows {
		if !keys[key] {
			t.Errorf("README's configuration table has a row for %s, which is no setting", key)
		}
	}
	for _, s := range envSettings {
		key := envKey(t, s)
		if section, ok := strings.CutSuffix(key, ".-"); ok {
			found := false
			for k, row := range rows {
				found = found || strings.HasPrefix(k, section+".") && strings.Contains(row, "`"+s.name+"`")
			}
			if !found {
				t.Errorf("README's configuration table lists %s in no row of %s", s.name, section)
			}
			continue
		}
		if !strings.Contains(rows[key], "`"+s.name+"`") {
			t.Errorf("README's configuration table does not list %s in the row of %s, which it sets", s.name, key)
		}
	}
}

// envKey is the dotted YAML key of the setting s sets, found by setting it on
// a zero Config; "section.-" for a secret, which has none.
func envKey(t *testing.T, s envSetting) string {
	t.Helper()
	var c Config
	for _, v := range []string{"1s", "1"} {
		if s.set(&c, v) == nil {
			break
		}
	}
	var find func(v reflect.Value, prefix string) string
	find = func(v reflect.Value, prefix string) string {
		for i := range v.NumField() {
			f, tag := v.Field(i), v.Type().Field(i).Tag.Get("yaml")
			if f.Kind() == reflect.Struct {
				if k := find(f, prefix+tag+"."); k != "" {
					return k
				}
			} else if !f.IsZero() {
				return prefix + tag
			}
		}
		return ""
	}
	key := find(reflect.ValueOf(c), "")
	if key == "" {
		t.Fatalf("%s sets no setting", s.name)
	}
	return key
}

// TestExampleConfigShowsTheDefaults: config.example.yml says its values are the
// defaults; it loads to the configuration of no file at all, the server's and the
// store's own defaults filled in where Config leaves them to those packages.
func TestExampleConfigShowsTheDefaults(t *testing.T) {
	c, err := Load(filepath.Join("..", "config.example.yml"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Server = Server{Address: server.DefaultAddress, ReadHeaderTimeout: server.DefaultReadHeaderTimeout,
		ReadTimeout: server.DefaultReadTimeout, WriteTimeout: server.DefaultWriteTimeout, IdleTimeout: server.DefaultIdleTimeout,
		ShutdownTimeout: server.DefaultShutdownTimeout, MaxBodyBytes: server.DefaultMaxBodyBytes}
	want.Database.URL = store.DefaultURL
	if c.Clusters.InClusterTeams != nil && len(c.Clusters.InClusterTeams) == 0 {
		c.Clusters.InClusterTeams = nil
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config.example.yml loads to\n%+v\nnot the defaults\n%+v", c, want)
	}
}

func TestValidationErrorCountsItsProblems(t *testing.T) {
	for n, want := range map[int]string{1: "(1 problem):", 2: "(2 problems):"} {
		err := &ValidationError{Profile: Production, Problems: slices.Repeat([]string{"github.app_id is required"}, n)}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("a ValidationError of %d problems says %q, want %q", n, err.Error(), want)
		}
	}
}
