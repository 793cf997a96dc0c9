//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
)

// change is the part of the change API's answer the scenarios read, decoded the way a
// client of the API would.
type change struct {
	Code    string `json:"code"`
	Status  string `json:"status"`
	Path    string `json:"path"`
	Problem *struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	} `json:"problem"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	CheckRun *struct {
		Conclusion string `json:"conclusion"`
	} `json:"check_run"`
	HeadSHA    string `json:"head_sha"`
	MergeSHA   string `json:"merge_sha"`
	RollbackOf string `json:"rollback_of"`
	Deployment *struct {
		State        string `json:"state"`
		Message      string `json:"message"`
		SyncRevision string `json:"sync_revision"`
		Phase        string `json:"phase"`
	} `json:"deployment"`
	History []struct {
		To      string    `json:"to"`
		Message string    `json:"message"`
		At      time.Time `json:"at"`
	} `json:"history"`
}

func (c change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s status %s path %s", c.Code, c.Status, c.Path)
	if c.Problem != nil {
		fmt.Fprintf(&b, ", problem %s: %s", c.Problem.Code, c.Problem.Reason)
	}
	if c.Deployment != nil {
		fmt.Fprintf(&b, ", deployment %s (%s)", c.Deployment.State, c.Deployment.Message)
	}
	for _, h := range c.History {
		fmt.Fprintf(&b, "\n  -> %s: %s", h.To, h.Message)
	}
	return b.String()
}

const (
	ordersNamespace, ordersApp       = "e2e-orders", "orders"
	paymentsNamespace, paymentsApp   = "e2e-payments", "payments"
	catalogNamespace, catalogApp     = "e2e-catalog", "catalog"
	inventoryNamespace, inventoryApp = "e2e-inventory", "inventory"
)

// testPipeline runs the scenarios of the change pipeline against one service: the
// full loop, its rollback, a deployment Argo CD cannot apply, and a rollout whose new
// pods never become available.
func (s *suite) testPipeline(t *testing.T) {
	svc := s.startService(t)
	// The Applications exist before the service first reads the cluster: it shares
	// Application reads for 10 s, and these scenarios are not about that cache.
	s.deployApp(t, argocdharness.Application{Name: ordersApp, Path: "apps/orders", DestinationNamespace: ordersNamespace, Automated: true, SelfHeal: true})
	// Running, as on a real cluster: the Deployment reports the generation it observed.
	s.argo.PlayKubelet(t, ordersNamespace, "orders", argocdharness.RolloutComplete)
	// Argo CD retries a failed automated sync five times over about five minutes
	// before calling it Failed; one quick retry keeps the failure scenario short.
	oneRetry := int64(1)
	s.deployApp(t, argocdharness.Application{Name: paymentsApp, Path: "apps/payments", DestinationNamespace: paymentsNamespace, Automated: true, SyncRetries: &oneRetry})
	// A Helm chart in the app's folder with an environment's values file, and a
	// multi-source app: a shared chart, its values through a ref, plain manifests.
	s.deployApp(t, argocdharness.Application{Name: catalogApp, Path: "apps/catalog", DestinationNamespace: catalogNamespace, Automated: true,
		Helm: map[string]any{"valueFiles": []any{"values-e2e.yaml"}}})
	s.argo.PlayKubelet(t, catalogNamespace, "catalog", argocdharness.RolloutComplete)
	s.deployApp(t, argocdharness.Application{Name: inventoryApp, DestinationNamespace: inventoryNamespace, Automated: true,
		Sources: []map[string]any{
			{"path": "charts/inventory", "helm": map[string]any{"valueFiles": []any{"$values/apps/inventory/values.yaml"}}},
			{"ref": "values"},
			{"path": "apps/inventory-config"},
		}})
	s.argo.PlayKubelet(t, inventoryNamespace, "inventory", argocdharness.RolloutComplete)

	var deployed string
	t.Run("FullLoop", func(t *testing.T) { deployed = s.testFullLoop(t, svc) })
	t.Run("Rollback", func(t *testing.T) { s.testRollback(t, svc, deployed) })
	t.Run("DeployLatency", func(t *testing.T) { s.testDeployLatency(t, svc) })
	t.Run("FailedDeployment", func(t *testing.T) { s.testFailedDeployment(t, svc) })
	t.Run("CrashingRollout", func(t *testing.T) { s.testCrashingRollout(t, svc) })
	t.Run("HelmScale", func(t *testing.T) { s.testHelmScale(t, svc) })
	t.Run("HelmImage", func(t *testing.T) { s.testHelmImage(t, svc) })
	t.Run("MultiSourceScale", func(t *testing.T) { s.testMultiSourceScale(t, svc) })
}

// testHelmScale: the full loop on a Helm app. The replicas come from the app's
// values file, so the pull request changes that key there; Argo CD renders the
// merged chart and the cluster runs the requested replicas.
func (s *suite) testHelmScale(t *testing.T, svc *service) {
	requested := time.Now()
	submitted := s.submitChange(t, svc, catalogNamespace, "catalog", map[string]any{"replicas": map[string]any{"count": 4}}, "scale catalog to 4 for the launch", "catalog-scale-4")
	deployed, _ := s.shipChange(t, svc, submitted, requested, catalogNamespace, catalogApp, "catalog", true)
	s.requireValue(t, deployed.MergeSHA, "apps/catalog/values-e2e.yaml", float64(4), "replicaCount")
	if n, err := s.replicas(context.Background(), catalogNamespace, "catalog"); err != nil || n != 4 {
		t.Fatalf("cluster runs %d replicas (%v), want 4", n, err)
	}
}

// testHelmImage: an image change on a Helm app whose tag comes from the chart's
// defaults. The key is added to the app's own values file (the chart's defaults,
// which other apps may share, stay), and the cluster runs the new image.
func (s *suite) testHelmImage(t *testing.T, svc *service) {
	requested := time.Now()
	submitted := s.submitChange(t, svc, catalogNamespace, "catalog", map[string]any{"image": map[string]any{"container": "catalog", "tag": "3.1.0"}}, "catalog 3.1.0 fixes the search timeout", "catalog-image-3.1.0")
	deployed, _ := s.shipChange(t, svc, submitted, requested, catalogNamespace, catalogApp, "catalog", true)
	s.requireValue(t, deployed.MergeSHA, "apps/catalog/values-e2e.yaml", "3.1.0", "image", "tag")
	s.requireValue(t, deployed.MergeSHA, "apps/catalog/values.yaml", "3.0.0", "image", "tag")
	live := s.liveObject(t, deploymentRef(catalogNamespace, "catalog"))
	containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("deployment catalog has %d containers, want 1", len(containers))
	}
	if image, _ := containers[0].(map[string]any)["image"].(string); image != "ghcr.io/acme/catalog:3.1.0" {
		t.Fatalf("cluster runs image %q, want ghcr.io/acme/catalog:3.1.0", image)
	}
}

// testMultiSourceScale: the full loop on a multi-source app. The chart is shared,
// the replicas come from the values file its "values" ref points at, so the pull
// request changes that file; the app's other sources deploy on as before.
func (s *suite) testMultiSourceScale(t *testing.T, svc *service) {
	requested := time.Now()
	submitted := s.submitChange(t, svc, inventoryNamespace, "inventory", map[string]any{"replicas": map[string]any{"count": 3}}, "scale inventory to 3 for the stock count", "inventory-scale-3")
	deployed, _ := s.shipChange(t, svc, submitted, requested, inventoryNamespace, inventoryApp, "inventory", true)
	s.requireValue(t, deployed.MergeSHA, "apps/inventory/values.yaml", float64(3), "replicas")
	s.requireValue(t, deployed.MergeSHA, "charts/inventory/values.yaml", float64(1), "replicas")
	if n, err := s.replicas(context.Background(), inventoryNamespace, "inventory"); err != nil || n != 3 {
		t.Fatalf("cluster runs %d replicas (%v), want 3", n, err)
	}
	s.liveObject(t, argocd.ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: inventoryNamespace, Name: "inventory-settings"})
}

// requireValue fails the test unless the YAML file path at ref in the gitops
// repository holds want at the keys (numbers decode as float64, as from JSON).
func (s *suite) requireValue(t *testing.T, ref, path string, want any, keys ...string) {
	t.Helper()
	content, ok := s.github.FileAt(t, gitopsRepo, ref, path)
	if !ok {
		t.Fatalf("%s does not exist at %s", path, ref)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(content), &values); err != nil {
		t.Fatalf("%s at %s: %v", path, ref, err)
	}
	got, found, err := unstructured.NestedFieldNoCopy(values, keys...)
	if err != nil || !found || got != want {
		t.Fatalf("%s at %s holds %v (%T) at %s, want %v (%T):\n%s", path, ref, got, got, strings.Join(keys, "."), want, want, content)
	}
}

// testFullLoop: chat request → PR with a verified check run → merge in the fake GitHub
// → Argo CD syncs the merge commit → the plan stays deploying through the rollout and
// is deployed once it ends, judged from the real Application status and the
// Deployment's rollout, and the cluster runs the
// requested replicas. It returns the deployed plan's code.
func (s *suite) testFullLoop(t *testing.T, svc *service) string {
	requested := time.Now()
	submitted := s.submitReplicas(t, svc, ordersNamespace, "orders", 4, "orders-scale-4")
	deployed, _ := s.shipChange(t, svc, submitted, requested, ordersNamespace, ordersApp, "orders", true)
	if deployed.Deployment == nil || deployed.Deployment.SyncRevision != deployed.MergeSHA {
		t.Errorf("deployment record %+v does not name the merge commit %s", deployed.Deployment, deployed.MergeSHA)
	}
	if n, err := s.replicas(context.Background(), ordersNamespace, "orders"); err != nil || n != 4 {
		t.Fatalf("cluster runs %d replicas (%v), want 4", n, err)
	}
	return deployed.Code
}

// testRollback: the deployed change is reverted through the same pipeline: a revert
// PR, merged, synced; the original plan is rolled_back and the value restored.
func (s *suite) testRollback(t *testing.T, svc *service, deployed string) {
	if deployed == "" {
		t.Fatal("no deployed plan to roll back: FullLoop did not deploy one")
	}
	var rollback change
	requested := time.Now()
	svc.must(t, http.MethodPost, "/api/v1/changes/"+deployed+"/rollback",
		map[string]any{"reason": "orders errors after scaling", "requested_by": "oncall@acme.example"}, http.StatusAccepted, &rollback)
	if rollback.RollbackOf != deployed {
		rollback = s.findRollback(t, svc, deployed)
	}
	// The revert changes replicas back; Argo CD applies it and the kubelet's part is
	// played again so the Deployment reports the new generation. A rollback is done
	// once Argo CD synced it, so the plan need not wait for the rollout.
	_, _ = s.shipChange(t, svc, rollback, requested, ordersNamespace, ordersApp, "orders", false)

	// The original plan is marked right after its rollback deployed; until then it
	// is still deployed, which the generic wait would take for an end.
	var original change
	argocdharness.Wait(t, time.Minute, "plan "+deployed+" rolled_back", func(ctx context.Context) (bool, error) {
		if err := svc.call(ctx, http.MethodGet, "/api/v1/changes/"+deployed, nil, http.StatusOK, &original); err != nil {
			return false, err
		}
		return original.Status == "rolled_back", fmt.Errorf("%s", original)
	})
	if original.Deployment == nil || original.Deployment.State != "rolled_back" {
		t.Errorf("original plan's deployment record %+v, want state rolled_back", original.Deployment)
	}
	if n, err := s.replicas(context.Background(), ordersNamespace, "orders"); err != nil || n != 2 {
		t.Fatalf("cluster runs %d replicas (%v) after the rollback, want 2 again", n, err)
	}
}

// deployLatencyRuns is how many changes DeployLatency ships, one after the other.
const deployLatencyRuns = 7

// testDeployLatency ships replicas changes to orders one after the other and prints
// the deploy latency of each and their median and maximum: the time from the moment
// everything the deployment verdict needs is true on the cluster (the Application
// reports the merge commit synced, its sync succeeded and its health, assessed after
// the sync, Healthy; the Deployment's rollout complete by kstatus) to the plan being
// deployed. It asserts no duration: the numbers are a measurement.
func (s *suite) testDeployLatency(t *testing.T, svc *service) {
	var latencies []time.Duration
	for i := range deployLatencyRuns {
		// Alternating, so every change changes something; never 3, which
		// CrashingRollout asks for next.
		replicas := 5 + i%2
		requested := time.Now()
		submitted := s.submitReplicas(t, svc, ordersNamespace, "orders", replicas, fmt.Sprintf("orders-latency-%d", i))
		_, latency := s.shipChange(t, svc, submitted, requested, ordersNamespace, ordersApp, "orders", false)
		latencies = append(latencies, latency)
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	t.Logf("e2e: deploy latency p50 %s max %s over %d runs (%v): from the Application synced at the merge commit and healthy after the sync and the rollout complete, as the test's own watches saw it, to the plan recorded deployed",
		sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), len(latencies), roundAll(latencies))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// testFailedDeployment: a change the cluster accepted in the pre-PR dry-run is
// refused when Argo CD applies it after merge, because an admission policy arrived in
// between (the way a platform team's policy change lands between review and merge).
// The plan ends deploy_failed with Argo CD's message.
func (s *suite) testFailedDeployment(t *testing.T, svc *service) {
	const ns, app, policyMessage = paymentsNamespace, paymentsApp, "payments may run at most 5 replicas"

	submitted := s.submitReplicas(t, svc, ns, "payments", 7, "payments-scale-7")
	opened := s.waitChecked(t, svc, submitted.Code)
	if opened.CheckRun.Conclusion != "success" {
		t.Fatalf("check run concluded %q before the policy existed, want success: %s", opened.CheckRun.Conclusion, opened)
	}
	s.denyReplicasAbove(t, ns, 5, policyMessage)

	merged := time.Now()
	mergeSHA := s.github.Merge(t, gitopsRepo, opened.PullRequest.Number, githubtest.MergeCommit)
	s.argo.HardRefresh(t, argocdharness.Namespace, app)
	s.argo.WaitApplication(t, argocdharness.Namespace, app, 2*time.Minute, "failed sync of the merge commit", func(u *unstructured.Unstructured) bool {
		op := argocdharness.AppStatus(u).OperationState
		return op != nil && op.SyncResult != nil && op.SyncResult.Revision == mergeSHA && op.Phase == argocd.PhaseFailed
	})
	failed := s.waitPlan(t, svc, submitted.Code, 2*time.Minute, "deploy_failed")
	if failed.Deployment == nil || !strings.Contains(failed.Deployment.Message, policyMessage) {
		t.Fatalf("deploy_failed without Argo CD's message (%q): %s", policyMessage, failed)
	}
	t.Logf("e2e: plan %s deploy_failed %s after the merge: %s", failed.Code, time.Since(merged).Round(time.Millisecond), failed.Deployment.Message)
	if n, err := s.replicas(context.Background(), ns, "payments"); err != nil || n != 2 {
		t.Errorf("cluster runs %d replicas (%v), want the refused change not applied (2)", n, err)
	}
}

// testCrashingRollout: a change whose new pods crash. Argo CD syncs it and the
// Deployment's rollout starts, but its new pod never becomes available; the plan
// stays deploying through that and ends deploy_failed, with the Deployment's message,
// once the Deployment reports its progress deadline exceeded. It is never deployed.
func (s *suite) testCrashingRollout(t *testing.T, svc *service) {
	submitted := s.submitReplicas(t, svc, ordersNamespace, "orders", 3, "orders-scale-3-crashing")
	opened := s.waitChecked(t, svc, submitted.Code)
	if opened.CheckRun.Conclusion != "success" {
		t.Fatalf("check run concluded %q, want success: %s", opened.CheckRun.Conclusion, opened)
	}
	mergeSHA := s.github.Merge(t, gitopsRepo, opened.PullRequest.Number, githubtest.MergeCommit)
	s.argo.HardRefresh(t, argocdharness.Namespace, ordersApp)
	s.waitSynced(t, argocdharness.Namespace, ordersApp, mergeSHA, 2*time.Minute)
	s.playRollout(t, svc, submitted.Code, mergeSHA, ordersNamespace, "orders", argocdharness.RolloutStarted)

	s.argo.PlayKubelet(t, ordersNamespace, "orders", argocdharness.RolloutDeadlineExceeded)
	failed := s.waitPlan(t, svc, submitted.Code, time.Minute, "deploy_failed")
	if failed.Deployment == nil || failed.Deployment.State != "failed" ||
		!strings.HasPrefix(failed.Deployment.Message, "Deployment/orders failed: Progress deadline exceeded: ") ||
		!strings.Contains(failed.Deployment.Message, "has timed out progressing") {
		t.Fatalf("deploy_failed without the Deployment's progress deadline: %s", failed)
	}
	for _, h := range failed.History {
		if h.To == "deployed" {
			t.Fatalf("the plan of a rollout that never finished was deployed on the way: %s", failed)
		}
	}
}

// playRollout follows a synced merge commit through the rollout of deployment: the
// plan must first be seen deploying while the controller has not observed the new
// generation, then, for each moment the kubelet's part is played at, deploying with
// that moment in its deployment message. A plan that ends (deployed) on the way fails
// the test at once.
func (s *suite) playRollout(t *testing.T, svc *service, code, mergeSHA, namespace, deployment string, moments ...argocdharness.Rollout) {
	t.Helper()
	s.waitPlanUntil(t, svc, code, time.Minute, "deploying until the controller observes the synced generation", func(c change) bool {
		return c.Status == "deploying" && c.Deployment != nil && c.Deployment.SyncRevision == mergeSHA && c.Deployment.Phase == "Succeeded" &&
			strings.Contains(c.Deployment.Message, "latest observed generation")
	})
	n, err := s.replicas(context.Background(), namespace, deployment)
	if err != nil {
		t.Fatal(err)
	}
	want := map[argocdharness.Rollout]string{
		argocdharness.RolloutStarted: fmt.Sprintf("Updated: 1/%d", n),
		argocdharness.RolloutUpdated: fmt.Sprintf("Available: %d/%d", n-1, n),
	}
	for _, m := range moments {
		progress, ok := want[m]
		if !ok {
			t.Fatalf("playRollout plays only the moments before a rollout ends, not %d", m)
		}
		s.argo.PlayKubelet(t, namespace, deployment, m)
		msg := "Deployment/" + deployment + " is rolling out: " + progress
		s.waitPlanUntil(t, svc, code, time.Minute, "deploying with "+msg, func(c change) bool {
			return c.Status == "deploying" && c.Deployment != nil && c.Deployment.Message == msg
		})
	}
}

// submitReplicas asks for a replicas change as the chat integration does.
func (s *suite) submitReplicas(t *testing.T, svc *service, namespace, name string, replicas int, key string) change {
	t.Helper()
	return s.submitChange(t, svc, namespace, name, map[string]any{"replicas": map[string]any{"count": replicas}},
		fmt.Sprintf("scale %s to %d for the launch", name, replicas), key)
}

// submitChange asks for a change of a Deployment as the chat integration does.
func (s *suite) submitChange(t *testing.T, svc *service, namespace, name string, chg map[string]any, reason, key string) change {
	t.Helper()
	var c change
	svc.must(t, http.MethodPost, "/api/v1/changes", map[string]any{
		"cluster": serviceCluster,
		"target":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": name},
		"change":  chg,
		"reason":  reason, "requested_by": "dev@acme.example",
		"idempotency_key": key,
	}, http.StatusAccepted, &c)
	if c.Path != "git" {
		t.Fatalf("submitted change takes path %q, want git: %s", c.Path, c)
	}
	return c
}

// shipChange follows a plan from its pull request to deployed: it checks the PR and
// its check run on the fake GitHub, merges, lets Argo CD sync the merge commit
// (refreshed at once, as Argo CD's own GitHub webhook would), plays the kubelet for
// the changed Deployment, and waits for the plan to be deployed. With awaitRollout the
// kubelet's part is played step by step (playRollout) and the plan must be seen
// deploying at each step: a sync alone, or a rollout under way, does not make a
// change deployed. It returns the deployed plan and its deploy latency (see
// deployLatency).
func (s *suite) shipChange(t *testing.T, svc *service, submitted change, requested time.Time, namespace, app, deployment string, awaitRollout bool) (change, time.Duration) {
	t.Helper()
	opened := s.waitChecked(t, svc, submitted.Code)
	if opened.CheckRun == nil || opened.CheckRun.Conclusion != "success" || opened.PullRequest == nil {
		t.Fatalf("pull request opened without a successful check run: %s", opened)
	}
	var checked bool
	for _, run := range s.github.CheckRuns(t, gitopsRepo, opened.HeadSHA) {
		if run.GetName() == "kukie/render" && run.GetConclusion() == "success" {
			checked = true
		}
	}
	if !checked {
		t.Fatalf("fake github has no successful kukie/render check run on %s", opened.HeadSHA)
	}
	t.Logf("e2e: plan %s request to verified PR #%d in %s", opened.Code, opened.PullRequest.Number, time.Since(requested).Round(time.Millisecond))

	merged := time.Now()
	mergeSHA := s.github.Merge(t, gitopsRepo, opened.PullRequest.Number, githubtest.MergeCommit)
	s.argo.HardRefresh(t, argocdharness.Namespace, app)
	_, synced := s.waitSynced(t, argocdharness.Namespace, app, mergeSHA, 2*time.Minute)
	t.Logf("e2e: argo cd synced merge commit %s %s after the merge", mergeSHA[:8], synced.Round(time.Millisecond))
	if awaitRollout {
		s.playRollout(t, svc, submitted.Code, mergeSHA, namespace, deployment, argocdharness.RolloutStarted, argocdharness.RolloutUpdated)
	}
	deployed, latency := s.deployLatency(t, svc, submitted.Code, app, mergeSHA, namespace, deployment, func() {
		s.argo.PlayKubelet(t, namespace, deployment, argocdharness.RolloutComplete)
	})
	if deployed.MergeSHA != mergeSHA {
		t.Errorf("plan records merge commit %s, the fake github merged %s", deployed.MergeSHA, mergeSHA)
	}
	t.Logf("e2e: plan %s deployed %s after the merge", deployed.Code, time.Since(merged).Round(time.Millisecond))
	t.Logf("e2e: deploy latency %s: plan %s deployed after the Application reported the merge synced and healthy and the rollout complete",
		latency.Round(time.Millisecond), deployed.Code)
	return deployed, latency
}

// deployLatency plays the rollout's end with play and measures how long after
// everything the deployment verdict needs was true the service recorded the plan
// deployed. The test follows the Application and the Deployment with watches of its
// own, started before play, and takes the moment it receives the event after which
// the Application reports mergeSHA synced, its sync succeeded and its health Healthy
// assessed after the sync (reconciledAt not before the sync's end) and the
// Deployment's rollout is Current (kstatus); the plan's deployed moment is its
// history's, recorded by the service on the same machine's clock (milliseconds). The
// service's watches and the test's are not ordered against each other: a latency
// within a few milliseconds of zero, either side, is the service noticing as fast as
// the test did.
func (s *suite) deployLatency(t *testing.T, svc *service, code, app, mergeSHA, namespace, deployment string, play func()) (change, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watch := func(gvr schema.GroupVersionResource, ns, name string) <-chan watchEvent {
		w, err := s.kube.Dynamic.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatalf("watch %s %s/%s: %v", gvr.Resource, ns, name, err)
		}
		t.Cleanup(w.Stop)
		out := make(chan watchEvent)
		go func() {
			defer close(out)
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					select {
					case out <- watchEvent{obj: u, at: time.Now()}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		return out
	}
	ref := deploymentRef(namespace, deployment)
	gvr, err := s.resourceOf(ref)
	if err != nil {
		t.Fatal(err)
	}
	apps, deps := watch(argocdharness.ApplicationResource, argocdharness.Namespace, app), watch(gvr, namespace, deployment)
	play()
	var lastApp, lastDep *unstructured.Unstructured
	var ready time.Time
	for ready.IsZero() {
		var ev watchEvent
		var ok bool
		select {
		case ev, ok = <-apps:
			lastApp = ev.obj
		case ev, ok = <-deps:
			lastDep = ev.obj
		}
		if !ok {
			summary := "no Application seen"
			if lastApp != nil {
				summary = argocdharness.StatusSummary(lastApp)
			}
			t.Fatalf("watch ended before the cluster was ready for plan %s: %s", code, summary)
		}
		if readyForVerdict(lastApp, lastDep, mergeSHA) {
			ready = ev.at
		}
	}
	deployed := s.waitPlan(t, svc, code, 2*time.Minute, "deployed")
	var at time.Time
	for _, h := range deployed.History {
		if h.To == "deployed" {
			at = h.At
		}
	}
	if at.IsZero() {
		t.Fatalf("plan %s is deployed without the move in its history: %s", code, deployed)
	}
	return deployed, at.Sub(ready)
}

type watchEvent struct {
	obj *unstructured.Unstructured
	at  time.Time
}

// readyForVerdict reports whether app reports mergeSHA synced with its sync
// succeeded and health Healthy assessed after the sync, and dep's rollout is
// complete (kstatus Current).
func readyForVerdict(app, dep *unstructured.Unstructured, mergeSHA string) bool {
	if app == nil || dep == nil {
		return false
	}
	st := argocdharness.AppStatus(app)
	// A multi-source Application reports a revision per source instead of one.
	synced := st.Sync.Revision == mergeSHA || slices.Contains(st.Sync.Revisions, mergeSHA)
	if !synced || st.OperationState == nil || st.OperationState.Phase != argocd.PhaseSucceeded ||
		!st.HealthAssessedAfterSync() || st.Health.Status != argocd.HealthHealthy {
		return false
	}
	r, err := kube.ReadinessOf(dep)
	return err == nil && r.State == kube.ReadinessCurrent
}

// waitChecked waits until the plan's pull request is open and its check run has
// concluded.
func (s *suite) waitChecked(t *testing.T, svc *service, code string) change {
	t.Helper()
	return s.waitPlanUntil(t, svc, code, 2*time.Minute, "an open pull request with a concluded check run", func(c change) bool {
		return c.Status == "pr_open" && c.PullRequest != nil && c.CheckRun != nil && c.CheckRun.Conclusion != ""
	})
}

// waitPlan polls the change API until the plan reaches status.
func (s *suite) waitPlan(t *testing.T, svc *service, code string, timeout time.Duration, status string) change {
	t.Helper()
	return s.waitPlanUntil(t, svc, code, timeout, "status "+status, func(c change) bool { return c.Status == status })
}

// waitPlanUntil polls the change API until done accepts the plan; a plan that ends in
// a final state done does not accept fails the test at once.
func (s *suite) waitPlanUntil(t *testing.T, svc *service, code string, timeout time.Duration, what string, done func(change) bool) change {
	t.Helper()
	final := map[string]bool{"deployed": true, "deploy_failed": true, "rolled_back": true, "refused": true, "closed": true, "failed": true}
	var last change
	argocdharness.Wait(t, timeout, "plan "+code+": "+what, func(ctx context.Context) (bool, error) {
		if err := svc.call(ctx, http.MethodGet, "/api/v1/changes/"+code, nil, http.StatusOK, &last); err != nil {
			return false, err
		}
		if done(last) {
			return true, nil
		}
		if final[last.Status] {
			t.Fatalf("plan ended %s while waiting for %s: %s", last.Status, what, last)
		}
		return false, fmt.Errorf("%s", last)
	})
	return last
}

// findRollback returns the plan that reverts code.
func (s *suite) findRollback(t *testing.T, svc *service, code string) change {
	t.Helper()
	var found change
	argocdharness.Wait(t, 30*time.Second, "rollback plan of "+code, func(ctx context.Context) (bool, error) {
		var list struct {
			Changes []change `json:"changes"`
		}
		if err := svc.call(ctx, http.MethodGet, "/api/v1/changes?cluster="+serviceCluster, nil, http.StatusOK, &list); err != nil {
			return false, err
		}
		for _, c := range list.Changes {
			if c.RollbackOf == code {
				found = c
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

var (
	admissionPolicies = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	admissionBindings = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// denyReplicasAbove installs a ValidatingAdmissionPolicy (evaluated inside the API
// server, no webhook needed) that refuses Deployments in namespace with more than max
// replicas, and waits until the API server enforces it.
func (s *suite) denyReplicasAbove(t *testing.T, namespace string, max int, message string) {
	t.Helper()
	name := "replica-cap-" + namespace
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"},
				"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"deployments"},
			}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("object.spec.replicas <= %d", max),
				"message":    message,
			}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"policyName":        name,
			"validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace},
			}},
		},
	}}
	ctx := context.Background()
	for _, obj := range []struct {
		gvr schema.GroupVersionResource
		u   *unstructured.Unstructured
	}{{admissionPolicies, policy}, {admissionBindings, binding}} {
		if _, err := s.argo.Dynamic.Resource(obj.gvr).Create(ctx, obj.u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.u.GetKind(), name, err)
		}
		gvr := obj.gvr
		t.Cleanup(func() { _ = s.argo.Dynamic.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	// Policies take effect once the API server has compiled them; probe with a
	// server-side dry-run of the refused value.
	argocdharness.Wait(t, time.Minute, "admission policy "+name+" in force", func(ctx context.Context) (bool, error) {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, max+1))
		_, err := s.argo.Dynamic.Resource(deploymentsResource).Namespace(namespace).
			Patch(ctx, "payments", types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), message), err
	})
}
