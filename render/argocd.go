package render

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/argocd"
)

// FromArgoCD converts an Argo CD Application into render's view: one Application
// for each of its sources that keep accepts (nil keeps every source). It is the
// only converter between the two models; the service and the offline plan command
// both use it, so they read the same options and refuse the same ones.
//
// A source render cannot mirror still converts, with Unsupported saying why: its
// path (and so its reach) is known, and Plan refuses only an edit that reaches it.
// That covers spec.source.kustomize options render does not apply, a kustomize
// replicas count that is not an integer, and a values file from a ref source of
// another repository or revision.
//
// Each source of a multi-source Application converts to an Application of its
// own, as Argo CD renders each source on its own before it concatenates them;
// ref-only sources render nothing and do not convert. "$ref/path" values files
// and file parameters of a ref source that keep accepts (it deploys the same
// tree) become paths from the repository root. A source keep rejects that reads
// such files converts too, unsupported, reaching their directory: an edit there
// changes what it deploys and cannot be verified.
//
// The source type is status.sourceType (status.sourceTypes for several sources),
// else the source's explicit kustomize, directory, helm or plugin block, as Argo CD
// reads it; it stays empty when neither says (see DetectSourceType). A source with
// a chart deploys from a Helm repository or an OCI registry, never from a Git
// tree, and is Helm: its Chart names the chart as Argo CD pulls it (see
// convertChart), and targetRevision its version.
func FromArgoCD(a argocd.Application, keep func(argocd.AppSource) bool) []Application {
	sources := a.Sources()
	kept := func(src argocd.AppSource) bool { return keep == nil || keep(src) }
	// Without keep (one Application read on its own), a ref source is the same
	// tree as the source reading it when it names the same repository and
	// revision. A chart from a Helm repository is no tree: its ref source is the
	// tree being read when it is the Application's one Git repository and
	// revision (the plan command's --repo holds nothing else of it).
	same := func(u string) string { return strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(u), "/"), ".git") }
	trees := map[string]bool{}
	for _, src := range sources {
		if src.Chart == "" {
			trees[same(src.RepoURL)+"@"+src.TargetRevision] = true
		}
	}
	refKept := func(src, ref argocd.AppSource) bool {
		if keep != nil {
			return keep(ref)
		}
		if src.Chart != "" {
			return len(trees) == 1
		}
		return same(src.RepoURL) == same(ref.RepoURL) && src.TargetRevision == ref.TargetRevision
	}
	refs := map[string]argocd.AppSource{}
	for _, src := range sources {
		if src.Ref != "" {
			refs["$"+src.Ref] = src
		}
	}
	var out []Application
	for i, src := range sources {
		if len(sources) > 1 && src.Ref != "" && src.Path == "" && src.Chart == "" {
			// A ref-only source: Argo CD renders nothing from it, other sources
			// read values files from it.
			continue
		}
		readsKept := readsKeptRef(src, refs, refKept)
		if !kept(src) && !readsKept {
			continue
		}
		app := Application{Name: a.Key().String(), Path: src.Path, Namespace: a.Spec.Destination.Namespace,
			ManifestGeneratePaths: a.ManifestGeneratePaths, Prune: a.Automated() && a.Spec.SyncPolicy.Automated.Prune,
			InSources: a.HasMultipleSources()}
		if app.Path == "" {
			app.Path = "."
		}
		if len(sources) > 1 {
			if i > 0 {
				app.Name = fmt.Sprintf("%s (source %d)", app.Name, i+1)
			}
			if i < len(a.Status.SourceTypes) {
				app.SourceType = SourceType(a.Status.SourceTypes[i])
			}
		} else {
			app.SourceType = SourceType(a.SourceType())
		}
		convertOptions(&app, src)
		if app.Kustomize.readsEnv() {
			app.Kustomize.Env = argoEnv(a, src)
		}
		if a.Settings != nil && (app.SourceType == SourceKustomize || app.SourceType == "") {
			// An app whose type is not known yet (the plan command detects it
			// from the files) carries the options too; its build checks them.
			applySettings(&app, src, *a.Settings)
		}
		if app.SourceType == SourceHelm && app.Helm.ReleaseName == "" {
			// Argo CD names the release after the Application, without its namespace.
			app.Helm.ReleaseName = a.Name
		}
		if src.Chart != "" {
			// Argo CD reads a chart's values file and file parameter from the
			// root of the pulled chart, "/" or not: only "$ref/..." is of this
			// repository.
			for i, f := range app.Helm.ValueFiles {
				app.Helm.ValueFiles[i] = strings.TrimLeft(f, "/")
			}
			for i, p := range app.Helm.FileParameters {
				app.Helm.FileParameters[i].Path = strings.TrimLeft(p.Path, "/")
			}
		}
		resolveRefFiles(&app, src, refs, refKept)
		switch {
		case src.Chart != "":
			// Its chart is fetched from a Helm repository (see
			// Application.Chart), its values files are read from here.
			app.Path = refValuesDir(app)
		case !kept(src):
			// Its chart is in another tree, its values here: an edit of those
			// values changes what it deploys, and render cannot render it. It
			// reaches the directories of those files, so such an edit is
			// refused.
			app.Unsupported = joinReasons(app.Unsupported, fmt.Sprintf("it renders %s from %s, which is not the repository and revision being changed", src.Path, src.RepoURL))
			app.Path = refValuesDir(app)
		}
		out = append(out, app)
	}
	return out
}

