package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	setupapi "github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/secret"
	kukie "github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var (
	appGVR    = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// service is the whole service as `serve` wires it (service.New), against envtest
// and the fake GitHub.
type service struct {
	t    *testing.T
	gh   *githubtest.Server
	kube *kubetest.Env
	db   *store.DB
	http *httptest.Server
	// cfg is the service's configuration, for a restart on the same database.
	cfg    config.Config
	logger zerolog.Logger
	// handler routes s.http to the running process's handler; a restart swaps it.
	handler atomic.Pointer[http.Handler]
	// stop kills the running process: its background work stops and is waited for.
	stop func()
	logs *servicetest.SyncBuffer
	// answers records every API answer body, for the secret scan.
	answers *servicetest.SyncBuffer

	team       store.Team
	token      secret.Secret
	cluster    string
	appNS      string // Argo CD's namespace
	shopNS     string // the app's destination namespace
	repo       string // owner/name
	repoURL    string // canonical URL
	kubeconfig []byte
}

func newService(t *testing.T, db *store.DB) *service {
	t.Helper()
	return newServiceWithHooks(t, db, plan.Hooks{})
}

func newServiceWithHooks(t *testing.T, db *store.DB, hooks plan.Hooks) *service {
	t.Helper()
	ctx := context.Background()
	s := &service{t: t, gh: githubtest.New(t), kube: kubetest.Start(t), db: db, logs: &servicetest.SyncBuffer{}, answers: &servicetest.SyncBuffer{},
		cluster: "prod", repo: "acme/deploy"}
	s.logger = zerolog.New(s.logs).Level(zerolog.DebugLevel)

	s.gh.CreateRepo(t, "acme", "deploy", repoFiles(t), "main")
	// The person who comments commands may push; everyone else only reads.
	s.gh.SetPermission(t, s.repo, githubtest.DefaultAuthor.Login, githubtest.RoleWrite)

	// The configuration serve would load, pointing at the fake GitHub, with a
	// pipeline that claims, polls and times out at test speed.
	s.cfg = config.Default()
	s.cfg.Server.PublicURL = "https://kukie.example"
	s.cfg.GitHub.AppID, s.cfg.GitHub.PrivateKey = s.gh.AppID(), s.gh.PrivateKeyPEM()
	s.cfg.GitHub.APIURL, s.cfg.GitHub.WebURL = s.gh.APIURL(), s.gh.URL()
	s.cfg.GitHub.ClientID, s.cfg.GitHub.ClientSecret = s.gh.ClientID(), s.gh.ClientSecret()
	s.cfg.GitHub.WebhookSecret = s.gh.WebhookSecret()
	s.cfg.Encryption.Key = secret.New(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, config.EncryptionKeyBytes)))
	s.cfg.Pipeline.ClaimTTL, s.cfg.Pipeline.DeployPollInterval, s.cfg.Pipeline.DeployTimeout = 2*time.Second, 50*time.Millisecond, 2*time.Minute
	s.cfg.Pipeline.CacheDir, s.cfg.Pipeline.ArchiveCacheBytes = t.TempDir(), 256<<20

	s.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(s.http.Close)
	s.gh.SetWebhookURL(s.http.URL + webhook.Path)
	s.start(kukie.WithPipelineHooks(hooks))

	// A team binds the installation through the setup flow, registers the cluster by
	// kubeconfig and connects the repository: the real endpoints, no shortcuts.
	var err error
	s.team, err = db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, s.token, err = db.CreateAPIToken(ctx, s.team.ID, "chat"); err != nil {
		t.Fatal(err)
	}
	// A person installs the App; GitHub's installation webhook names them, and the
	// setup redirect carries their authorization code, which proves who came back.
	installation := s.gh.CreateInstallationBy(t, "installer", "acme", "deploy")
	var state struct{ State string }
	s.mustJSON("POST", "/api/v1/installations/state", nil, http.StatusCreated, &state)
	setup := url.Values{"installation_id": {strconv.FormatInt(installation, 10)}, "setup_action": {"install"},
		"state": {state.State}, "code": {s.gh.AuthorizationCode(t, "installer")}}
	if status, body := s.do("GET", setupapi.CallbackPath+"?"+setup.Encode(), nil); status != http.StatusOK {
		t.Fatalf("setup callback: %d %s", status, body)
	}
	s.kubeconfig = s.kube.Kubeconfig
	s.mustJSON("POST", "/api/v1/clusters", map[string]any{"name": s.cluster, "kubeconfig": string(s.kubeconfig)}, http.StatusCreated, nil)
	rp, err := github.ParseRepoURL(s.gh.URL() + "/" + s.repo)
	if err != nil {
		t.Fatal(err)
	}
	s.repoURL = rp.URL()
	s.mustJSON("POST", "/api/v1/clusters/"+s.cluster+"/repos", map[string]any{"repo": s.repoURL}, http.StatusCreated, nil)

	s.appNS = s.kube.Namespace(t, "argocd")
	s.shopNS = s.kube.Namespace(t, "shop")
	return s
}

