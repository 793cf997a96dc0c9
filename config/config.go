// Package config owns the service's settings: the Config struct, how it is read
// (a strict YAML file, then KUKIE_* environment variables, then secrets from
// variables or files), and Validate, which decides whether a profile may start with
// it (Check adds the values Load could not read, so that all problems are listed
// together). Secrets are held as secret.Secret and never come from the YAML file itself:
// a config file is something people commit and paste, so it names secret files at
// most.
package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// Profile selects how strict validation is.
type Profile string

const (
	// Dev is the default for a local run: SQLite, no GitHub App needed, dev auth allowed.
	Dev Profile = "dev"
	// Production refuses to start without everything a safe deployment needs.
	Production Profile = "production"
)

// ParseProfile accepts "dev" or "production".
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case Dev, Production:
		return Profile(s), nil
	}
	return "", fmt.Errorf("unknown profile %q: want %q or %q", s, Dev, Production)
}

// Defaults for a zero-configuration local run.
const (
	DefaultGitHubWebURL     = "https://github.com"
	DefaultGitHubAPIURL     = "https://api.github.com/"
	DefaultGitHubGraphQLURL = "https://api.github.com/graphql"
	DefaultLogFormat        = "json"
	DefaultLogLevel         = "info"
	// EncryptionKeyBytes is the size of the key that encrypts stored credentials
	// (AES-256).
	EncryptionKeyBytes = 32
	// DefaultArchiveCacheBytes bounds the on-disk cache of repository archives.
	DefaultArchiveCacheBytes = 2 << 30
	// MinArchiveCacheBytes keeps the cache large enough to hold a repository at all.
	MinArchiveCacheBytes = 16 << 20
	// Rate limit defaults: far above what a team's assistant or a person signing
	// in does, far below what would hurt the service or its GitHub quota.
	DefaultTeamChangesPerMinute = 60
	DefaultTeamChangesBurst     = 30
	DefaultClientPerMinute      = 30
	DefaultClientBurst          = 20
	// An assistant exploring a repository reads a few dozen files and views; a
	// view downloads an archive on a new commit and renders every app.
	DefaultTeamRepositoryPerMinute = 120
	DefaultTeamRepositoryBurst     = 60
	// A decision and an Application read ask the team's cluster, through worker
	// slots every team shares.
	DefaultTeamClusterReadsPerMinute = 120
	DefaultTeamClusterReadsBurst     = 60
	// Repository tokens, connections, suggestions and kubeconfig replacements
	// call GitHub or the cluster; agents of a team starting together mint a token
	// each.
	DefaultTeamAdminPerMinute = 60
	DefaultTeamAdminBurst     = 30
	// A person opening change and check pages, each asking GitHub with their
	// token whether they may read its repository.
	DefaultUserPagesPerMinute = 60
	DefaultUserPagesBurst     = 30
)

// Config is every setting of the service.
type Config struct {
	Server     Server     `yaml:"server" json:"server"`
	Database   Database   `yaml:"database" json:"database"`
	GitHub     GitHub     `yaml:"github" json:"github"`
	Auth       Auth       `yaml:"auth" json:"auth"`
	Encryption Encryption `yaml:"encryption" json:"encryption"`
	Log        Log        `yaml:"log" json:"log"`
	Pipeline   Pipeline   `yaml:"pipeline" json:"pipeline"`
	Render     Render     `yaml:"render" json:"render"`
	Clusters   Clusters   `yaml:"clusters" json:"clusters"`
	Webhooks   Webhooks   `yaml:"webhooks" json:"webhooks"`
	Metrics    Metrics    `yaml:"metrics" json:"metrics"`
	RateLimits RateLimits `yaml:"rate_limits" json:"rate_limits"`
	// Notifications are the signed deliveries to teams' webhook endpoints.
	Notifications Notifications `yaml:"notifications" json:"notifications"`
}