// readsKeptRef reports whether a source reads values files or file parameters
// from a ref source that keep accepts.
func readsKeptRef(src argocd.AppSource, refs map[string]argocd.AppSource, kept func(src, ref argocd.AppSource) bool) bool {
	if src.Helm == nil {
		return false
	}
	files := slices.Clone(src.Helm.ValueFiles)
	for _, p := range src.Helm.FileParameters {
		files = append(files, p.Path)
	}
	for _, f := range files {
		name, _, _ := strings.Cut(f, "/")
		if ref, ok := refs[name]; ok && kept(src, ref) {
			return true
		}
	}
	return false
}

// resolveRefFiles turns the "$ref/path" values files and file parameters of a
// ref source that deploys from the same tree into paths from the repository
// root, as Argo CD reads both from that source's checkout; one from elsewhere
// makes the app unsupported.
func resolveRefFiles(app *Application, src argocd.AppSource, refs map[string]argocd.AppSource, kept func(src, ref argocd.AppSource) bool) {
	resolve := func(f, what string) string {
		name, rest, _ := strings.Cut(f, "/")
		ref, ok := refs[name]
		if !ok || !strings.HasPrefix(f, "$") {
			return f
		}
		if !kept(src, ref) {
			app.Unsupported = joinReasons(app.Unsupported, fmt.Sprintf("%s comes from %s at %s, which is not the repository and revision being changed", what, ref.RepoURL, cmpOr(ref.TargetRevision, "HEAD")))
			return f
		}
		return "/" + rest
	}
	for i, f := range app.Helm.ValueFiles {
		app.Helm.ValueFiles[i] = resolve(f, "its values file "+f)
	}
	for i, p := range app.Helm.FileParameters {
		app.Helm.FileParameters[i].Path = resolve(p.Path, fmt.Sprintf("its file parameter %s (%s)", p.Name, p.Path))
	}
}

// refValuesDir is the directory of the first values file an app reads from the
// repository, else of its first file parameter (the repository root when there
// is neither).
func refValuesDir(app Application) string {
	files := slices.Clone(app.Helm.ValueFiles)
	for _, p := range app.Helm.FileParameters {
		files = append(files, p.Path)
	}
	for _, f := range files {
		if strings.HasPrefix(f, "/") {
			return path.Dir(strings.TrimPrefix(f, "/"))
		}
	}
	return "."
}

