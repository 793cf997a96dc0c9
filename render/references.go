package render

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A reference is one object naming another by name: deleting the named object
// breaks the one that names it (a pod that cannot start, a binding to nothing).
// The references render knows, by the field that holds them:
//
//   - pod specs (of every workload kind, pod templates included): volumes'
//     configMap.name, secret.secretName, persistentVolumeClaim.claimName and
//     projected sources; containers', init containers' and ephemeral containers'
//     env valueFrom configMapKeyRef/secretKeyRef and envFrom configMapRef/secretRef;
//     imagePullSecrets; serviceAccountName (and the older serviceAccount);
//     priorityClassName; runtimeClassName. Optional references count too: the
//     pod's behaviour still changes when the object goes.
//   - a StatefulSet's serviceName;
//   - an Ingress's backends (service.name, and serviceName of the older API),
//     tls secretName and ingressClassName;
//   - Gateway API routes' backendRefs and parentRefs;
//   - a HorizontalPodAutoscaler's or KEDA ScaledObject's scaleTargetRef, a
//     VerticalPodAutoscaler's targetRef;
//   - RoleBinding and ClusterRoleBinding roleRef and ServiceAccount subjects;
//   - a PersistentVolumeClaim's storageClassName;
//   - webhook configurations' and an APIService's service;
//   - a Namespace: every object of the app in it; a CustomResourceDefinition:
//     every object of the app of its group and kind.
//
// Label selectors (a Service's, a NetworkPolicy's, a PodDisruptionBudget's) are
// not references by name and do not count: they select whatever matches.
type reference struct {
	key   objKey
	field string
}

// referencesTo lists, as "<object> (<field>)", the objects of the app's render
// other than target that name it.
func referencesTo(app Application, objs []*object, target *object) []string {
	want := target.key(app.Namespace)
	var out []string
	for _, o := range objs {
		if o == target {
			continue
		}
		k := o.key(app.Namespace)
		fields := map[string]bool{}
		for _, r := range namedReferences(o, k.Namespace) {
			if r.key == want {
				fields[r.field] = true
			}
		}
		switch {
		case want.Group == "" && want.Kind == "Namespace" && k.Namespace == want.Name:
			fields["metadata.namespace"] = true
		case want.Group == "apiextensions.k8s.io" && want.Kind == "CustomResourceDefinition":
			spec, _ := target.body["spec"].(map[string]any)
			group, _ := spec["group"].(string)
			kind := str(spec, "names", "kind")
			if kind != "" && k.Group == group && k.Kind == kind {
				fields["kind "+kind+" of its group"] = true
			}
		}
		if len(fields) == 0 {
			continue
		}
		names := slices.Sorted(maps.Keys(fields))
		out = append(out, fmt.Sprintf("%s (%s)", k, strings.Join(names, ", ")))
	}
	sort.Strings(out)
	return out
}

// str reads a string at a path of maps.
func str(m map[string]any, keys ...string) string {
	v, _ := getPath(m, keys)
	s, _ := v.(string)
	return s
}