// Notifications holds the settings of deliveries to teams' endpoints.
type Notifications struct {
	// AllowHTTP accepts http:// endpoint URLs, for a receiver on a developer's
	// machine; the production profile refuses it.
	AllowHTTP bool `yaml:"allow_http" json:"allow_http"`
	// AllowPrivateNetworks lets deliveries reach loopback, private, link-local and
	// other non-public addresses. An endpoint URL is a team's input, and the service
	// runs inside a network the team does not: by default a delivery connects only to
	// public addresses, checked on the address actually dialled (so a name that
	// resolves to an internal address later is refused too).
	AllowPrivateNetworks bool `yaml:"allow_private_networks" json:"allow_private_networks"`
	// Retention is how long a delivered notification stays in the delivery log;
	// pending ones are kept whatever their age.
	Retention time.Duration `yaml:"retention" json:"retention"`
}

// Metrics configures where the Prometheus exposition is served.
type Metrics struct {
	// Address, when set, serves GET /metrics on a listener of its own (host:port), so
	// it can bind where only the monitoring system reaches; empty serves it on the
	// main listener. It never requires a team token either way.
	Address string `yaml:"address" json:"address"`
}

// Webhooks tunes the durable webhook inbox.
type Webhooks struct {
	// Retention is how long a processed (done) delivery is kept before it is
	// deleted; failed and waiting deliveries are kept whatever their age.
	Retention time.Duration `yaml:"retention" json:"retention"`
}