// convertOptions copies a source's kustomize and directory options, and takes the
// source type from an explicit block when the status does not say.
func convertOptions(app *Application, src argocd.AppSource) {
	if app.SourceType == "" {
		switch {
		case src.Chart != "" || src.Helm != nil:
			app.SourceType = SourceHelm
		case src.Plugin != nil:
			app.SourceType = SourcePlugin
		case src.Kustomize != nil:
			app.SourceType = SourceKustomize
		case src.Directory != nil:
			app.SourceType = SourceDirectory
		}
	}
	if k := src.Kustomize; k != nil {
		app.Kustomize = KustomizeOptions{NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
			CommonLabels: k.CommonLabels, CommonAnnotations: k.CommonAnnotations, Images: k.Images, Components: k.Components,
			ForceCommonLabels: k.ForceCommonLabels, ForceCommonAnnotations: k.ForceCommonAnnotations,
			LabelWithoutSelector: k.LabelWithoutSelector, LabelIncludeTemplates: k.LabelIncludeTemplates,
			CommonAnnotationsEnvsubst: k.CommonAnnotationsEnvsubst, IgnoreMissingComponents: k.IgnoreMissingComponents}
		var problems []string
		for _, patch := range k.Patches {
			if p, ok := patch["path"]; ok && p != "" {
				// The file is the repository's, read by a build render does not
				// trace: its edits would go unseen.
				problems = append(problems, fmt.Sprintf("its %s.kustomize.patches entry reads the file %v; only inline patches are supported", sourceSettings(*app), p))
				continue
			}
			app.Kustomize.Patches = append(app.Kustomize.Patches, patch)
		}
		if len(k.Unsupported) > 0 {
			problems = append(problems, fmt.Sprintf("it sets %s.kustomize options that are not supported yet (%s); "+
				"Argo CD applies them when it renders, so no change it renders can be verified as Argo CD will deploy it",
				sourceSettings(*app), strings.Join(k.Unsupported, ", ")))
		}
		for _, r := range k.Replicas {
			count, err := strconv.ParseInt(r.Count.String(), 10, 64)
			if err != nil {
				// Argo CD cannot render it either.
				problems = append(problems, fmt.Sprintf("its %s.kustomize.replicas count %q for %s is not an integer", sourceSettings(*app), r.Count.String(), r.Name))
				continue
			}
			if app.Kustomize.Replicas == nil {
				app.Kustomize.Replicas = map[string]int64{}
			}
			app.Kustomize.Replicas[r.Name] = count
		}
		if len(problems) > 0 {
			app.Unsupported = joinReasons(app.Unsupported, strings.Join(problems, "; "))
		}
	}
	if d := src.Directory; d != nil {
		app.Directory = DirectoryOptions{Recurse: d.Recurse, Include: d.Include, Exclude: d.Exclude, DisableExtensionFilter: d.DisableExtensionFilter}
	}
	if src.Chart != "" {
		convertChart(app, src)
	}
	if h := src.Helm; h != nil {
		convertHelm(app, h)
	}
}

// convertChart names the chart a chart source deploys as Argo CD's repo server
// pulls it. An oci:// repoURL is an OCI artifact of its own, pulled at
// targetRevision with chart left unread: the chart is the repository the
// repoURL names, under the name of its last path segment (the name helm push
// gives it). Another repoURL in which a URL has no host is an OCI registry
// holding the chart at <repoURL>/<chart> (helm pull oci://<repoURL>/<chart>);
// the rest are chart repositories.
func convertChart(app *Application, src argocd.AppSource) {
	app.Chart = &ChartDependency{Repository: src.RepoURL, Name: src.Chart, Version: src.TargetRevision}
	if rest, ok := strings.CutPrefix(src.RepoURL, "oci://"); ok {
		ref := strings.TrimSuffix(rest, "/")
		i := strings.LastIndex(ref, "/")
		if i < 0 {
			app.Unsupported = joinReasons(app.Unsupported, fmt.Sprintf("its repoURL %s names a registry and no repository in it; Argo CD pulls the chart from the repository an oci:// repoURL names, not from the chart %s", src.RepoURL, src.Chart))
			return
		}
		app.Chart.Repository, app.Chart.Name, app.Chart.Artifact = "oci://"+ref[:i], ref[i+1:], true
		return
	}
	if isRegistryReference(src.RepoURL) {
		app.Chart.Repository = "oci://" + src.RepoURL
	}
}

// isRegistryReference reports whether repoURL names an OCI registry as Argo CD
// reads a chart source's repoURL: one without a scheme that has a host once one
// is added (registry-1.docker.io/bitnamicharts, registry.example.com:5000/charts,
// 10.0.0.5:5000/charts). Read as a URL of its own, the second has the scheme
// registry.example.com and the third does not parse.
func isRegistryReference(repoURL string) bool {
	if repoURL == "" || strings.Contains(repoURL, "://") {
		return false
	}
	u, err := url.ParseRequestURI("oci://" + repoURL)
	return err == nil && u.Host != ""
}

