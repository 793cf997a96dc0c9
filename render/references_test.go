package render

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// objectsOf parses a multi-document manifest into render's objects.
func objectsOf(t *testing.T, manifest string) []*object {
	t.Helper()
	docs, err := yamledit.Documents([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var out []*object
	for _, d := range docs {
		if d.Empty {
			continue
		}
		o, ok := newObject(d.Object)
		if !ok {
			t.Fatalf("document %d is no object", d.Index)
		}
		out = append(out, o)
	}
	return out
}

func TestReferencesTo(t *testing.T) {
	const others = `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  template:
    spec:
      serviceAccountName: db
      priorityClassName: critical
      imagePullSecrets: [{name: registry}]
      containers:
        - name: db
          image: postgres:17
          envFrom: [{secretRef: {name: db-env}}]
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: data}
        - name: all
          projected:
            sources: [{configMap: {name: tuning}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop}
spec:
  ingressClassName: nginx
  rules:
    - http:
        paths:
          - backend: {service: {name: shop, port: {number: 80}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: api}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
  - {kind: ServiceAccount, name: ci, namespace: build}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api}
spec:
  parentRefs: [{name: edge, namespace: gateways}]
  rules:
    - backendRefs: [{name: api-svc, port: 8080}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: in-other-namespace, namespace: elsewhere}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
`
	for name, tc := range map[string]struct {
		target string
		want   []string // substrings of the one reference line, "" for none
	}{
		"a Deployment a Service selects by label": {target: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: web}]}}}\n"},
		"a StatefulSet's governing Service":       {target: "apiVersion: v1\nkind: Service\nmetadata: {name: db}\n", want: []string{"StatefulSet.apps shop/db (spec.serviceName)"}},
		"a service account of a pod template":     {target: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: db}\n", want: []string{"spec.template.spec.serviceAccountName"}},
		"a claim":                                 {target: "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n", want: []string{"volumes[data].persistentVolumeClaim"}},
		"a projected ConfigMap":                   {target: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tuning}\n", want: []string{"volumes[all].projected.sources[0].configMap"}},
		"a priority class":                        {target: "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: critical}\n", want: []string{"priorityClassName"}},
		"an Ingress backend":                      {target: "apiVersion: v1\nkind: Service\nmetadata: {name: shop}\n", want: []string{"Ingress.networking.k8s.io shop/shop (spec.rules[0].http.paths[0].backend.service.name)"}},
		"an ingress class":                        {target: "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n", want: []string{"spec.ingressClassName"}},
		"a scale target":                          {target: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\n", want: []string{"HorizontalPodAutoscaler.autoscaling shop/api (spec.scaleTargetRef)"}},
		"a role":                                  {target: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader}\n", want: []string{"RoleBinding.rbac.authorization.k8s.io shop/reader (roleRef)"}},
		"a subject in its namespace":              {target: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ci, namespace: build}\n", want: []string{"subjects[0]"}},
		"a subject of another name":               {target: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ci}\n"},
		"a route backend":                         {target: "apiVersion: v1\nkind: Service\nmetadata: {name: api-svc}\n", want: []string{"HTTPRoute.gateway.networking.k8s.io shop/api (spec.rules[0].backendRefs[0])"}},
		"a route parent":                          {target: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: gateways}\n", want: []string{"spec.parentRefs[0]"}},
		"the same name elsewhere":                 {target: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tuning, namespace: other}\n"},
		"a namespace with objects":                {target: "apiVersion: v1\nkind: Namespace\nmetadata: {name: elsewhere}\n", want: []string{"ConfigMap elsewhere/in-other-namespace (metadata.namespace)"}},
		"a definition with instances":             {target: "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {group: example.com, names: {kind: Widget}}\n", want: []string{"Widget.example.com shop/w (kind Widget of its group)"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := objectsOf(t, others+"---\n"+tc.target)
			target := objs[len(objs)-1]
			got := referencesTo(Application{Name: "shop", Namespace: "shop"}, objs, target)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("references %v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("references %v, want one", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("reference %q does not say %q", got[0], w)
				}
			}
		})
	}
}
