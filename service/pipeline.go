package service

import (
	"context"
	"errors"

	changesapi "github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// Pipeline is what the change API and the webhook handlers drive: the running
// *plan.Pipeline, or unavailablePipeline when there is none.
type Pipeline interface {
	changesapi.Pipeline
	mcp.Trees
	handler.Pipeline
	handler.RevocationListener
}

var (
	_ Pipeline = (*plan.Pipeline)(nil)
	_ Pipeline = (*unavailablePipeline)(nil)
)

// errNoGitHubApp is why the change pipeline does not run without a GitHub App; it
// says what to configure, for the log line and for API answers.
var errNoGitHubApp = errors.New("no GitHub App is configured, and the change pipeline writes through one: " +
	"set github.app_id and github.private_key_file (or KUKIE_GITHUB_APP_ID and KUKIE_GITHUB_PRIVATE_KEY) and restart")

// errPipelineNotBuilt is why the change pipeline does not run when building it failed
// (its caches could not be made, say); the error is in the log.
var errPipelineNotBuilt = errors.New("the change pipeline could not be built at startup; the service's log has the error, " +
	"and the service needs a restart once it is fixed")

// unavailablePipeline stands in for a pipeline that cannot run: every request
// that needs it is refused as pipeline_unavailable (503) with the reason. The path
// decision needs only the cluster, so it is still answered.
type unavailablePipeline struct {
	clusters clusteraccess.Clusters
	reason   error
}

func (u *unavailablePipeline) refusal() error {
	return &plan.Error{Code: plan.CodePipelineUnavailable, Reason: u.reason.Error()}
}

func (u *unavailablePipeline) Submit(context.Context, string, string, plan.Request) (store.Plan, bool, error) {
	return store.Plan{}, false, u.refusal()
}

func (u *unavailablePipeline) Cancel(context.Context, string, string, string) (store.Plan, error) {
	return store.Plan{}, u.refusal()
}

func (u *unavailablePipeline) Retry(context.Context, string, string) (store.Plan, error) {
	return store.Plan{}, u.refusal()
}

func (u *unavailablePipeline) Rollback(context.Context, string, string, string, string) (store.Plan, error) {
	return store.Plan{}, u.refusal()
}

func (u *unavailablePipeline) Decide(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) argocd.Decision {
	return u.clusters.Decide(ctx, cluster, target)
}

func (u *unavailablePipeline) RepoView(context.Context, clusteraccess.Ref, string, string) (plan.RepoView, error) {
	return plan.RepoView{}, u.refusal()
}

func (u *unavailablePipeline) AppTree(context.Context, clusteraccess.Ref, string, string) (*plan.AppTree, error) {
	return nil, u.refusal()
}

func (u *unavailablePipeline) PlanForPull(context.Context, string, string) (store.Plan, bool, error) {
	return store.Plan{}, false, u.refusal()
}

func (u *unavailablePipeline) PullClosed(context.Context, string, string, string, int64, bool, string, string) error {
	return u.refusal()
}

func (u *unavailablePipeline) PullRetargeted(context.Context, string, string, string, string, int64) error {
	return u.refusal()
}

func (u *unavailablePipeline) HeadPushed(context.Context, string, string, string, string) error {
	return u.refusal()
}

func (u *unavailablePipeline) BasePushed(context.Context, string, string, string, []string) error {
	return u.refusal()
}

func (u *unavailablePipeline) Reverify(context.Context, string) error { return u.refusal() }

// ConnectionsRevoked has nothing to do: without a pipeline no plan runs that a
// revoked connection could stop.
func (u *unavailablePipeline) ConnectionsRevoked(context.Context, []store.RepoConnection, string) error {
	return nil
}
