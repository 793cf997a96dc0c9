package plan

import (
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/render"
)

// ClusterCapabilities gives the Helm apps converted from a (render.FromArgoCD)
// the capabilities of a's destination cluster, as Argo CD passes them to helm
// template. read returns those of the destination: the cluster a is read from
// when a deploys in-cluster, or the team's cluster registered at a's destination
// address (DestinationRead); nil when the service reaches no such cluster. It is
// called only when one of the apps leaves its Kubernetes version or API versions
// to the cluster, so callers hand in a read that asks the cluster once
// (sync.OnceValues) from its discovery cache, never once per render.
//
// When such an app must render with Helm's defaults instead, note says why, for
// the check or view to show beside its render: a destination that is another
// cluster the team has not registered (read is nil), or a read that failed, whose
// error is returned too. The note names no address: it may reach a pull request.
func ClusterCapabilities(a argocd.Application, apps []render.Application, read func() (kube.Capabilities, error)) (note string, err error) {
	needs := false
	for _, ra := range apps {
		if ra.SourceType == render.SourceHelm && ra.Unsupported == "" && (ra.Helm.KubeVersion == "" || len(ra.Helm.APIVersions) == 0) {
			needs = true
		}
	}
	if !needs {
		return "", nil
	}
	if read == nil {
		return "rendered with Helm's default Kubernetes version and API versions (.Capabilities): it deploys to another cluster than the one its Application is read from, which the team has not registered with the service at that address", nil
	}
	caps, err := read()
	if err != nil {
		return "rendered with Helm's default Kubernetes version and API versions (.Capabilities): the cluster could not be asked for them (" + capabilitiesFailure(err) + ")", err
	}
	for i := range apps {
		apps[i].SetCluster(caps.KubeVersion, caps.APIVersions)
	}
	return "", nil
}

// capabilitiesFailure says, without the error's text, why a cluster's
// capabilities could not be read.
func capabilitiesFailure(err error) string {
	switch kube.ClassOf(err) {
	case argocd.FailureUnreachable:
		return "unreachable"
	case argocd.FailureForbidden:
		return "the service may not read its discovery"
	}
	return "its discovery could not be read"
}

// DestinationRead is the capabilities read of a's destination for
// ClusterCapabilities: own, that of the cluster a is read from, when a deploys
// in-cluster; else registered(server) for a's spec.destination.server, which
// returns nil when the team registered no cluster there (registered may be nil).
// A destination given by name alone is not looked up: Argo CD's cluster names are
// its own, and a team names its registered clusters independently of them.
func DestinationRead(a argocd.Application, own func() (kube.Capabilities, error), registered func(server string) func() (kube.Capabilities, error)) func() (kube.Capabilities, error) {
	switch d := a.Spec.Destination; {
	case d.InCluster():
		return own
	case d.Server != "" && registered != nil:
		return registered(d.Server)
	}
	return nil
}
