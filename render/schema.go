package render

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