// convertHelm copies spec.source.helm. Version and passCredentials only matter
// for a chart fetched from a Helm repository and are not carried.
func convertHelm(app *Application, h *argocd.AppSourceHelm) {
	o := HelmOptions{ReleaseName: h.ReleaseName, Namespace: h.Namespace, ValueFiles: slices.Clone(h.ValueFiles),
		IgnoreMissingValueFiles: h.IgnoreMissingValueFiles, SkipCrds: h.SkipCrds, SkipTests: h.SkipTests,
		SkipSchemaValidation: h.SkipSchemaValidation, KubeVersion: h.KubeVersion, APIVersions: h.APIVersions}
	values, err := h.ValuesYAML()
	if err != nil {
		app.Unsupported = joinReasons(app.Unsupported, err.Error())
	}
	o.Values = string(values)
	if o.Values != "" {
		o.ValuesField = "values"
		if raw := strings.TrimSpace(string(h.ValuesObject)); raw != "" && raw != "null" {
			o.ValuesField = "valuesObject"
			o.IgnoredValues = strings.TrimSpace(h.Values) != ""
		}
	}
	for _, p := range h.Parameters {
		o.Parameters = append(o.Parameters, HelmParameter{Name: p.Name, Value: p.Value, ForceString: p.ForceString})
	}
	for _, p := range h.FileParameters {
		o.FileParameters = append(o.FileParameters, HelmFileParameter{Name: p.Name, Path: p.Path})
	}
	app.Helm = o
}

// applySettings takes argocd-cm's kustomize settings into a Kustomize app: the
// build options, checked here so that an app whose options render cannot apply
// is marked (and refused only when an edit reaches it), and the kustomize
// version it names, which Argo CD cannot render with unless argocd-cm registers it.
func applySettings(app *Application, src argocd.AppSource, s argocd.Settings) {
	app.Kustomize.BuildOptions = s.KustomizeBuildOptions
	if app.SourceType != SourceKustomize {
		return
	}
	if _, _, err := parseBuildOptions(s.KustomizeBuildOptions); err != nil {
		app.Unsupported = joinReasons(app.Unsupported, err.Error())
	}
	if k := src.Kustomize; k != nil && k.Version != "" && !s.RegistersKustomizeVersion(k.Version) {
		app.Unsupported = joinReasons(app.Unsupported, fmt.Sprintf("its %s.kustomize.version %s is not registered in argocd-cm (kustomize.path.%s), so Argo CD cannot render it", sourceSettings(*app), k.Version, k.Version))
	}
}

// readsEnv reports whether an option Argo CD substitutes variables in holds a "$".
func (o KustomizeOptions) readsEnv() bool { return o.substitutes("$") }

// readsRevision reports whether a substituted option names a revision variable.
func (o KustomizeOptions) readsRevision() bool { return o.substitutes("ARGOCD_APP_REVISION") }

// substitutes reports whether an option Argo CD substitutes variables in holds s.
func (o KustomizeOptions) substitutes(s string) bool {
	for _, img := range o.Images {
		if strings.Contains(img, s) {
			return true
		}
	}
	for _, v := range o.CommonLabels {
		if strings.Contains(v, s) {
			return true
		}
	}
	if o.CommonAnnotationsEnvsubst {
		for _, v := range o.CommonAnnotations {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

// WithRevision sets the revision variables of the apps' build environments
// (ARGOCD_APP_REVISION, and its first 7 and 8 characters as
// ARGOCD_APP_REVISION_SHORT and ARGOCD_APP_REVISION_SHORT_8) to sha, the commit
// rendered. Argo CD substitutes the commit it deploys: a plan renders before and
// after its edit with its base commit, and warns that the merge commit's
// revision changes the objects that carry it too.
func WithRevision(apps []Application, sha string) {
	for i := range apps {
		env := apps[i].Kustomize.Env
		if env == nil {
			continue
		}
		env["ARGOCD_APP_REVISION"] = sha
		env["ARGOCD_APP_REVISION_SHORT"] = sha[:min(len(sha), 7)]
		env["ARGOCD_APP_REVISION_SHORT_8"] = sha[:min(len(sha), 8)]
	}
}

// argoEnv is the build environment Argo CD's repo-server gives one source of a:
// ARGOCD_APP_NAME is the name Argo CD tracks the Application by (namespace_name
// outside the controller's namespace). The revision variables are the commit
// rendered, which only the caller knows (see WithRevision).
func argoEnv(a argocd.Application, src argocd.AppSource) map[string]string {
	name := a.Name
	if a.Namespace != "" && a.Status.ControllerNamespace != "" && a.Namespace != a.Status.ControllerNamespace {
		name = a.Namespace + "_" + a.Name
	}
	return map[string]string{
		"ARGOCD_APP_NAME":                   name,
		"ARGOCD_APP_NAMESPACE":              a.Spec.Destination.Namespace,
		"ARGOCD_APP_PROJECT_NAME":           a.Spec.Project,
		"ARGOCD_APP_SOURCE_REPO_URL":        src.RepoURL,
		"ARGOCD_APP_SOURCE_PATH":            src.Path,
		"ARGOCD_APP_SOURCE_TARGET_REVISION": src.TargetRevision,
	}
}

func joinReasons(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
