package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/kukie/kukie-gitops/objref"
)

// SourceType is the format of an Application's source as Argo CD reports it in
// status.sourceType. The format is never guessed from file names by Plan.
type SourceType string

// Source types reported by Argo CD.
const (
	SourceDirectory SourceType = "Directory"
	SourceKustomize SourceType = "Kustomize"
	SourceHelm      SourceType = "Helm"
	SourcePlugin    SourceType = "Plugin"
)

// Application is what render needs to know about one Argo CD Application that
// deploys from the repository.
type Application struct {
	// Name identifies the Application in results and refusals.
	Name string `json:"name"`
	// Path is spec.source.path, relative to the repository root ("." for the root).
	Path string `json:"path"`
	// SourceType is status.sourceType.
	SourceType SourceType `json:"sourceType"`
	// Namespace is spec.destination.namespace: objects without a namespace land there.
	Namespace string `json:"namespace,omitempty"`
	// Kustomize holds spec.source.kustomize, applied the way Argo CD applies it.
	Kustomize KustomizeOptions `json:"kustomize,omitempty"`
	// Directory holds spec.source.directory.
	Directory DirectoryOptions `json:"directory,omitempty"`
	// Helm holds spec.source.helm.
	Helm HelmOptions `json:"helm,omitempty"`
	// Chart, when set, is the chart a Helm app deploys from a Helm chart
	// repository or OCI registry (spec.source.chart, repoURL, and targetRevision
	// as its version) instead of a chart of the repository: it is fetched through
	// the context's ChartSource (see WithCharts), and Path is then only where its
	// values files are, not a chart.
	Chart *ChartDependency `json:"chart,omitempty"`
	// ManifestGeneratePaths is the argocd.argoproj.io/manifest-generate-paths
	// annotation, verbatim (";"-separated paths, relative to Path or absolute from the
	// repository root).
	ManifestGeneratePaths string `json:"manifestGeneratePaths,omitempty"`
	// Prune is spec.syncPolicy.automated.prune with automated sync on: Argo CD
	// deletes from the cluster what the app stops rendering. Without it, a
	// deleted object stays in the cluster until someone syncs with pruning.
	Prune bool `json:"prune,omitempty"`
	// InSources says the Application lists its sources in spec.sources, so
	// that its settings are under spec.sources[i] (i given by the name's
	// "(source N)", none for the first) rather than spec.source: where a
	// refusal tells the reader to look.
	InSources bool `json:"inSources,omitempty"`
	// Unsupported, when set, says why render cannot render the Application as Argo
	// CD does (for example a kustomize option it does not apply). Its reach is still
	// known: Plan refuses an edit that reaches it, and ignores it otherwise.
	Unsupported string `json:"unsupported,omitempty"`
}

// KustomizeOptions are the spec.source.kustomize settings that Argo CD turns into
// "kustomize edit" calls on the app's kustomization before building.
type KustomizeOptions struct {
	NamePrefix        string            `json:"namePrefix,omitempty"`
	NameSuffix        string            `json:"nameSuffix,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	CommonLabels      map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations map[string]string `json:"commonAnnotations,omitempty"`
	// Images are "kustomize edit set image" arguments: name=newName:tag, name:tag, name@digest.
	Images []string `json:"images,omitempty"`
	// Replicas override spec.replicas by resource name.
	Replicas   map[string]int64 `json:"replicas,omitempty"`
	Components []string         `json:"components,omitempty"`
	// Patches are inline patches entries (patch, target, options) appended to
	// the kustomization's patches, as Argo CD appends them.
	Patches []map[string]any `json:"patches,omitempty"`
	// ForceCommonLabels and ForceCommonAnnotations replace keys the
	// kustomization already sets; without them such a key fails the build.
	ForceCommonLabels      bool `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations bool `json:"forceCommonAnnotations,omitempty"`
	// LabelWithoutSelector adds commonLabels as labels that leave selectors
	// alone; LabelIncludeTemplates (with it) also labels pod templates.
	LabelWithoutSelector  bool `json:"labelWithoutSelector,omitempty"`
	LabelIncludeTemplates bool `json:"labelIncludeTemplates,omitempty"`
	// CommonAnnotationsEnvsubst substitutes Env in commonAnnotations values;
	// images and commonLabels values are always substituted.
	CommonAnnotationsEnvsubst bool `json:"commonAnnotationsEnvsubst,omitempty"`
	// IgnoreMissingComponents keeps only the components Argo CD finds (see
	// effectiveComponents).
	IgnoreMissingComponents bool `json:"ignoreMissingComponents,omitempty"`
	// BuildOptions are the argocd-cm "kustomize.buildOptions" flags of "kustomize
	// build" (see parseBuildOptions).
	BuildOptions string `json:"buildOptions,omitempty"`
	// Env holds the ARGOCD_APP_* variables Argo CD substitutes ("$NAME",
	// "${NAME}", "$$" for "$"; an unknown name is empty). It is set only when an
	// option reads one.
	Env map[string]string `json:"env,omitempty"`
}

