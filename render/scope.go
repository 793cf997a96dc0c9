package render

// ClusterScoped reports whether objects of kind in apiVersion's group are applied
// without a namespace, by the same list render resolves an object's namespace with
// (an unknown kind counts as namespaced: render has no cluster to ask).
func ClusterScoped(apiVersion, kind string) bool {
	return isClusterScoped(groupOf(apiVersion), kind)
}
