// Package clusteraccess opens the team's registered clusters for the rest of the
// service: it reads a cluster's row from the store, opens its kubeconfig with the
// process's one credentials box (or, for the teams the operator allows, uses the
// service's own service account) and reaches the cluster through the kube registry,
// so the pipeline, the change API and the repository suggestions share one client
// set, rate limit and read cache per cluster. It also answers through which
// installation of the App a repository connected to a cluster is reached, and is
// told when a team replaces a cluster's credentials (CredentialsChanged), so the
// watches of the cluster go on with the new ones.
//
// It owns the access, not the decisions: what a read means (the path decision, the
// deployment verdict) is argocd's and kube's, what is done with it is plan's. It
// never writes to a cluster (a dry-run is all it sends) and never returns the
// credentials it opens.
package clusteraccess

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// Ref names a team's cluster (names are unique per team).
type Ref struct {
	TeamID string
	Name   string
}

// ErrObjectNotFound is returned for a missing object or Application.
var ErrObjectNotFound = errors.New("object not found")

// ErrClusterUnreachable is returned by DryRun when the API server could not be
// asked; the pipeline goes on, marked "not checked against the cluster".
var ErrClusterUnreachable = errors.New("cluster unreachable")

// DryRunRejection is the API server's refusal of a changed object.
type DryRunRejection struct {
	Object  string // kind namespace/name
	Message string // the API server's message, verbatim
	// Index is the object's position among those sent; Fields the field paths
	// the API server names as the cause (kube.DryRunError).
	Index  int
	Fields []string
}

func (e *DryRunRejection) Error() string {
	return "the cluster rejects " + e.Object + ": " + e.Message
}

// Clusters reaches the team's registered clusters (the pipeline's plan.Cluster, the
// change API's Application reader, the setup API's repository suggestions):
// credentials are opened from the store for each use and the client sets are
// shared through the kube registry.
type Clusters struct {
	DB       *store.DB
	Registry *kube.Clusters
	// Credentials is the process's one box: the setup API seals kubeconfigs with it
	// and Clusters opens them with it.
	Credentials *sealed.Box
	// InClusterTeams names the teams whose in-cluster clusters may be reached with
	// the service's own service account. It is checked at every use, so a row
	// registered before the operator narrowed the list is not used either.
	InClusterTeams []string
	// AllowInsecureTLS accepts kubeconfigs with insecure-skip-tls-verify
	// (clusters.allow_insecure_tls); they are refused otherwise, a kubeconfig
	// stored while the operator allowed them too.
	AllowInsecureTLS bool
}

// ErrInClusterNotAllowed is why a team's in-cluster cluster is not opened.
var ErrInClusterNotAllowed = errors.New("in-cluster access (the service's own service account) is not allowed for this team by the service's operator (clusters.in_cluster_teams)")

func (k Clusters) cluster(ctx context.Context, ref Ref) (*kube.Cluster, error) {
	cl, err := k.DB.ClusterByName(ctx, ref.TeamID, ref.Name)
	if err != nil {
		return nil, err // names the cluster already
	}
	access, err := k.access(ctx, cl)
	if err != nil {
		return nil, err
	}
	// Cluster names are unique per team only; the registry is keyed by cluster id,
	// which its errors leave out.
	c, err := k.Registry.Get(cl.ID, access)
	return k.opened(ctx, ref.Name, c, err)
}

