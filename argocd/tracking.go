// Package argocd owns the Argo CD knowledge of the service, as pure functions over
// Application and resource objects handed to it: tracking ids and instance names,
// who manages a resource, how strongly Argo CD defends it (the warning level), the
// Git-or-direct path decision with its plan payload, and the app summaries shown to
// people. It holds the one model of an Application and its one decoder, whether the
// Application comes from the API server (unstructured or JSON) or from a manifest
// file (ReadApplications, over a file system it is handed). It performs no other
// I/O; reading clusters is the job of package kube.
package argocd

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Keys Argo CD writes on the resources it manages.
const (
	// TrackingIDAnnotation carries "<app>:<group>/<Kind>:<namespace>/<name>".
	TrackingIDAnnotation = "argocd.argoproj.io/tracking-id"
	// InstallationIDAnnotation names the Argo CD instance that applied the resource
	// when several instances share one cluster (argocd-cm "installationID").
	InstallationIDAnnotation = "argocd.argoproj.io/installation-id"
	// DefaultInstanceLabel is Argo CD's default label key for label tracking. Helm sets
	// the same key to the release name, which is why a label alone proves nothing.
	DefaultInstanceLabel = "app.kubernetes.io/instance"
)

// instanceNameSeparator joins an Application's namespace and name in tracking ids of
// apps outside Argo CD's own namespace ("apps in any namespace").
const instanceNameSeparator = "_"

// TrackingID is a parsed tracking-id annotation. It names the Application that
// applied the resource and the resource it was written for.
type TrackingID struct {
	// AppInstance is the application part as written: "<name>" for an Application in
	// Argo CD's own namespace, "<namespace>_<name>" for any other namespace.
	AppInstance string
	Group       string // empty for the core group
	Kind        string
	Namespace   string // empty for cluster-scoped resources
	Name        string
}

var (
	// Kinds are Go-style identifiers in every API group.
	kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	// Groups are DNS subdomains; the core group is empty.
	groupPattern = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// ErrTrackingID is wrapped by every parse failure of ParseTrackingID.
var ErrTrackingID = errors.New("invalid tracking id")

// ParseTrackingID parses "<app>:<group>/<Kind>:<namespace>/<name>". It accepts exactly
// the strings that TrackingID.String produces, so a parsed id always round-trips.
// Resource names may contain ':' (RBAC names such as "system:aggregate-to-view" do).
func ParseTrackingID(s string) (TrackingID, error) {
	fail := func(reason string) (TrackingID, error) {
		return TrackingID{}, fmt.Errorf("%w %q: %s", ErrTrackingID, s, reason)
	}
	app, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fail(`want "<app>:<group>/<Kind>:<namespace>/<name>"`)
	}
	groupKind, nsName, ok := strings.Cut(rest, ":")
	if !ok {
		return fail(`missing ":" before "<namespace>/<name>"`)
	}
	group, kind, ok := strings.Cut(groupKind, "/")
	if !ok {
		return fail(`missing "/" between group and kind`)
	}
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok {
		return fail(`missing "/" between namespace and name`)
	}
	id := TrackingID{AppInstance: app, Group: group, Kind: kind, Namespace: ns, Name: name}
	if err := id.validate(); err != nil {
		return fail(err.Error())
	}
	return id, nil
}

func (id TrackingID) validate() error {
	if _, _, err := ParseInstanceName(id.AppInstance); err != nil {
		return err
	}
	if id.Group != "" && !groupPattern.MatchString(id.Group) {
		return fmt.Errorf("group %q is not a DNS subdomain", id.Group)
	}
	if !kindPattern.MatchString(id.Kind) {
		return fmt.Errorf("kind %q is not an identifier", id.Kind)
	}
	if !isPrintableWord(id.Namespace) || strings.ContainsAny(id.Namespace, ":/") {
		return fmt.Errorf("namespace %q is not a namespace name", id.Namespace)
	}
	if id.Name == "" {
		return errors.New("resource name is empty")
	}
	if !isPrintableWord(id.Name) || strings.Contains(id.Name, "/") {
		return fmt.Errorf("resource name %q contains '/', spaces or control characters", id.Name)
	}
	return nil
}

// String formats the id the way Argo CD writes it.
func (id TrackingID) String() string {
	return id.AppInstance + ":" + id.Group + "/" + id.Kind + ":" + id.Namespace + "/" + id.Name
}

// Resource returns the resource the id was written for (without a version).
func (id TrackingID) Resource() ResourceRef {
	return ResourceRef{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
}

// ParseInstanceName splits an Argo CD application instance name (the application part
// of a tracking id, or the value of the instance label) into the Application's
// namespace and name. namespace is empty when the name carries none, which means the
// Application lives in Argo CD's own (control-plane) namespace.
func ParseInstanceName(s string) (namespace, name string, err error) {
	if s == "" {
		return "", "", errors.New("application name is empty")
	}
	if !isPrintableWord(s) || strings.ContainsAny(s, ":/") {
		return "", "", fmt.Errorf("application name %q contains ':', '/', spaces or control characters", s)
	}
	ns, n, ok := strings.Cut(s, instanceNameSeparator)
	if !ok {
		return "", s, nil
	}
	if ns == "" || n == "" {
		return "", "", fmt.Errorf("application name %q: want <namespace>_<name>", s)
	}
	return ns, n, nil
}

// FormatInstanceName is the inverse of ParseInstanceName: Applications in Argo CD's
// control-plane namespace (or with no namespace) are named by name alone.
func FormatInstanceName(namespace, name, controlPlaneNamespace string) string {
	if namespace == "" || namespace == controlPlaneNamespace {
		return name
	}
	return namespace + instanceNameSeparator + name
}

func isPrintableWord(s string) bool {
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
