package render

import (
	"fmt"
	"strings"
	"time"
)

// objKey identifies a rendered object the way Argo CD does: by group, kind,
// namespace and name (the version is not part of an object's identity).
type objKey struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

func (k objKey) String() string {
	gk := k.Kind
	if k.Group != "" {
		gk = k.Kind + "." + k.Group
	}
	if k.Namespace == "" {
		return gk + " " + k.Name
	}
	return gk + " " + k.Namespace + "/" + k.Name
}

func (k objKey) less(o objKey) bool {
	if k.Kind != o.Kind {
		return k.Kind < o.Kind
	}
	if k.Group != o.Group {
		return k.Group < o.Group
	}
	if k.Namespace != o.Namespace {
		return k.Namespace < o.Namespace
	}
	return k.Name < o.Name
}

// object is one rendered Kubernetes object.
type object struct {
	apiVersion string
	kind       string
	name       string
	namespace  string // as rendered; empty when the manifest has none
	body       map[string]any

	// file and doc locate the source document of a Directory app's object; item
	// is its index in the document's items when the document is a List (Argo CD
	// deploys a List's items, not the List), else -1.
	file string
	doc  int
	item int
	// origin is the repository-relative file a kustomize object was read from;
	// generatedBy names the generator when kustomize generated it.
	origin      string
	generatedBy string
	remote      bool
}

func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// effectiveNamespace is where Argo CD applies the object: its own namespace, or the
// destination namespace for namespaced kinds without one.
func effectiveNamespace(apiVersion, kind, namespace, destination string) string {
	switch {
	case isClusterScoped(groupOf(apiVersion), kind):
		return ""
	case namespace != "":
		return namespace
	default:
		return destination
	}
}

func (o *object) key(destination string) objKey {
	return objKey{
		Group:     groupOf(o.apiVersion),
		Kind:      o.kind,
		Namespace: effectiveNamespace(o.apiVersion, o.kind, o.namespace, destination),
		Name:      o.name,
	}
}

// clusterScoped lists the cluster-scoped kinds of Kubernetes and of common add-ons,
// by group. Render has no cluster to ask; an unknown kind is treated as namespaced.
var clusterScoped = map[string]map[string]bool{
	"":                             {"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true},
	"rbac.authorization.k8s.io":    {"ClusterRole": true, "ClusterRoleBinding": true},
	"apiextensions.k8s.io":         {"CustomResourceDefinition": true},
	"admissionregistration.k8s.io": {"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true},
	"apiregistration.k8s.io":       {"APIService": true},
	"storage.k8s.io":               {"StorageClass": true, "CSIDriver": true, "CSINode": true, "VolumeAttachment": true, "VolumeAttributesClass": true},
	"scheduling.k8s.io":            {"PriorityClass": true},
	"node.k8s.io":                  {"RuntimeClass": true},
	"networking.k8s.io":            {"IngressClass": true, "IPAddress": true, "ServiceCIDR": true},
	"certificates.k8s.io":          {"CertificateSigningRequest": true, "ClusterTrustBundle": true},
	"flowcontrol.apiserver.k8s.io": {"FlowSchema": true, "PriorityLevelConfiguration": true},
	"resource.k8s.io":              {"DeviceClass": true, "ResourceSlice": true},
	"snapshot.storage.k8s.io":      {"VolumeSnapshotClass": true, "VolumeSnapshotContent": true},
	"cert-manager.io":              {"ClusterIssuer": true},
	"external-secrets.io":          {"ClusterSecretStore": true, "ClusterExternalSecret": true},
	"gateway.networking.k8s.io":    {"GatewayClass": true},
	"policy":                       {"PodSecurityPolicy": true},
}

func isClusterScoped(group, kind string) bool {
	return clusterScoped[group][kind]
}

// newObject builds an object from a decoded manifest. ok is false when the map is
// not a Kubernetes object (no apiVersion or kind).
func newObject(m map[string]any) (*object, bool) {
	body, _ := normalize(m).(map[string]any)
	apiVersion, _ := body["apiVersion"].(string)
	kind, _ := body["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, false
	}
	meta, _ := body["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	return &object{apiVersion: apiVersion, kind: kind, name: name, namespace: ns, body: body, item: -1}, true
}

// normalize gives decoded YAML one shape whatever decoder produced it: string-keyed
// maps, int64 integers, float64 floats, RFC 3339 timestamps as strings.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint64:
		if x <= 1<<63-1 {
			return int64(x)
		}
		return float64(x)
	case uint:
		return int64(x)
	case float32:
		return float64(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	default:
		return v
	}
}

// deepCopy copies a normalized value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// applied returns a copy of the object as Argo CD applies it for an Application
// with the destination namespace: a namespaced object without a namespace gets it.
func (o *object) applied(destination string) map[string]any {
	body, _ := deepCopy(o.body).(map[string]any)
	if ns := effectiveNamespace(o.apiVersion, o.kind, o.namespace, destination); ns != "" && o.namespace == "" {
		meta, _ := body["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			body["metadata"] = meta
		}
		meta["namespace"] = ns
	}
	return body
}