func (o KustomizeOptions) empty() bool {
	return o.NamePrefix == "" && o.NameSuffix == "" && o.Namespace == "" &&
		len(o.CommonLabels) == 0 && len(o.CommonAnnotations) == 0 && len(o.Images) == 0 &&
		len(o.Replicas) == 0 && len(o.Components) == 0 && len(o.Patches) == 0
}

// DirectoryOptions are spec.source.directory settings.
type DirectoryOptions struct {
	Recurse bool `json:"recurse,omitempty"`
	// Include and Exclude are globs matched against the path relative to the app path
	// ("*" crosses "/", "{a,b}" alternates), as in Argo CD.
	Include string `json:"include,omitempty"`
	Exclude string `json:"exclude,omitempty"`
	// DisableExtensionFilter reads every file include and exclude take in,
	// not only .yaml, .yml, .json and .jsonnet ones (Argo CD 3.6).
	DisableExtensionFilter bool `json:"disableExtensionFilter,omitempty"`
}

// Change is the one change a plan makes. Exactly one field is set.
type Change struct {
	Replicas    *Replicas    `json:"replicas,omitempty"`
	Image       *Image       `json:"image,omitempty"`
	Env         *Env         `json:"env,omitempty"`
	Resources   *Resources   `json:"resources,omitempty"`
	NewResource *NewResource `json:"new_resource,omitempty"`
	Patch       *Patch       `json:"patch,omitempty"`
	// DeleteResource removes the target.
	DeleteResource *DeleteResource `json:"delete_resource,omitempty"`
}

// Replicas sets spec.replicas.
type Replicas struct {
	Count int64 `json:"count"`
}