func items(m map[string]any, keys ...string) []map[string]any {
	v, _ := getPath(m, keys)
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, it := range list {
		if mm, ok := it.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// namedReferences lists the objects o names; ns is o's effective namespace,
// where the namespaced objects it names live unless it says otherwise.
func namedReferences(o *object, ns string) []reference {
	var refs []reference
	add := func(group, kind, namespace, name, field string) {
		if name == "" {
			return
		}
		if isClusterScoped(group, kind) {
			namespace = ""
		} else if namespace == "" {
			namespace = ns
		}
		refs = append(refs, reference{key: objKey{Group: group, Kind: kind, Namespace: namespace, Name: name}, field: field})
	}
	group := groupOf(o.apiVersion)
	spec, _ := o.body["spec"].(map[string]any)
	podPath := podSpecPath(o.kind)
	if v, ok := getPath(o.body, podPath); ok {
		if pod, ok := v.(map[string]any); ok {
			if _, has := pod["containers"]; has {
				podReferences(pod, strings.Join(podPath, "."), add)
			}
		}
	}
	switch {
	case group == "apps" && o.kind == "StatefulSet":
		add("", "Service", "", str(spec, "serviceName"), "spec.serviceName")
	case (group == "networking.k8s.io" || group == "extensions") && o.kind == "Ingress":
		add("networking.k8s.io", "IngressClass", "", str(spec, "ingressClassName"), "spec.ingressClassName")
		backend := func(b map[string]any, field string) {
			add("", "Service", "", str(b, "service", "name"), field+".service.name")
			add("", "Service", "", str(b, "serviceName"), field+".serviceName")
		}
		if b, ok := spec["defaultBackend"].(map[string]any); ok {
			backend(b, "spec.defaultBackend")
		}
		if b, ok := spec["backend"].(map[string]any); ok {
			backend(b, "spec.backend")
		}
		for i, r := range items(spec, "rules") {
			for j, p := range items(r, "http", "paths") {
				if b, ok := p["backend"].(map[string]any); ok {
					backend(b, fmt.Sprintf("spec.rules[%d].http.paths[%d].backend", i, j))
				}
			}
		}
		for i, t := range items(spec, "tls") {
			add("", "Secret", "", str(t, "secretName"), fmt.Sprintf("spec.tls[%d].secretName", i))
		}
	case group == "gateway.networking.k8s.io":
		for i, p := range items(spec, "parentRefs") {
			add(strOr(p, "group", "gateway.networking.k8s.io"), cmpOr(str(p, "kind"), "Gateway"), str(p, "namespace"), str(p, "name"), fmt.Sprintf("spec.parentRefs[%d]", i))
		}
		for i, r := range items(spec, "rules") {
			for j, b := range items(r, "backendRefs") {
				add(strOr(b, "group", ""), cmpOr(str(b, "kind"), "Service"), str(b, "namespace"), str(b, "name"), fmt.Sprintf("spec.rules[%d].backendRefs[%d]", i, j))
			}
		}
	case o.kind == "HorizontalPodAutoscaler" && group == "autoscaling",
		o.kind == "ScaledObject" && group == "keda.sh":
		t, _ := spec["scaleTargetRef"].(map[string]any)
		apiVersion := str(t, "apiVersion")
		kind := str(t, "kind")
		if group == "keda.sh" {
			kind = cmpOr(kind, "Deployment")
			apiVersion = cmpOr(apiVersion, "apps/v1")
		}
		add(groupOf(apiVersion), kind, "", str(t, "name"), "spec.scaleTargetRef")
	case o.kind == "VerticalPodAutoscaler" && group == "autoscaling.k8s.io":
		t, _ := spec["targetRef"].(map[string]any)
		add(groupOf(str(t, "apiVersion")), str(t, "kind"), "", str(t, "name"), "spec.targetRef")
	case group == "rbac.authorization.k8s.io" && (o.kind == "RoleBinding" || o.kind == "ClusterRoleBinding"):
		roleRef, _ := o.body["roleRef"].(map[string]any)
		add("rbac.authorization.k8s.io", str(roleRef, "kind"), "", str(roleRef, "name"), "roleRef")
		for i, s := range items(o.body, "subjects") {
			if str(s, "kind") == "ServiceAccount" {
				add("", "ServiceAccount", str(s, "namespace"), str(s, "name"), fmt.Sprintf("subjects[%d]", i))
			}
		}
	case group == "" && o.kind == "PersistentVolumeClaim":
		add("storage.k8s.io", "StorageClass", "", str(spec, "storageClassName"), "spec.storageClassName")
	case group == "admissionregistration.k8s.io" && (o.kind == "MutatingWebhookConfiguration" || o.kind == "ValidatingWebhookConfiguration"):
		for i, w := range items(o.body, "webhooks") {
			add("", "Service", str(w, "clientConfig", "service", "namespace"), str(w, "clientConfig", "service", "name"), fmt.Sprintf("webhooks[%d].clientConfig.service", i))
		}
	case group == "apiregistration.k8s.io" && o.kind == "APIService":
		add("", "Service", str(spec, "service", "namespace"), str(spec, "service", "name"), "spec.service")
	}
	return refs
}

// podReferences adds the references of one pod spec found at field.
func podReferences(pod map[string]any, field string, add func(group, kind, namespace, name, field string)) {
	add("", "ServiceAccount", "", str(pod, "serviceAccountName"), field+".serviceAccountName")
	add("", "ServiceAccount", "", str(pod, "serviceAccount"), field+".serviceAccount")
	add("scheduling.k8s.io", "PriorityClass", "", str(pod, "priorityClassName"), field+".priorityClassName")
	add("node.k8s.io", "RuntimeClass", "", str(pod, "runtimeClassName"), field+".runtimeClassName")
	for i, s := range items(pod, "imagePullSecrets") {
		add("", "Secret", "", str(s, "name"), fmt.Sprintf("%s.imagePullSecrets[%d]", field, i))
	}
	for _, v := range items(pod, "volumes") {
		at := field + ".volumes[" + str(v, "name") + "]"
		add("", "ConfigMap", "", str(v, "configMap", "name"), at+".configMap")
		add("", "Secret", "", str(v, "secret", "secretName"), at+".secret")
		add("", "PersistentVolumeClaim", "", str(v, "persistentVolumeClaim", "claimName"), at+".persistentVolumeClaim")
		for j, s := range items(v, "projected", "sources") {
			src := at + ".projected.sources[" + strconv.Itoa(j) + "]"
			add("", "ConfigMap", "", str(s, "configMap", "name"), src+".configMap")
			add("", "Secret", "", str(s, "secret", "name"), src+".secret")
		}
	}
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		for _, c := range items(pod, list) {
			at := field + "." + list + "[" + str(c, "name") + "]"
			for _, e := range items(c, "env") {
				add("", "ConfigMap", "", str(e, "valueFrom", "configMapKeyRef", "name"), at+".env["+str(e, "name")+"]")
				add("", "Secret", "", str(e, "valueFrom", "secretKeyRef", "name"), at+".env["+str(e, "name")+"]")
			}
			for j, e := range items(c, "envFrom") {
				add("", "ConfigMap", "", str(e, "configMapRef", "name"), fmt.Sprintf("%s.envFrom[%d]", at, j))
				add("", "Secret", "", str(e, "secretRef", "name"), fmt.Sprintf("%s.envFrom[%d]", at, j))
			}
		}
	}
}

// strOr is the string at key of m, or def when the key is absent (an empty group
// given explicitly is the core group, not the default).
func strOr(m map[string]any, key, def string) string {
	v, ok := m[key]
	if !ok {
		return def
	}
	s, _ := v.(string)
	return s
}