// Server holds HTTP settings; zero durations take the server package's defaults.
type Server struct {
	Address           string        `yaml:"address" json:"address"`
	PublicURL         string        `yaml:"public_url" json:"public_url"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout" json:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout" json:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// DrainDelay is how long the server keeps accepting requests after SIGTERM,
	// answering /readyz 503, before it stops listening (0: it stops at once).
	DrainDelay   time.Duration `yaml:"drain_delay" json:"drain_delay"`
	MaxBodyBytes int64         `yaml:"max_body_bytes" json:"max_body_bytes"`
	// TrustForwardedFor takes the client address of per-client limits from the
	// last X-Forwarded-For entry: only behind a proxy that sets it.
	TrustForwardedFor bool `yaml:"trust_forwarded_for" json:"trust_forwarded_for"`
}

// RateLimits bound how often one caller may make the service work or call out: a
// burst at once, then the rate a minute.
type RateLimits struct {
	// TeamChanges* limit each team's changes created, retried and rolled back,
	// whatever its tokens and over HTTP and MCP alike.
	TeamChangesPerMinute int64 `yaml:"team_changes_per_minute" json:"team_changes_per_minute"`
	TeamChangesBurst     int64 `yaml:"team_changes_burst" json:"team_changes_burst"`
	// Client* limit each client address on the routes anyone may call that make
	// the service call GitHub (the sign-in and setup callbacks, sign-out).
	ClientPerMinute int64 `yaml:"client_per_minute" json:"client_per_minute"`
	ClientBurst     int64 `yaml:"client_burst" json:"client_burst"`
	// TeamRepository* limit each team's repository views and reads (the
	// repository route, the MCP repository tools), which download and render.
	TeamRepositoryPerMinute int64 `yaml:"team_repository_per_minute" json:"team_repository_per_minute"`
	TeamRepositoryBurst     int64 `yaml:"team_repository_burst" json:"team_repository_burst"`
	// TeamClusterReads* limit each team's path decisions and Application reads,
	// over HTTP and MCP alike.
	TeamClusterReadsPerMinute int64 `yaml:"team_cluster_reads_per_minute" json:"team_cluster_reads_per_minute"`
	TeamClusterReadsBurst     int64 `yaml:"team_cluster_reads_burst" json:"team_cluster_reads_burst"`
	// TeamAdmin* limit each team's administrative calls that make the service call
	// GitHub or the cluster: repository tokens and connections, suggestions,
	// kubeconfig replacements.
	TeamAdminPerMinute int64 `yaml:"team_admin_per_minute" json:"team_admin_per_minute"`
	TeamAdminBurst     int64 `yaml:"team_admin_burst" json:"team_admin_burst"`
	// UserPages* limit each signed-in person's change and check pages.
	UserPagesPerMinute int64 `yaml:"user_pages_per_minute" json:"user_pages_per_minute"`
	UserPagesBurst     int64 `yaml:"user_pages_burst" json:"user_pages_burst"`
}

// Database names the store.
type Database struct {
	// URL is a URL without credentials, which may live in the YAML file: sqlite:PATH,
	// or postgres://kukie@db/kukie?sslmode=verify-full with the password in PGPASSWORD.
	URL string `yaml:"url" json:"url"`
	// SecretURL is a URL that may carry a password; it comes from KUKIE_DATABASE_URL
	// or the file named by url_file, and wins over URL.
	SecretURL secret.Secret `yaml:"-" json:"secret_url"`
	URLFile   string        `yaml:"url_file" json:"url_file"`
}

// GitHub holds the GitHub App's identity and endpoints.
type GitHub struct {
	AppID             int64         `yaml:"app_id" json:"app_id"`
	AppSlug           string        `yaml:"app_slug" json:"app_slug"`
	WebURL            string        `yaml:"web_url" json:"web_url"`
	APIURL            string        `yaml:"api_url" json:"api_url"`
	GraphQLURL        string        `yaml:"graphql_url" json:"graphql_url"`
	PrivateKey        secret.Secret `yaml:"-" json:"private_key"`
	PrivateKeyFile    string        `yaml:"private_key_file" json:"private_key_file"`
	WebhookSecret     secret.Secret `yaml:"-" json:"webhook_secret"`
	WebhookSecretFile string        `yaml:"webhook_secret_file" json:"webhook_secret_file"`
	// ClientID and ClientSecret are the App's OAuth client credentials. With them the
	// setup callback checks that the person who installed the App can access the
	// installation before binding it to a team.
	ClientID         string        `yaml:"client_id" json:"client_id"`
	ClientSecret     secret.Secret `yaml:"-" json:"client_secret"`
	ClientSecretFile string        `yaml:"client_secret_file" json:"client_secret_file"`
	// RequestTimeout bounds one request to GitHub, including reading its body.
	// pipeline.claim_ttl must be longer, so no single call outlasts a plan claim.
	RequestTimeout time.Duration `yaml:"request_timeout" json:"request_timeout"`
}

// UserAuthorization reports whether the App's client credentials are configured, so
// the setup callback can check who installed the App.
func (g GitHub) UserAuthorization() bool { return g.ClientID != "" && g.ClientSecret.IsSet() }

// Auth configures how API callers are identified.
type Auth struct {
	// DevTeam, when set, lets requests without a token act as this team. Allowed
	// only in the dev profile.
	DevTeam string `yaml:"dev_team" json:"dev_team"`
}

// Encryption holds the key for credentials stored in the database.
type Encryption struct {
	// Key is base64 of EncryptionKeyBytes random bytes.
	Key     secret.Secret `yaml:"-" json:"key"`
	KeyFile string        `yaml:"key_file" json:"key_file"`
}

// Log selects the log output.
type Log struct {
	Format string `yaml:"format" json:"format"` // json or console
	Level  string `yaml:"level" json:"level"`   // trace, debug, info, warn, error
}

// Pipeline tunes the change pipeline. Default fills in the plan package's defaults,
// and Validate requires every value to be positive.
type Pipeline struct {
	// DeployTimeout bounds how long a merged change may take to be synced and
	// healthy before its plan is deploy_failed.
	DeployTimeout time.Duration `yaml:"deploy_timeout" json:"deploy_timeout"`
	// DeployPollInterval is how often a deploying change's Application or target
	// resource is read where it cannot be watched, and how soon a check whose read
	// failed is tried again.
	DeployPollInterval time.Duration `yaml:"deploy_poll_interval" json:"deploy_poll_interval"`
	// ClaimTTL is how long a worker's claim on a plan lasts without renewal (its
	// holder renews it while it works); another replica resumes the plans of a
	// crashed worker after it. It must be longer than github.request_timeout.
	ClaimTTL time.Duration `yaml:"claim_ttl" json:"claim_ttl"`
	// CacheDir holds the repository archive cache; the user's cache directory
	// (…/kukie-gitops) when empty.
	CacheDir string `yaml:"cache_dir" json:"cache_dir"`
	// ArchiveCacheBytes bounds the archive cache on disk; the least recently used
	// archives are removed beyond it.
	ArchiveCacheBytes int64 `yaml:"archive_cache_bytes" json:"archive_cache_bytes"`
	// PullSweepInterval is how often one of the replicas reads the pull request of
	// each change whose pull request is open: GitHub does not deliver again a
	// pull_request event the service missed, and such a change would stay open,
	// holding its files, though its pull request was merged or closed.
	PullSweepInterval time.Duration `yaml:"pull_sweep_interval" json:"pull_sweep_interval"`
}

// Render sizes the worker processes that run Helm chart templates and kustomize
// builds, which are untrusted repository content.
type Render struct {
	// HelmWorkers is how many charts render at once, each in a worker process kept
	// running between renders; 0 means one per core.
	HelmWorkers int64 `yaml:"helm_workers" json:"helm_workers"`
	// HelmWorkerMemory is the memory in bytes one worker may map beyond what it
	// holds when it starts; templates that need more are refused.
	HelmWorkerMemory int64 `yaml:"helm_worker_memory" json:"helm_worker_memory"`
	// KustomizeWorkers is how many kustomize builds run at once, each in a
	// worker process kept running between builds; 0 means one per core.
	KustomizeWorkers int64 `yaml:"kustomize_workers" json:"kustomize_workers"`
	// KustomizeWorkerMemory is the memory in bytes one kustomize worker may map
	// beyond what it holds when it starts; builds that need more are refused.
	KustomizeWorkerMemory int64 `yaml:"kustomize_worker_memory" json:"kustomize_worker_memory"`
	// Timeout bounds one render (every build and the verification of a plan);
	// past it the work is stopped and the plan refused as render_timeout.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

// Clusters decides how teams may reach their clusters.
type Clusters struct {
	// InClusterTeams names the teams that may register a cluster reached with the
	// service's own service account (in_cluster: true). That account's rights in the
	// cluster the service runs in become the team's, so no team may unless the
	// operator names it here; empty (the default) refuses in-cluster access to all.
	InClusterTeams []string `yaml:"in_cluster_teams" json:"in_cluster_teams"`
	// AllowInsecureTLS accepts kubeconfigs with insecure-skip-tls-verify: true
	// (with a warning to the team). Without it (the default) they are refused at
	// registration and at every use: the API server's certificate unverified, a
	// man in the middle is sent the team's credentials.
	AllowInsecureTLS bool `yaml:"allow_insecure_tls" json:"allow_insecure_tls"`
	// MaxResponseBytes bounds the body of each answer of a cluster's API server
	// (a watch's stream aside) that the service reads: the list of Applications of
	// a large Argo CD instance is the largest; an address that is no API server
	// could otherwise make the service hold what it sends.
	MaxResponseBytes int64 `yaml:"max_response_bytes" json:"max_response_bytes"`
}

// DatabaseURL is the URL to open: the secret one when set, else the plain one, else
// the default SQLite file.
func (c Config) DatabaseURL() secret.Secret {
	switch {
	case c.Database.SecretURL.IsSet():
		return c.Database.SecretURL
	case c.Database.URL != "":
		return secret.New(c.Database.URL)
	}
	return secret.New(store.DefaultURL)
}

// EncryptionKey decodes the configured key; Validate reports a bad one first.
func (c Config) EncryptionKey() ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.Encryption.Key.Reveal()))
	if err != nil {
		return nil, errors.New("encryption key is not valid base64")
	}
	if len(key) != EncryptionKeyBytes {
		return nil, fmt.Errorf("encryption key must decode to %d bytes, got %d", EncryptionKeyBytes, len(key))
	}
	return key, nil
}

// Pipeline defaults. They equal the plan package's own fallbacks (a test in package
// service checks that); config does not import plan so that reading configuration stays
// free of the pipeline's dependencies.
const (
	DefaultDeployTimeout      = 15 * time.Minute
	DefaultDeployPollInterval = 5 * time.Second
	DefaultClaimTTL           = 2 * time.Minute
	DefaultPullSweepInterval  = 5 * time.Minute
	// DefaultGitHubRequestTimeout equals the github package's default timeout (a
	// test in package service checks that).
	DefaultGitHubRequestTimeout = 30 * time.Second
	// DefaultWebhookRetention equals the handler package's default (a test in
	// package service checks that).
	DefaultWebhookRetention = 30 * 24 * time.Hour
	// DefaultNotificationRetention equals the notify package's default (a test in
	// package service checks that).
	DefaultNotificationRetention = 30 * 24 * time.Hour
	// DefaultHelmWorkerMemory and MinHelmWorkerMemory equal package
	// render/helmexec's (a test in package service checks that).
	DefaultHelmWorkerMemory = 512 << 20
	MinHelmWorkerMemory     = 128 << 20
	// DefaultKustomizeWorkerMemory equals package render's, and the least equals
	// render/helmexec's (a test in package service checks that).
	DefaultKustomizeWorkerMemory = 1 << 30
	MinKustomizeWorkerMemory     = 128 << 20
	// DefaultRenderTimeout equals package render's Timeout (a test in package
	// service checks that); MaxRenderTimeout keeps a render from holding a worker and a plan's
	// claim for longer than a person waits for an answer.
	DefaultRenderTimeout = 5 * time.Second
	MaxRenderTimeout     = 5 * time.Minute
	// DefaultClusterMaxResponseBytes equals package kube's DefaultMaxResponseBytes
	// (a test in package service checks that). MinClusterMaxResponseBytes is far
	// below the list of Applications of a small instance: a bound below it would
	// refuse ordinary reads.
	DefaultClusterMaxResponseBytes = 256 << 20
	MinClusterMaxResponseBytes     = 1 << 20
)

// Default returns the configuration of a zero-configuration run.
func Default() Config {
	return Config{
		GitHub: GitHub{WebURL: DefaultGitHubWebURL, APIURL: DefaultGitHubAPIURL, GraphQLURL: DefaultGitHubGraphQLURL,
			RequestTimeout: DefaultGitHubRequestTimeout},
		Log: Log{Format: DefaultLogFormat, Level: DefaultLogLevel},
		// The server's own defaults, so that the configuration a service logs when
		// it starts holds the timeouts and bounds that apply, not zeros.
		Server: Server{Address: server.DefaultAddress, ReadHeaderTimeout: server.DefaultReadHeaderTimeout,
			ReadTimeout: server.DefaultReadTimeout, WriteTimeout: server.DefaultWriteTimeout,
			IdleTimeout: server.DefaultIdleTimeout, ShutdownTimeout: server.DefaultShutdownTimeout,
			MaxBodyBytes: server.DefaultMaxBodyBytes},
		Pipeline: Pipeline{
			DeployTimeout:      DefaultDeployTimeout,
			DeployPollInterval: DefaultDeployPollInterval,
			ClaimTTL:           DefaultClaimTTL,
			ArchiveCacheBytes:  DefaultArchiveCacheBytes,
			PullSweepInterval:  DefaultPullSweepInterval,
		},
		Render:        Render{HelmWorkerMemory: DefaultHelmWorkerMemory, KustomizeWorkerMemory: DefaultKustomizeWorkerMemory, Timeout: DefaultRenderTimeout},
		Webhooks:      Webhooks{Retention: DefaultWebhookRetention},
		Notifications: Notifications{Retention: DefaultNotificationRetention},
		Clusters:      Clusters{MaxResponseBytes: DefaultClusterMaxResponseBytes},
		RateLimits: RateLimits{TeamChangesPerMinute: DefaultTeamChangesPerMinute, TeamChangesBurst: DefaultTeamChangesBurst,
			ClientPerMinute: DefaultClientPerMinute, ClientBurst: DefaultClientBurst,
			TeamRepositoryPerMinute: DefaultTeamRepositoryPerMinute, TeamRepositoryBurst: DefaultTeamRepositoryBurst,
			TeamClusterReadsPerMinute: DefaultTeamClusterReadsPerMinute, TeamClusterReadsBurst: DefaultTeamClusterReadsBurst,
			TeamAdminPerMinute: DefaultTeamAdminPerMinute, TeamAdminBurst: DefaultTeamAdminBurst,
			UserPagesPerMinute: DefaultUserPagesPerMinute, UserPagesBurst: DefaultUserPagesBurst},
	}
}

// LoadError lists the settings whose values could not be read: an environment
// variable that is not a number or a duration, an unreadable secret file, a secret
// given twice. Load returns it together with the configuration as far as it could
// be read (each such setting keeps its earlier value), so that Check can report
// these problems along with every validation problem.
type LoadError struct {
	Problems []error
}

func (e *LoadError) Error() string { return errors.Join(e.Problems...).Error() }

// Unwrap returns the problems, for errors.Is and errors.As.
func (e *LoadError) Unwrap() []error { return e.Problems }

// Load builds the configuration: defaults, then the YAML file at path (if path is
// not empty), then environment overrides from lookupEnv, then secret files. A file
// that cannot be read or is not YAML is an error of its own, with no
// configuration; problems with single values (an unknown key or a value of the
// wrong kind in the file, a variable that does not parse, a secret file that
// cannot be read) are all reported in one *LoadError, each naming its setting,
// returned with the configuration read so far.
func Load(path string, lookupEnv func(string) (string, bool)) (Config, error) {
	cfg := Default()
	var problems []error
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config file: %w", err)
		}
		fileProblems, err := decodeYAML(raw, &cfg)
		if err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
		for _, p := range fileProblems {
			problems = append(problems, fmt.Errorf("config file %s: %w", path, p))
		}
	}
	problems = append(problems, applyEnv(&cfg, lookupEnv)...)
	problems = append(problems, loadSecretFiles(&cfg)...)
	if len(problems) > 0 {
		return cfg, &LoadError{Problems: problems}
	}
	return cfg, nil
}

// decodeYAML decodes the one YAML document of raw into cfg setting by setting,
// so that each problem names its key (server.read_timeout) and line and says
// what is wrong, and all of them are reported at once. Unknown keys are
// problems, so a typo cannot silently leave a default in place. The error is a
// file that is not YAML at all.
func decodeYAML(raw []byte, cfg *Config) ([]error, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("holds more than one YAML document")
	}
	if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, nil
	}
	var problems []error
	decodeSection(doc.Content[0], reflect.ValueOf(cfg).Elem(), "", &problems)
	return problems, nil
}

// decodeSection decodes the mapping n into the struct v, the section at prefix.
func decodeSection(n *yaml.Node, v reflect.Value, prefix string, problems *[]error) {
	add := func(key string, at *yaml.Node, format string, args ...any) {
		*problems = append(*problems, fmt.Errorf("%s (line %d): %s", key, at.Line, fmt.Sprintf(format, args...)))
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			name = "the file"
		}
		add(name, n, "want a mapping of settings (key: value), got %s", kindName(n))
		return
	}
	// Keys merged in (<<: *defaults) come first, so the section's own win
	// wherever they stand.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, value := n.Content[i], n.Content[i+1]; k.Tag == "!!merge" {
			merged := []*yaml.Node{value}
			if value.Kind == yaml.SequenceNode {
				merged = value.Content
			}
			for _, m := range merged {
				decodeSection(m, v, prefix, problems)
			}
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, value := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			continue
		}
		key := prefix + k.Value
		if line, ok := seen[k.Value]; ok {
			add(key, k, "set twice (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		f, secret := settingField(v, k.Value)
		switch {
		case secret:
			add(key, k, "%s", secretHint(key))
			continue
		case !f.IsValid():
			add(key, k, "unknown setting")
			continue
		case f.Kind() == reflect.Struct:
			decodeSection(value, f, key+".", problems)
			continue
		}
		if err := value.Decode(f.Addr().Interface()); err != nil {
			add(key, value, "%s", wantedValue(f.Type(), value))
		}
	}
}

// settingField is the field of the struct v whose YAML key is key; secret says
// key names a secret, which has no YAML key.
func settingField(v reflect.Value, key string) (f reflect.Value, secret bool) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		switch yamlKey, _, _ := strings.Cut(sf.Tag.Get("yaml"), ","); {
		case yamlKey == key:
			return v.Field(i), false
		case yamlKey == "-" && strings.Split(sf.Tag.Get("json"), ",")[0] == key:
			return reflect.Value{}, true
		}
	}
	return reflect.Value{}, false
}

// secretHint says where the secret a config file named at key is set instead.
func secretHint(key string) string {
	env := EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
	for _, s := range envSettings {
		if s.name == env {
			return fmt.Sprintf("a secret is never read from the config file: set %s, or name a file holding it with %s_file", env, key)
		}
	}
	return "a secret is never read from the config file: set it in the environment, or name a file holding it with a *_file setting"
}

// wantedValue says what a setting of type t takes, and what it was given.
func wantedValue(t reflect.Type, got *yaml.Node) string {
	given := kindName(got)
	if got.Kind == yaml.ScalarNode {
		given = fmt.Sprintf("%q", got.Value)
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "not a duration such as 30s or 2m: " + given
	case t.Kind() == reflect.Int64:
		return "not an integer: " + given
	case t.Kind() == reflect.Bool:
		return "not true or false: " + given
	case t.Kind() == reflect.Slice:
		return "not a list such as [a, b]: " + given
	}
	return "not a single value: " + given
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

// loadSecretFiles reads secrets named by *_file settings. A secret set directly in
// the environment wins over a file, which is reported rather than guessed at.
func loadSecretFiles(cfg *Config) []error {
	var problems []error
	read := func(name, path string, dst *secret.Secret) {
		if path == "" {
			return
		}
		if dst.IsSet() {
			problems = append(problems, fmt.Errorf("%s is set both directly and as a file (%s); set one", name, path))
			return
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			problems = append(problems, fmt.Errorf("read %s file: %w", name, err))
			return
		}
		// Files written by editors and secret managers often end in a newline that is
		// not part of the value; a PEM key keeps its inner newlines.
		*dst = secret.New(strings.TrimRight(string(raw), "\r\n"))
	}
	read("database url", cfg.Database.URLFile, &cfg.Database.SecretURL)
	read("github private key", cfg.GitHub.PrivateKeyFile, &cfg.GitHub.PrivateKey)
	read("github webhook secret", cfg.GitHub.WebhookSecretFile, &cfg.GitHub.WebhookSecret)
	read("github client secret", cfg.GitHub.ClientSecretFile, &cfg.GitHub.ClientSecret)
	read("encryption key", cfg.Encryption.KeyFile, &cfg.Encryption.Key)
	return problems
}