// Image replaces the tag or the digest of one container's image; the image name
// stays. Setting a tag drops a pinned digest and setting a digest drops the tag, as
// kustomize's images transformer does.
type Image struct {
	Container string `json:"container"`
	// Name, when set, must equal the image name the container runs now: a guard
	// against changing the wrong image, never a rename.
	Name   string `json:"name,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// Env sets and removes environment variables of one container. Existing entries keep
// their position; new ones are appended in name order.
type Env struct {
	Container string            `json:"container"`
	Set       map[string]string `json:"set,omitempty"`
	Unset     []string          `json:"unset,omitempty"`
}

// Resources sets single quantities of one container; an empty quantity removes it.
type Resources struct {
	Container string            `json:"container"`
	Requests  map[string]string `json:"requests,omitempty"`
	Limits    map[string]string `json:"limits,omitempty"`
}

// DeleteResource removes the target from what its Application renders: its
// document, its file and the file's resources entry, a kustomize delete patch, or
// the Helm values switch that renders it. It has no fields: the request's target
// names the object.
type DeleteResource struct{}

// NewResource adds one or more YAML documents to the app.
type NewResource struct {
	Manifest string `json:"manifest"`
}

func (c Change) kind() (string, error) {
	var set []string
	if c.Replicas != nil {
		set = append(set, "replicas")
	}
	if c.Image != nil {
		set = append(set, "image")
	}
	if c.Env != nil {
		set = append(set, "env")
	}
	if c.Resources != nil {
		set = append(set, "resources")
	}
	if c.NewResource != nil {
		set = append(set, "new_resource")
	}
	if c.Patch != nil {
		set = append(set, "patch")
	}
	if c.DeleteResource != nil {
		set = append(set, "delete_resource")
	}
	if len(set) != 1 {
		return "", fmt.Errorf("a change sets exactly one of replicas, image, env, resources, new_resource, patch, delete_resource; got %d (%s)", len(set), strings.Join(set, ", "))
	}
	return set[0], nil
}

// Request is one planned change against one repository tree.
type Request struct {
	// RepoDir is the repository checkout; it is read, never written.
	RepoDir string
	// TreeID, when set, identifies the exact content of RepoDir (for example the
	// commit SHA of an extracted archive). Facts derived from the unmodified tree
	// (each Application's reach: the files and directories its render can read)
	// are then kept per TreeID and Application, and reused by later plans with
	// the same TreeID; the edited files are still judged per plan. Leave it empty
	// when RepoDir can change: a TreeID reused for different content gives wrong
	// affected apps.
	TreeID string
	// Since, with TreeID, names an earlier tree of the repository and the paths
	// changed since: an Application whose reach there reads none of them (and
	// went through no symlink among them) keeps that reach instead of reading its
	// kustomizations again. Leave it nil when the changed paths are not known in
	// full; every reach is then read from RepoDir.
	Since *PriorTree
	// Apps are the Applications that deploy from the repository (at least App).
	Apps []Application
	// App names the Application that manages the target (and receives a new resource).
	// It may be empty when Apps holds exactly one Application.
	App string
	// Target is the object to change; ignored for NewResource.
	Target objref.Target
	Change Change
	// BeforeRender, when set, supplies the render of an Application from RepoDir as
	// given (before the edit), for example from a cache keyed by commit. It must
	// return what Render returns for RepoDir and the app; Plan still renders every
	// edited tree itself. When nil, Plan renders the before-state too.
	BeforeRender func(ctx context.Context, app Application) ([]Object, error)
}

// Result is a verified edit.
type Result struct {
	// App is the Application the change was made for.
	App string `json:"app"`
	// Target is the object changed, as App renders it: its apiVersion, its kind
	// as the render spells it, the namespace Argo CD applies it in (App's
	// destination for a namespaced object without one) and its name before the
	// edit (a generated object's hashed name, when the request named it by its
	// generator). Nil for a new resource.
	Target *objref.Target `json:"target,omitempty"`
	// Strategy says where the edit went, e.g. "images entry", "new images entry", "in place", "new patch".
	Strategy string     `json:"strategy"`
	Edits    []FileEdit `json:"edits"`
	// GitDiff is a unified diff in git's format, with secret values masked.
	GitDiff string `json:"git_diff"`
	// ClusterDiff lists every rendered object whose manifest changes.
	ClusterDiff  []ObjectDiff `json:"cluster_diff"`
	Warnings     []Warning    `json:"warnings,omitempty"`
	Verification Verification `json:"verification"`
	// Changed holds the after-render of every object the edit changes or adds, per
	// affected Application (removed objects have none), in ClusterDiff's order: the
	// objects a server-side dry-run sends to the cluster. They are the real objects,
	// Secret values included, so they are never serialised with the Result
	// (json:"-"); ClusterDiff is what people see.
	Changed []ChangedObject `json:"-"`
	// Renamed is the target's name after the edit when the edit renames it (a
	// configMapGenerator names its ConfigMap by a hash of its content): the
	// name the deployment is followed under.
	Renamed string `json:"renamed,omitempty"`
	// Renames lists every generated object the edit renames, the target or
	// another (an env change that goes to the generator of a ConfigMap its
	// container reads): in ClusterDiff each is one object removed and one
	// added, which these say are the same object under a new name.
	Renames []Rename `json:"renames,omitempty"`
}

// Rename is a generated object an edit renames: kustomize names a generated
// ConfigMap by a hash of its content, so new content is a new name, the
// references to it in the app's objects follow, and the old name leaves the
// render (Argo CD prunes it where the app prunes).
type Rename struct {
	App        string `json:"app"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	From       string `json:"from"`
	To         string `json:"to"`
	// Generator is the generator entry that names it, e.g.
	// `configMapGenerator "api-config" of base/kustomization.yaml`.
	Generator string `json:"generator"`
}

// RenameNote says of an object of a cluster diff that one of renames names:
// "renamed to NEW" for the removed object, "renamed from OLD" for the added
// one, else "".
func RenameNote(renames []Rename, d ObjectDiff) string {
	for _, r := range renames {
		if r.App != d.App || r.APIVersion != d.APIVersion || r.Kind != d.Kind || r.Namespace != d.Namespace {
			continue
		}
		switch {
		case d.Action == "removed" && d.Name == r.From:
			return "renamed to " + r.To
		case d.Action == "added" && d.Name == r.To:
			return "renamed from " + r.From
		}
	}
	return ""
}

func (r Rename) String() string {
	ns := ""
	if r.Namespace != "" {
		ns = r.Namespace + "/"
	}
	return fmt.Sprintf("%s %s%s -> %s%s (%s names it by a hash of its content; the references to it follow)", r.Kind, ns, r.From, ns, r.To, r.Generator)
}

// ChangedObject is one object of an affected Application after the edit, as Argo
// CD would apply it: a namespaced object without a namespace carries the
// Application's destination namespace.
type ChangedObject struct {
	App    string
	Object map[string]any
}

// FileEdit is the new content of one file. Old is nil for a created file; New is
// nil for a removed one (a revert's, a deleted object's file, a generator's
// file that nothing reads any more).
type FileEdit struct {
	Path    string `json:"path"`
	Old     []byte `json:"-"`
	New     []byte `json:"-"`
	Created bool   `json:"created,omitempty"`
}