// opened names the cluster in an error of the registry, and logs why the service's
// own service account cannot be used.
func (k Clusters) opened(ctx context.Context, name string, c *kube.Cluster, err error) (*kube.Cluster, error) {
	var inCluster *kube.InClusterError
	if errors.As(err, &inCluster) {
		zerolog.Ctx(ctx).Warn().Err(inCluster.Cause).Str("cluster", name).Msg("The service's own service account cannot be used")
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	return c, nil
}

// access is how the stored cluster cl is reached now: its kubeconfig opened, or the
// service's own account where the operator allows it for the team.
func (k Clusters) access(ctx context.Context, cl store.Cluster) (kube.Access, error) {
	access := kube.Access{InCluster: cl.Access == store.ClusterInCluster, AllowInsecureTLS: k.AllowInsecureTLS}
	if access.InCluster {
		t, err := k.DB.TeamByID(ctx, cl.TeamID)
		if err != nil {
			return access, fmt.Errorf("cluster %s: read team: %w", cl.Name, err)
		}
		if !slices.Contains(k.InClusterTeams, t.Name) {
			return access, fmt.Errorf("cluster %s: %w", cl.Name, ErrInClusterNotAllowed)
		}
	}
	if cl.Access == store.ClusterKubeconfig {
		if !k.Credentials.HasKey() {
			return access, fmt.Errorf("cluster %s: no key to open its stored credentials", cl.Name)
		}
		kc, err := k.Credentials.Open(cl.SealedCredentials, store.CredentialsAssociatedData(cl.TeamID, cl.Name))
		if err != nil {
			return access, fmt.Errorf("cluster %s: open credentials: %w", cl.Name, err)
		}
		access.Kubeconfig = kc
	}
	return access, nil
}

// AccessByID is how the cluster with the store id id is reached now, for the
// registry (kube.Clusters.SetAccessSource): when the cluster refuses the
// credentials an informer watches with, the registry asks here whether the team
// has given new ones meanwhile, through this replica of the service or another.
func (k Clusters) AccessByID(ctx context.Context, id string) (kube.Access, error) {
	cl, err := k.DB.ClusterByID(ctx, id)
	if err != nil {
		return kube.Access{}, err
	}
	return k.access(ctx, cl)
}

// CredentialsChanged is told that the team replaced the cluster's credentials in
// the store: the cluster is opened with the new ones, and the informers that follow
// its deployments and Applications start again with them before it returns (or
// when ctx ends), so what they follow is read with the credentials the team gave
// last and the old ones may be revoked. A cluster nothing has opened yet is opened
// at its next use.
func (k Clusters) CredentialsChanged(ctx context.Context, ref Ref) error {
	cl, err := k.DB.ClusterByName(ctx, ref.TeamID, ref.Name)
	if err != nil {
		return err
	}
	access, err := k.access(ctx, cl)
	if err != nil {
		return err
	}
	c, err := k.Registry.Update(ctx, cl.ID, access)
	_, err = k.opened(ctx, ref.Name, c, err)
	return err
}

// Decide runs the path decision for one target; it never fails, a failed read is
// a Decision with Known=false.
func (k Clusters) Decide(ctx context.Context, ref Ref, t objref.Target) argocd.Decision {
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
	holdApplications(ctx, c)
	return c.Decide(ctx, []argocd.ResourceRef{target})
}

// ApplicationsLinger is how long the cluster's informer on Applications outlives
// the last read of them through Clusters: plans, pull request checks and people
// reading one after the other share it, and none of them lists Applications.
const ApplicationsLinger = 2 * time.Minute

// holdApplications keeps c's informer on Applications running for this read and
// ApplicationsLinger after it; when Applications cannot be watched, reads list them.
func holdApplications(ctx context.Context, c *kube.Cluster) {
	release, err := c.HoldApplications(ctx, ApplicationsLinger)
	if err != nil {
		zerolog.Ctx(ctx).Debug().Err(err).Str("cluster", c.Name()).Msg("Applications cannot be watched; listing them")
		return
	}
	release()
}

// Applications lists the cluster's Argo CD Applications (from the cluster's
// informer on them, see holdApplications), each with the argocd-cm settings of the
// Argo CD that renders it (read from its controller's namespace). Settings that
// cannot be read (argocd-cm is not readable to the credentials) are left unknown
// and logged: the Applications still render, with Argo CD's defaults.
func (k Clusters) Applications(ctx context.Context, ref Ref) ([]argocd.Application, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return nil, err
	}
	holdApplications(ctx, c)
	apps, err := c.ListApplications(ctx, kube.Refresh)
	if err != nil {
		return nil, err
	}
	settings := map[string]*argocd.Settings{}
	for i := range apps {
		ns := apps[i].Status.ControllerNamespace
		s, read := settings[ns]
		if !read {
			got, err := c.ArgoCDSettings(ctx, ns, kube.Cached)
			if err != nil {
				zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", ref.Name).Msg("Could not read Argo CD's settings (argocd-cm); rendering with its defaults")
			} else {
				s = &got
			}
			settings[ns] = s
		}
		apps[i].Settings = s
	}
	return apps, nil
}

