// Package objref names the Kubernetes object a change is made to, as the change API,
// the plan command and a manifest spell it: apiVersion, kind, namespace and name. It
// is the one type the change API decodes, the store persists and render locates; it
// imports nothing of the project, so every layer can use it. Resolving it against a
// cluster (group and version apart, as Argo CD's tracking ids and status.resources
// spell them) is argocd.RefOf's job. This package neither parses nor validates the
// apiVersion: a request naming a malformed one is still recorded, and refused with
// its reason.
package objref

import "fmt"

// Target identifies one Kubernetes object. An empty Namespace means the
// Application's destination namespace.
type Target struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// String formats the target for people: "apps/v1 Deployment shop/web".
func (t Target) String() string {
	ns := t.Namespace
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s %s %s%s", t.APIVersion, t.Kind, ns, t.Name)
}
