// Package policy owns the kukie/policy check: the schema of the .kukie.yml a
// repository keeps at the root of its default branch, its strict parse (unknown
// keys, aliases and misspelt levels refused, each at its line), and the rules it
// turns on, evaluated over the rendered objects of the Applications a change
// reaches: images pinned by digest, images from allowed registries, objects only in
// allowed namespaces, no Secret values in the repository (nor secret-looking env
// values in plain text), no denied kinds, and the server-side dry-run's outcome. Every rule is off unless the file turns it on.
//
// A finding points at the manifest line that causes it: the source document of the
// object (a Directory app's document, the file kustomize read it from, the
// kustomization entry that generates it), and in it the deepest field the rule
// names that the document spells. A Helm template's line is not known; such
// findings are listed in the summary only. A finding names a Secret's keys and
// an env variable's name, never their values.
//
// The package is pure: it reads the tree it is handed (bounded like render's
// reads) and builds the check run's content; it fetches nothing, sends nothing to a
// cluster and publishes nothing.
package policy
