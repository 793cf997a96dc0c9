package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// KubeClusters implements Cluster (and the change API's app reader) with the team's
// registered clusters: credentials are opened from the store for each use and the
// client sets are shared through the kube registry.
type KubeClusters struct {
	DB          *store.DB
	Registry    *kube.Clusters
	Credentials *sealed.Box
	// InClusterTeams names the teams whose in-cluster clusters may be reached with
	// the service's own service account. It is checked at every use, so a row
	// registered before the operator narrowed the list is not used either.
	InClusterTeams []string
}

// ErrInClusterNotAllowed is why a team's in-cluster cluster is not opened.
var ErrInClusterNotAllowed = errors.New("in-cluster access (the service's own service account) is not allowed for this team by the service's operator (clusters.in_cluster_teams)")

func (k KubeClusters) cluster(ctx context.Context, ref ClusterRef) (*kube.Cluster, error) {
	cl, err := k.DB.ClusterByName(ctx, ref.TeamID, ref.Name)
	if err != nil {
		return nil, err // names the cluster already
	}
	access := kube.Access{InCluster: cl.Access == store.ClusterInCluster}
	if access.InCluster {
		t, err := k.DB.TeamByID(ctx, cl.TeamID)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: read team: %w", ref.Name, err)
		}
		if !slices.Contains(k.InClusterTeams, t.Name) {
			return nil, fmt.Errorf("cluster %s: %w", ref.Name, ErrInClusterNotAllowed)
		}
	}
	if cl.Access == store.ClusterKubeconfig {
		if !k.Credentials.HasKey() {
			return nil, fmt.Errorf("cluster %s: no key to open its stored credentials", ref.Name)
		}
		kc, err := k.Credentials.Open(cl.SealedCredentials, store.CredentialsAssociatedData(cl.TeamID, cl.Name))
		if err != nil {
			return nil, fmt.Errorf("cluster %s: open credentials: %w", ref.Name, err)
		}
		access.Kubeconfig = kc
	}
	// Cluster names are unique per team only; the registry is keyed by cluster id,
	// which its errors leave out.
	c, err := k.Registry.Get(cl.ID, access)
	var inCluster *kube.InClusterError
	if errors.As(err, &inCluster) {
		zerolog.Ctx(ctx).Warn().Err(inCluster.Cause).Str("cluster", ref.Name).Msg("The service's own service account cannot be used")
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", ref.Name, err)
	}
	return c, nil
}

// Decide implements Cluster.
func (k KubeClusters) Decide(ctx context.Context, ref ClusterRef, t objref.Target) argocd.Decision {
	target, err := argocd.RefOf(t)
	if err != nil {
		return argocd.Decision{Path: argocd.PathDirect, Known: false, Level: argocd.LevelUnknown, Failure: argocd.FailureOther,
			Reason: "The target is not a valid Kubernetes object reference: " + err.Error()}
	}
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return argocd.Decision{Path: argocd.PathDirect, Known: false, Level: argocd.LevelUnknown, Failure: argocd.FailureOther,
			Reason: "The cluster could not be opened: " + err.Error()}
	}
	return c.Decide(ctx, []argocd.ResourceRef{target})
}

// Applications implements Cluster.
func (k KubeClusters) Applications(ctx context.Context, ref ClusterRef) ([]argocd.Application, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return nil, err
	}
	return c.ListApplications(ctx, kube.Refresh)
}

// Clusters implements Cluster.
func (k KubeClusters) Clusters(ctx context.Context, teamID string) ([]string, error) {
	cls, err := k.DB.ListClusters(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	names := make([]string, len(cls))
	for i, c := range cls {
		names[i] = c.Name
	}
	return names, nil
}

// Application implements Cluster.
func (k KubeClusters) Application(ctx context.Context, ref ClusterRef, namespace, name string) (argocd.Application, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return argocd.Application{}, err
	}
	a, err := c.GetApplication(ctx, namespace, name, kube.Refresh)
	if kube.ClassOf(err) == argocd.FailureNotFound {
		return a, fmt.Errorf("application %s/%s: %w", namespace, name, ErrObjectNotFound)
	}
	return a, err
}

// Object implements Cluster.
func (k KubeClusters) Object(ctx context.Context, ref ClusterRef, t objref.Target) (map[string]any, error) {
	target, err := argocd.RefOf(t)
	if err != nil {
		return nil, err
	}
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return nil, err
	}
	obj, err := c.GetResource(ctx, target, kube.Fresh)
	if kube.ClassOf(err) == argocd.FailureNotFound {
		return nil, fmt.Errorf("%s: %w", target, ErrObjectNotFound)
	}
	if err != nil {
		return nil, err
	}
	return obj.Object, nil
}

// DryRun implements Cluster.
func (k KubeClusters) DryRun(ctx context.Context, ref ClusterRef, objects []map[string]any) error {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrClusterUnreachable, err)
	}
	objs := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		objs[i] = (&unstructured.Unstructured{Object: o}).DeepCopy()
	}
	err = c.DryRun(ctx, objs)
	if err == nil {
		return nil
	}
	for _, d := range kube.DryRunErrors(err) {
		switch d.Class {
		case argocd.FailureUnreachable, argocd.FailureForbidden:
			return fmt.Errorf("%w: %s", ErrClusterUnreachable, d.Message)
		}
		return &DryRunRejection{Object: d.Ref.String(), Message: d.Message}
	}
	if errors.Is(err, context.DeadlineExceeded) || kube.ClassOf(err) == argocd.FailureUnreachable {
		return fmt.Errorf("%w: %v", ErrClusterUnreachable, err)
	}
	return err
}

// AppList lists the cluster's Applications for people.
func (k KubeClusters) AppList(ctx context.Context, ref ClusterRef) (argocd.AppList, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return argocd.AppList{}, err
	}
	return c.AppList(ctx, kube.Cached)
}

// AppDetail describes one Application for people; a missing one is ErrObjectNotFound.
func (k KubeClusters) AppDetail(ctx context.Context, ref ClusterRef, namespace, name string) (argocd.AppDetail, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return argocd.AppDetail{}, err
	}
	d, err := c.AppDetail(ctx, namespace, name, kube.Cached)
	if kube.ClassOf(err) == argocd.FailureNotFound {
		return d, fmt.Errorf("application %s/%s: %w", namespace, name, ErrObjectNotFound)
	}
	return d, err
}
