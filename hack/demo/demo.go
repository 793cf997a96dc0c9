package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// The names the demo uses: the simulated GitHub's organization and repository, the
// team, the cluster as registered in the service, and where the sample app runs.
const (
	owner       = "demo"
	repoName    = "shop"
	fullRepo    = owner + "/" + repoName
	teamName    = "demo"
	clusterName = "demo"
	namespace   = "kukie-demo"
	appName     = "web"
	installer   = "demo-admin"
)

type options struct {
	addr       string
	kubeconfig string
	installCRD bool
	dir        string
}

// demo is a running demo: the simulated GitHub, the service and what was set up.
type demo struct {
	gh      *githubtest.Server
	db      *store.DB
	url     string // the service's base URL
	token   secret.Secret
	dir     string
	keepDir bool // the directory was given: it stays
	logFile string
	// offline says why no cluster is used ("" when one is).
	offline string
	// created lists what was made in the user's cluster.
	created []string

	// done is closed when the service has stopped serving, with serveErr.
	done      chan struct{}
	serveErr  error
	cancel    context.CancelFunc
	cleanups  []func()
	closeOnce sync.Once
	closeErr  error
}

// setupTB is the simulated GitHub's TB during setup: a failed helper aborts the setup
// with its message (start recovers it) instead of failing a test.
type setupTB struct{ d *demo }

type setupFailure struct{ err error }

func (setupTB) Helper() {}
func (setupTB) Fatalf(format string, args ...any) {
	panic(setupFailure{fmt.Errorf(format, args...)})
}
func (tb setupTB) Cleanup(f func()) { tb.d.cleanups = append(tb.d.cleanups, f) }

// recoverFailure, deferred, turns the failure of a simulated GitHub helper
// (setupTB.Fatalf) into *err.
func recoverFailure(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(setupFailure)
		if !ok {
			panic(r)
		}
		*err = f.err
	}
}

// start builds and starts everything; on error nothing is left running.
func start(ctx context.Context, opts options) (d *demo, err error) {
	d = &demo{done: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = d.close()
			d = nil
		}
	}()
	defer recoverFailure(&err)
	tb := setupTB{d}

	if d.dir = opts.dir; d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "kukie-demo-"); err != nil {
			return nil, fmt.Errorf("work directory: %w", err)
		}
		dir := d.dir
		d.cleanups = append(d.cleanups, func() { _ = os.RemoveAll(dir) })
	} else if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	} else {
		d.keepDir = true
	}
	sampleDir := filepath.Join(d.dir, "sample-repo")
	if err := writeFiles(sampleDir, sampleRepo); err != nil {
		return nil, err
	}

	// The simulated GitHub: the App and the organization's repository; the App is
	// installed on it once the service receives webhooks.
	if d.gh, err = githubtest.NewServer(); err != nil {
		return nil, fmt.Errorf("start the simulated GitHub: %w", err)
	}
	d.cleanups = append(d.cleanups, d.gh.Close)
	d.gh.CreateRepo(tb, owner, repoName, sampleRepo, "main")

	addr, err := resolveAddr(opts.addr)
	if err != nil {
		return nil, err
	}
	d.url = "http://" + addr
	cfg, err := demoConfig(d, addr)
	if err != nil {
		return nil, err
	}
	d.logFile = filepath.Join(d.dir, "kukie.log")
	logs, err := os.OpenFile(d.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	d.cleanups = append(d.cleanups, func() { _ = logs.Close() })
	logger := zerolog.New(logs).With().Timestamp().Logger()

	if d.db, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	db := d.db
	d.cleanups = append(d.cleanups, func() { _ = db.Close() })
	svc, err := service.New(ctx, cfg, d.db, logger)
	if err != nil {
		return nil, fmt.Errorf("build the service: %w", err)
	}
	d.mountMerge(svc)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	go func() { d.serveErr = svc.Serve(runCtx); close(d.done) }()
	if err := d.waitHealthy(); err != nil {
		return nil, err
	}
	d.gh.SetWebhookURL(d.url + webhook.Path)

	// A team with an API token binds the installation through the setup callback, as
	// GitHub's redirect after an installation does.
	team, err := d.db.CreateTeam(ctx, teamName)
	if err != nil {
		return nil, err
	}
	if _, d.token, err = d.db.CreateAPIToken(ctx, team.ID, "demo"); err != nil {
		return nil, err
	}
	// The installer installs the App; GitHub's installation webhook names them.
	installation := d.gh.CreateInstallationBy(tb, installer, owner, repoName)
	var state struct {
		State string `json:"state"`
	}
	if err := d.call(http.MethodPost, "/api/v1/installations/state", nil, http.StatusCreated, &state); err != nil {
		return nil, err
	}
	q := url.Values{"installation_id": {strconv.FormatInt(installation, 10)}, "setup_action": {"install"},
		"state": {state.State}, "code": {d.gh.AuthorizationCode(tb, installer)}}
	if err := d.call(http.MethodGet, setup.CallbackPath+"?"+q.Encode(), nil, http.StatusOK, nil); err != nil {
		return nil, fmt.Errorf("bind the installation: %w", err)
	}

	if opts.kubeconfig == "" {
		d.offline = "no -kubeconfig was given"
		return d, nil
	}
	repo, err := github.ParseRepoURL(d.gh.URL() + "/" + fullRepo)
	if err != nil {
		return nil, err
	}
	kc, err := prepareCluster(ctx, opts, repo.URL(), d.gh.Head(tb, fullRepo, "main"))
	if err != nil {
		return nil, err
	}
	d.created = kc.created
	if kc.offline != "" {
		d.offline = kc.offline
		return d, nil
	}
	if err := d.call(http.MethodPost, "/api/v1/clusters", map[string]any{"name": clusterName, "kubeconfig": string(kc.kubeconfig)}, http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("register the cluster: %w", err)
	}
	if err := d.call(http.MethodPost, "/api/v1/clusters/"+clusterName+"/repos", map[string]any{"repo": repo.URL()}, http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("connect the repository: %w", err)
	}
	return d, nil
}