// start runs a service process on the database: service.New, its background work,
// and its handler behind s.http.
func (s *service) start(opts ...kukie.Option) {
	s.t.Helper()
	ctx, stop := context.WithCancel(s.logger.WithContext(context.Background()))
	svc, err := kukie.New(ctx, s.cfg, s.db, s.logger, opts...)
	if err != nil {
		stop()
		s.t.Fatal(err)
	}
	h := svc.Handler()
	s.handler.Store(&h)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				s.t.Errorf("service stopped with an error: %v", err)
			}
		})
	}
	s.t.Cleanup(s.stop)
}

// renderCacheHits is how often the running process found a before-render in its
// render cache, as it reports on /metrics.
func (s *service) renderCacheHits() float64 {
	s.t.Helper()
	status, body := servicetest.Do(s.t, s.http, "GET", "/metrics", "", nil)
	if status != http.StatusOK {
		s.t.Fatalf("GET /metrics = %d %s", status, body)
	}
	const series = `kukie_cache_lookups_total{cache="render",result="hit"} `
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				s.t.Fatalf("%s%s: %v", series, v, err)
			}
			return n
		}
	}
	s.t.Fatalf("/metrics has no %s:\n%s", series, body)
	return 0
}

func repoFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join("testdata", "repo")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func (s *service) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	status, out := servicetest.Do(s.t, s.http, method, path, s.token, body)
	_, _ = s.answers.Write(append(out, '\n'))
	return status, out
}

