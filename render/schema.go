package render

import (
	"fmt"
	"path"
)

// customSchemaWarning warns of a Kustomize app whose build reads a custom
// OpenAPI schema (openapi: path: in any kustomization it builds): kustomize
// then takes the merge keys and patch strategies of every kind from that file
// alone, in place of its built-in Kubernetes schema, for the rest of the build
// (the root's schema, else the first base's that names one). A strategic-merge
// patch of a list the file does not describe (a Deployment's containers or
// env, when the file describes only custom resources) then replaces the list
// instead of merging by name. The render verified is kustomize's with that
// schema, so the warning is for the person reading the patches.
func (p *planner) customSchemaWarning(app Application) (Warning, bool) {
	if app.SourceType != SourceKustomize {
		return Warning{}, false
	}
	r := p.reach(app)
	if r.kust == nil {
		return Warning{}, false
	}
	for _, n := range r.kust.nodes {
		schema, ok := n.k.OpenAPI["path"]
		if !ok || schema == "" {
			continue
		}
		if f, err := joinRel(n.dir, schema); err == nil {
			schema = f
		} else {
			schema = path.Join(n.dir, schema)
		}
		return Warning{
			Code:  "custom_openapi_schema",
			Where: "Application " + app.Name,
			Message: fmt.Sprintf("%s sets openapi.path %s: kustomize replaces its built-in Kubernetes schema with that file for the whole build, so strategic-merge patches merge lists only by the merge keys it gives (a list of a kind it does not describe, such as a Deployment's containers or env, is replaced whole rather than merged by name), which may not be what the patches' authors expect; the render here is kustomize's with that schema",
				n.file, schema),
			Alternative: "give the schema the merge keys (x-kubernetes-patch-merge-key, x-kubernetes-patch-strategy) of the lists the patches touch, or drop openapi.path if the built-in schema is what is meant",
		}, true
	}
	return Warning{}, false
}

// namesSchema reports whether a kustomization of the build names its own
// OpenAPI schema (openapi: path or version), which the build then starts from
// (see helmexec.RunKustomizer). A nil reach names none.
func (r *kustReach) namesSchema() bool {
	if r == nil {
		return false
	}
	for _, n := range r.nodes {
		if len(n.k.OpenAPI) > 0 {
			return true
		}
	}
	return false
}