// demoConfig is the service's configuration: the dev profile on SQLite, the
// simulated GitHub as a GitHub Enterprise host, a fresh encryption key.
func demoConfig(d *demo, addr string) (config.Config, error) {
	key := make([]byte, config.EncryptionKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return config.Config{}, err
	}
	cfg := config.Default()
	cfg.Server.Address = addr
	cfg.Server.PublicURL = d.url
	cfg.Database.URL = "sqlite:" + filepath.Join(d.dir, "kukie.db")
	cfg.GitHub.AppID = d.gh.AppID()
	cfg.GitHub.AppSlug = d.gh.AppSlug()
	cfg.GitHub.WebURL = d.gh.URL()
	cfg.GitHub.APIURL = d.gh.APIURL()
	cfg.GitHub.GraphQLURL = d.gh.URL() + "/api/graphql"
	cfg.GitHub.PrivateKey = d.gh.PrivateKeyPEM()
	cfg.GitHub.WebhookSecret = d.gh.WebhookSecret()
	cfg.GitHub.ClientID = d.gh.ClientID()
	cfg.GitHub.ClientSecret = d.gh.ClientSecret()
	cfg.Encryption.Key = secret.New(base64.StdEncoding.EncodeToString(key))
	cfg.Pipeline.CacheDir = filepath.Join(d.dir, "cache")
	// Nothing syncs the simulated repository, so a merged change waits for a deploy
	// that never comes; a short timeout ends that wait within the demo.
	cfg.Pipeline.DeployTimeout = 2 * time.Minute
	if err := config.Check(cfg, config.Dev, nil); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// openStore opens and migrates the database, sealing edited file contents as serve
// does.
func openStore(ctx context.Context, cfg config.Config) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.DatabaseURL().Reveal())
	if err != nil {
		return nil, err
	}
	key, err := cfg.EncryptionKey()
	if err == nil {
		var box *sealed.Box
		if box, err = sealed.New(key); err == nil {
			db.SealPlanPayloads(plan.EditSealer{Box: box})
			_, err = db.Migrate(ctx)
		}
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// resolveAddr picks a free port for port 0, since the public URL is needed before
// the service listens.
func resolveAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-addr %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitHealthy waits until the service answers /healthz, or stopped.
func (d *demo) waitHealthy() error {
	for range 200 {
		select {
		case <-d.done:
			return fmt.Errorf("the service did not start: %w", d.serveErr)
		default:
		}
		if resp, err := http.Get(d.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("the service does not answer on %s", d.url)
}

// call makes one API request as the demo team and decodes the answer into out.
func (d *demo) call(method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.url+path, rd)
	if err != nil {
		return err
	}
	if d.token.IsSet() {
		req.Header.Set("Authorization", "Bearer "+d.token.Reveal())
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// close stops the service and removes what the demo made outside the cluster.
func (d *demo) close() error {
	d.closeOnce.Do(func() {
		if d.cancel != nil {
			d.cancel()
			<-d.done
			if d.serveErr != nil && !errors.Is(d.serveErr, context.Canceled) {
				d.closeErr = d.serveErr
			}
		}
		for i := len(d.cleanups) - 1; i >= 0; i-- {
			d.cleanups[i]()
		}
	})
	return d.closeErr
}

// writeFiles writes files under dir.
func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