func (s *service) mustJSON(method, path string, body any, want int, out any) {
	s.t.Helper()
	status, b := s.do(method, path, body)
	if status != want {
		s.t.Fatalf("%s %s = %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// change is the API's view of a plan, as far as the tests read it.
type change struct {
	Code        string `json:"code"`
	Status      string `json:"status"`
	Path        string `json:"path"`
	Branch      string `json:"branch"`
	HeadSHA     string `json:"head_sha"`
	BaseSHA     string `json:"base_sha"`
	GitDiff     string `json:"git_diff"`
	Warnings    []string
	PullRequest *struct {
		Number int64  `json:"number"`
		URL    string `json:"url"`
	} `json:"pull_request"`
	CheckRun *struct {
		ID         int64  `json:"id"`
		Conclusion string `json:"conclusion"`
	} `json:"check_run"`
	Problem *struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	} `json:"problem"`
	Deployment *struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"deployment"`
	ClusterCheck string `json:"cluster_check"`
	MergeSHA     string `json:"merge_sha"`
}

func (s *service) get(code string) change {
	s.t.Helper()
	var c change
	s.mustJSON("GET", "/api/v1/changes/"+code, nil, http.StatusOK, &c)
	return c
}

// eventually bounds a wait for something the service gets to by itself (a
// webhook handled, a check run completed): far more than it takes on an idle
// machine, so that a loaded one (CI, the race detector) makes a test slower, not
// failed. A wait that reaches it is a hang.
const eventually = 2 * time.Minute

// waitFor polls the API until cond holds.
func (s *service) waitFor(code, what string, cond func(change) bool) change {
	s.t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		c := s.get(code)
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			logs := s.logs.String()
			s.t.Fatalf("change %s never became %s: %+v (problem %+v)\nlast log lines:\n%s", code, what, c, c.Problem, logs[max(0, len(logs)-4000):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *service) waitStatus(code, status string) change {
	s.t.Helper()
	return s.waitFor(code, status, func(c change) bool {
		return c.Status == status && (status != "pr_open" || c.CheckRun != nil)
	})
}

// deployWeb creates the web Deployment tracked by the Application web, as Argo CD
// would have after its first sync, and the Application itself.
func (s *service) deployWeb(targetRevision string) {
	s.t.Helper()
	var dep unstructured.Unstructured
	if err := yamlDecode(repoFiles(s.t)["apps/web/deployment.yaml"], &dep.Object); err != nil {
		s.t.Fatal(err)
	}
	dep.SetNamespace(s.shopNS)
	dep.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "web:apps/Deployment:" + s.shopNS + "/web"})
	app := kubetest.Application(kubetest.App{Namespace: s.appNS, Name: "web", DestinationNamespace: s.shopNS,
		RepoURL: s.repoURL, Path: "apps/web", TargetRevision: targetRevision, Automated: true, SelfHeal: true,
		Resources: []kubetest.AppResource{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: s.shopNS, Name: "web"}}})
	if err := unstructured.SetNestedField(app.Object, "Directory", "status", "sourceType"); err != nil {
		s.t.Fatal(err)
	}
	s.kube.Create(s.t, &dep, app)
}

// syncLikeArgo plays Argo CD's sync of an Application at revision: the app's render
// at that commit (kustomize build, or the folder's documents) is applied with
// server-side apply and Argo CD's tracking annotation, Deployments report the new
// generation rolled out, and the Application records the sync.
func (s *service) syncLikeArgo(app, appPath, sourceType, revision string) {
	s.t.Helper()
	for _, d := range s.applyLikeArgo(app, appPath, sourceType, revision) {
		s.playKubelet(d, func(replicas int64) map[string]any { return rolloutStatus(replicas, replicas, replicas) })
	}
	s.recordSync(app, revision)
}

// applyLikeArgo applies the app's render at revision as Argo CD's sync does and
// returns the Deployments among the objects, whose status nobody has written yet.
func (s *service) applyLikeArgo(app, appPath, sourceType, revision string) (deployments []types.NamespacedName) {
	s.t.Helper()
	ctx := context.Background()
	for _, obj := range s.renderAt(appPath, sourceType, revision) {
		namespaced, err := s.kube.Client.IsObjectNamespaced(obj)
		if err != nil {
			s.t.Fatal(err)
		}
		if namespaced && obj.GetNamespace() == "" {
			obj.SetNamespace(s.shopNS)
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		gvk := obj.GroupVersionKind()
		ann["argocd.argoproj.io/tracking-id"] = app + ":" + gvk.Group + "/" + gvk.Kind + ":" + obj.GetNamespace() + "/" + obj.GetName()
		obj.SetAnnotations(ann)
		if err := s.kube.Client.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner("argocd-controller")); err != nil {
			s.t.Fatalf("apply %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		if gvk.Kind == "Deployment" {
			deployments = append(deployments, types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	return deployments
}

// playKubelet writes, through the status subresource, the status the Deployment
// controller and the kubelets would give the Deployment at its current generation;
// status gets the desired replica count.
func (s *service) playKubelet(d types.NamespacedName, status func(replicas int64) map[string]any) {
	s.t.Helper()
	ctx := context.Background()
	deps := s.kube.Dynamic.Resource(deployGVR).Namespace(d.Namespace)
	live, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	replicas, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	st := status(replicas)
	st["observedGeneration"] = live.GetGeneration()
	live.Object["status"] = st
	if _, err := deps.UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// rolloutStatus is a Deployment status with the total, updated and available replica
// counts and the conditions the Deployment controller sets for them: Progressing with
// NewReplicaSetAvailable once every replica is updated and available and no old one
// is left.
func rolloutStatus(replicas, updated, available int64) map[string]any {
	progressing := map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ReplicaSet is progressing."}
	if updated == replicas && available == replicas {
		progressing["reason"], progressing["message"] = "NewReplicaSetAvailable", "ReplicaSet has successfully progressed."
	}
	return map[string]any{
		"replicas": replicas, "updatedReplicas": updated, "readyReplicas": available, "availableReplicas": available,
		"unavailableReplicas": max(0, replicas-available),
		"conditions": []any{progressing,
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}},
	}
}

// recordSync writes what Argo CD records after a successful sync at revision, with
// the comparison it runs right after one (reconciledAt), which assesses health anew.
func (s *service) recordSync(app, revision string) {
	s.t.Helper()
	ctx := context.Background()
	apps := s.kube.Dynamic.Resource(appGVR).Namespace(s.appNS)
	a, err := apps.Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	_ = unstructured.SetNestedField(a.Object, now, "status", "reconciledAt")
	_ = unstructured.SetNestedField(a.Object, revision, "status", "sync", "revision")
	_ = unstructured.SetNestedField(a.Object, "Synced", "status", "sync", "status")
	_ = unstructured.SetNestedField(a.Object, map[string]any{
		"phase": "Succeeded", "message": "successfully synced (all tasks run)",
		"startedAt": now, "finishedAt": now,
		"operation":  map[string]any{"sync": map[string]any{"revision": revision}},
		"syncResult": map[string]any{"revision": revision},
	}, "status", "operationState")
	if _, err := apps.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// renderAt renders an app of the fake repository at revision, as Argo CD would.
func (s *service) renderAt(appPath, sourceType, revision string) []*unstructured.Unstructured {
	s.t.Helper()
	dir := s.t.TempDir()
	tarball, err := exec.Command("git", "--git-dir", s.gh.GitDir(s.t, s.repo), "archive", "--format=tar", revision).Output()
	if err != nil {
		s.t.Fatalf("git archive %s: %v", revision, err)
	}
	extract := exec.Command("tar", "-x", "-C", dir)
	extract.Stdin = bytes.NewReader(tarball)
	if out, err := extract.CombinedOutput(); err != nil {
		s.t.Fatalf("extract %s: %v %s", revision, err, out)
	}
	var docs []byte
	switch sourceType {
	case "Kustomize":
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, appPath))
		if err != nil {
			s.t.Fatalf("kustomize build %s: %v", appPath, err)
		}
		if docs, err = res.AsYaml(); err != nil {
			s.t.Fatal(err)
		}
	default:
		entries, err := os.ReadDir(filepath.Join(dir, appPath))
		if err != nil {
			s.t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".yaml") {
				b, err := os.ReadFile(filepath.Join(dir, appPath, e.Name()))
				if err != nil {
					s.t.Fatal(err)
				}
				docs = append(append(docs, b...), []byte("\n---\n")...)
			}
		}
	}
	objs, err := kubetest.DecodeObjects(docs)
	if err != nil {
		s.t.Fatal(err)
	}
	return objs
}

func (s *service) liveReplicas() int64 {
	s.t.Helper()
	live, err := s.kube.Dynamic.Resource(deployGVR).Namespace(s.shopNS).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	return n
}

func (s *service) scale(n int64, key string) map[string]any {
	return map[string]any{
		"cluster": s.cluster,
		"target":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.shopNS, "name": "web"},
		"change":  map[string]any{"replicas": map[string]any{"count": n}},
		"reason":  "traffic doubled after the launch", "requested_by": "alice@example.com", "idempotency_key": key,
	}
}

// secretsSeen lists which of the service's secrets appear in text.
func (s *service) secretsSeen(text string) []string {
	var seen []string
	check := func(name, value string) {
		if value != "" && strings.Contains(text, value) {
			seen = append(seen, name)
		}
	}
	check("api token", s.token.Reveal())
	check("webhook secret", s.gh.WebhookSecret().Reveal())
	// The archive download links' own tokens (codeload's ?token=).
	for _, tok := range s.gh.ArchiveTokens() {
		check("archive link token", tok)
	}
	key := s.gh.PrivateKeyPEM().Reveal()
	for _, line := range strings.Split(key, "\n") {
		if len(line) > 40 && !strings.HasPrefix(line, "-----") {
			check("private key", line)
			break
		}
	}
	for _, line := range strings.Split(string(s.kubeconfig), "\n") {
		for _, field := range []string{"client-key-data:", "token:", "client-certificate-data:"} {
			if v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), field)); strings.HasPrefix(strings.TrimSpace(line), field) && len(v) > 20 {
				check("kubeconfig "+field, v)
			}
		}
	}
	return seen
}

// deployAPI creates the Kustomize Application api (overlay apps/api/overlays/prod)
// and syncs it once at the head of main, as Argo CD would have.
func (s *service) deployAPI() {
	s.t.Helper()
	app := kubetest.Application(kubetest.App{Namespace: s.appNS, Name: "api", DestinationNamespace: s.shopNS,
		RepoURL: s.repoURL, Path: "apps/api/overlays/prod", TargetRevision: "main", Automated: true})
	s.kube.Create(s.t, app)
	s.syncLikeArgo("api", "apps/api/overlays/prod", "Kustomize", s.gh.Head(s.t, s.repo, "main"))
}

func (s *service) liveImage(name string) string {
	s.t.Helper()
	live, err := s.kube.Dynamic.Resource(deployGVR).Namespace(s.shopNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	img, _ := containers[0].(map[string]any)["image"].(string)
	return img
}