// ObjectDiff is what will change in the cluster for one object of one app.
type ObjectDiff struct {
	App        string `json:"app"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Action is "modified", "added" or "removed".
	Action  string        `json:"action"`
	Changes []FieldChange `json:"changes,omitempty"`
	// Diff is a unified diff of the object's manifest (YAML), secret values masked.
	Diff string `json:"diff"`
}

// FieldChange is one changed field; values are rendered as YAML flow text and masked
// when secret.
type FieldChange struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// Warning tells the person merging what may happen. Each says where, what can
// happen, and an alternative when there is one.
type Warning struct {
	Code        string `json:"code"`
	Where       string `json:"where"`
	Message     string `json:"message"`
	Alternative string `json:"alternative,omitempty"`
}

func (w Warning) String() string {
	s := w.Where + ": " + w.Message
	if w.Alternative != "" {
		s += " (" + w.Alternative + ")"
	}
	return s
}

// Verification records what was compared.
type Verification struct {
	// Verified is true when every affected app rendered exactly as expected.
	Verified bool `json:"verified"`
	// Apps holds one entry per affected Application of the accepted attempt.
	Apps []AppVerification `json:"apps"`
	// Attempts lists every edit location tried, in order.
	Attempts []Attempt `json:"attempts"`
}

// AppVerification is the comparison for one Application.
type AppVerification struct {
	App string `json:"app"`
	// Objects is the number of objects of either render (before or after the
	// edit), each compared field by field.
	Objects int `json:"objects"`
	// Changed is the number of objects whose manifest changes.
	Changed int `json:"changed"`
	// Differences lists the first unexpected differences (paths, masked values).
	Differences []string `json:"differences,omitempty"`
}

// Summary is the comparison in words: "web: 1 object compared, 1 changed".
func (a AppVerification) Summary() string {
	noun := "objects"
	if a.Objects == 1 {
		noun = "object"
	}
	return fmt.Sprintf("%s: %d %s compared, %d changed", a.App, a.Objects, noun, a.Changed)
}

// Attempt is one edit location that was tried.
type Attempt struct {
	Strategy string   `json:"strategy"`
	Files    []string `json:"files"`
	Verified bool     `json:"verified"`
	Reason   string   `json:"reason,omitempty"`
	// guess: the attempt set a key the chart reads that nothing sets.
	guess bool
}

// Refusal codes: stable identifiers for the reasons a plan makes no edit.
const (
	CodeInvalidRequest    = "invalid_request"
	CodeUnsupportedSource = "unsupported_source"
	CodeHelm              = "helm_unsupported"
	// CodeHelmDependency: a chart dependency that is not vendored could not be
	// had as its Chart.lock pins it (no lock, a lock out of sync, an unreachable
	// repository, a digest that does not match).
	CodeHelmDependency    = "helm_dependency"
	CodeSecret            = "secret"
	CodeRemoteBase        = "remote_base"
	CodeGenerated         = "generated_object"
	CodeComponent         = "component_unreachable"
	CodeSymlinkEscape     = "symlink_escape"
	CodeFileTooLarge      = "file_too_large"
	CodeAliasBomb         = "alias_bomb"
	CodePathEscape        = "path_escape"
	CodeRenderFailed      = "render_failed"
	CodeTargetNotFound    = "target_not_found"
	CodeTargetAmbiguous   = "target_ambiguous"
	CodeContainerNotFound = "container_not_found"
	CodeNotScalable       = "not_scalable"
	CodeNoChange          = "no_change"
	CodeAppOverride       = "application_override"
	// CodeTransformerOverride: a transformer of the app's kustomization sets
	// the field the change gives (a label, an annotation, a field a
	// replacement writes) after every patch.
	CodeTransformerOverride = "transformer_override"
	CodeAlreadyExists       = "already_exists"
	CodeVerificationFailed  = "verification_failed"
	CodeLeak                = "change_leaks"
	CodeUnverifiableApp     = "unverifiable_app"
	// CodeReferenced: a delete of an object that other objects of its app name.
	CodeReferenced = "still_referenced"
	// CodeTooLarge: the repository holds more than a plan reads (see MaxRenderDocuments and the other bounds).
	CodeTooLarge = "input_too_large"
	// CodeTimeout: rendering did not finish within Timeout.
	CodeTimeout = "render_timeout"
	// CodeNoLongerApplies: a revert finds the files or the objects its change wrote
	// changed since, so undoing the change would undo those changes too.
	CodeNoLongerApplies = "no_longer_applies"
)

// Refusal is a plan that makes no edit, with the reason. It is returned as an error;
// use errors.As to read it. Reason never contains secret values.
type Refusal struct {
	Code   string `json:"error"`
	Reason string `json:"reason"`
	// App is the Application the refusal is about, when there is one.
	App string `json:"app,omitempty"`
	// Attempts lists the edit locations that were tried and why each failed.
	Attempts []Attempt `json:"attempts,omitempty"`
}

func (r *Refusal) Error() string {
	return "refused (" + r.Code + "): " + r.Reason
}

func refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}
}