// Capabilities reads what Argo CD tells a Helm chart about the cluster (its
// Kubernetes version and API versions), from the cluster's discovery cache.
func (k Clusters) Capabilities(ctx context.Context, ref Ref) (kube.Capabilities, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return kube.Capabilities{}, err
	}
	return c.Capabilities(ctx, kube.Cached)
}

// Clusters names the team's registered clusters.
func (k Clusters) Clusters(ctx context.Context, teamID string) ([]string, error) {
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

// Application reads one Application; a missing one is ErrObjectNotFound.
func (k Clusters) Application(ctx context.Context, ref Ref, namespace, name string) (argocd.Application, error) {
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

// Followed is one object followed through a watch: Changes receives a value at
// each change of it (the first for the object as first listed) and of Err, and Stop
// ends the follow. Err says why the watch does not follow now: the cluster refuses
// the credentials it watches with (a revoked token, withdrawn rights); nil while it
// follows.
type Followed interface {
	Changes() <-chan struct{}
	Err() error
	Stop()
}

// FollowedApplication is a followed Application; Latest returns it as the watch last
// saw it, without a request (ok is false while it does not exist or cannot be read).
type FollowedApplication interface {
	Followed
	Latest() (app argocd.Application, ok bool)
}

type followed struct{ f *kube.Follow }

func (f followed) Changes() <-chan struct{} { return f.f.Changes }
func (f followed) Err() error               { return f.f.Err() }
func (f followed) Stop()                    { f.f.Stop() }

type followedApp struct{ followed }

func (f followedApp) Latest() (argocd.Application, bool) {
	u, ok := f.f.Latest()
	if !ok {
		return argocd.Application{}, false
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return argocd.Application{}, false
	}
	app, err := argocd.DecodeApplication(data)
	return app, err == nil
}

// FollowApplication follows one Application from the cluster's one shared watch on
// Applications (see kube.Cluster.FollowApplication); an error means it cannot be
// watched.
func (k Clusters) FollowApplication(ctx context.Context, ref Ref, namespace, name string) (FollowedApplication, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return nil, err
	}
	f, err := c.FollowApplication(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return followedApp{followed{f}}, nil
}

// FollowObject follows one live object through a watch of it alone (see
// kube.Cluster.FollowResource); an error means it cannot be watched.
func (k Clusters) FollowObject(ctx context.Context, ref Ref, t objref.Target) (Followed, error) {
	c, target, err := k.targetCluster(ctx, ref, t)
	if err != nil {
		return nil, err
	}
	f, err := c.FollowResource(ctx, target)
	if err != nil {
		return nil, err
	}
	return followed{f}, nil
}

// targetCluster opens the cluster of a target and names the target as kube does.
func (k Clusters) targetCluster(ctx context.Context, ref Ref, t objref.Target) (*kube.Cluster, argocd.ResourceRef, error) {
	target, err := argocd.RefOf(t)
	if err != nil {
		return nil, target, err
	}
	c, err := k.cluster(ctx, ref)
	return c, target, err
}

// Object reads one live object (unstructured) from the API server, never from a
// cache; a missing one is ErrObjectNotFound.
func (k Clusters) Object(ctx context.Context, ref Ref, t objref.Target) (map[string]any, error) {
	c, target, err := k.targetCluster(ctx, ref, t)
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

// DryRun sends objects as a server-side dry-run apply. A rejection by the API
// server is a *DryRunRejection; an unreachable cluster is ErrClusterUnreachable.
func (k Clusters) DryRun(ctx context.Context, ref Ref, objects []map[string]any) error {
	rejected, err := k.DryRunEach(ctx, ref, objects)
	if err != nil {
		return err
	}
	if len(rejected) > 0 {
		return &rejected[0]
	}
	return nil
}

// DryRunEach is DryRun answering for every object: each refusal, in order, with
// the fields at fault. An unreachable cluster, or one that forbids an object's
// dry-run, is ErrClusterUnreachable, unless objects before it were refused: those
// are returned, as DryRun returns the first.
func (k Clusters) DryRunEach(ctx context.Context, ref Ref, objects []map[string]any) ([]DryRunRejection, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrClusterUnreachable, err)
	}
	objs := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		objs[i] = (&unstructured.Unstructured{Object: o}).DeepCopy()
	}
	err = c.DryRun(ctx, objs)
	if err == nil {
		return nil, nil
	}
	var out []DryRunRejection
	for _, d := range kube.DryRunErrors(err) {
		switch d.Class {
		case argocd.FailureUnreachable, argocd.FailureForbidden:
			if len(out) > 0 {
				return out, nil
			}
			return nil, fmt.Errorf("%w: %s", ErrClusterUnreachable, d.Message)
		}
		out = append(out, DryRunRejection{Object: d.Ref.String(), Message: d.Message, Index: d.Index, Fields: d.Fields})
	}
	if len(out) > 0 {
		return out, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || kube.ClassOf(err) == argocd.FailureUnreachable {
		return nil, fmt.Errorf("%w: %v", ErrClusterUnreachable, err)
	}
	return nil, err
}

// AppList lists the cluster's Applications for people: what Argo CD wrote of
// each, which their problems quote, scrubbed of the secret values of its sources
// (render.MaskedAppList), as an Application's detail is.
func (k Clusters) AppList(ctx context.Context, ref Ref) (argocd.AppList, error) {
	c, err := k.cluster(ctx, ref)
	if err != nil {
		return argocd.AppList{}, err
	}
	apps, err := c.ListApplications(ctx, kube.Cached)
	if err != nil {
		return argocd.AppList{}, err
	}
	return render.MaskedAppList(apps)
}

// AppDetail describes one Application for people; a missing one is ErrObjectNotFound.
func (k Clusters) AppDetail(ctx context.Context, ref Ref, namespace, name string) (argocd.AppDetail, error) {
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

// ClusterByServer names the team's cluster registered with a kubeconfig whose
// server is server (an Application's spec.destination.server), compared by scheme,
// host and port, a trailing slash aside; ok is false when none is. Clusters
// registered in-cluster are not matched: their address is the service's own
// cluster's, which Argo CD names by its in-cluster address, not by server. A
// cluster whose credentials cannot be opened is passed over (logged), as it could
// not be asked anyway.
func (k Clusters) ClusterByServer(ctx context.Context, teamID, server string) (name string, ok bool, err error) {
	want, valid := normalServer(server)
	if !valid {
		return "", false, nil
	}
	cls, err := k.DB.ListClusters(ctx, teamID)
	if err != nil {
		return "", false, fmt.Errorf("list clusters: %w", err)
	}
	for _, cl := range cls {
		if cl.Access != store.ClusterKubeconfig {
			continue
		}
		access, err := k.access(ctx, cl)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", cl.Name).Msg("Could not open a cluster's credentials to compare its server with an Application's destination")
			continue
		}
		cfg, err := kube.RESTConfig(access)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", cl.Name).Msg("Could not read a cluster's server to compare it with an Application's destination")
			continue
		}
		if got, valid := normalServer(cfg.Host); valid && got == want {
			return cl.Name, true, nil
		}
	}
	return "", false, nil
}

// normalServer is an API server's address as scheme://host:port, lower case, the
// port the scheme's default when left out (client-go takes an address without a
// scheme as https); valid is false for an address that is not one.
func normalServer(server string) (string, bool) {
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + path, true
}
