package argocd

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Application is the part of an Argo CD Application (argoproj.io/v1alpha1) that the
// service reads. Field names follow Argo CD's JSON so objects decode directly.
type Application struct {
	Name      string
	Namespace string
	// Generation is metadata.generation, bumped on every spec change.
	Generation int64
	// ManifestGeneratePaths is the ManifestGeneratePathsAnnotation, verbatim: the
	// paths whose changes refresh the app. Only this annotation is kept, as
	// Applications often carry large ones (last-applied-configuration) that the
	// service never reads.
	ManifestGeneratePaths string
	Spec                  AppSpec
	Status                AppStatus
	// Settings are the argocd-cm settings of the Argo CD instance that renders the
	// Application, when whoever read it knows them (nil otherwise).
	Settings *Settings
}

// Key returns the Application's namespace and name.
func (a *Application) Key() AppKey { return AppKey{Namespace: a.Namespace, Name: a.Name} }

// AppSpec is spec of an Application.
type AppSpec struct {
	Project     string         `json:"project,omitempty"`
	Source      *AppSource     `json:"source,omitempty"`
	Sources     []AppSource    `json:"sources,omitempty"`
	Destination AppDestination `json:"destination"`
	SyncPolicy  *AppSyncPolicy `json:"syncPolicy,omitempty"`
}

// AppSource is one entry of spec.source or spec.sources.
type AppSource struct {
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path,omitempty"`
	TargetRevision string `json:"targetRevision,omitempty"`
	Chart          string `json:"chart,omitempty"`
	Ref            string `json:"ref,omitempty"`
	// Kustomize and Directory are the source options Argo CD applies when it
	// renders the source.
	Kustomize *AppSourceKustomize `json:"kustomize,omitempty"`
	Directory *AppSourceDirectory `json:"directory,omitempty"`
	// Helm holds the options Argo CD passes to "helm template".
	Helm *AppSourceHelm `json:"helm,omitempty"`
	// Plugin is read for its presence only: like the other blocks, it names the
	// source type before Argo CD reports it.
	Plugin *struct{} `json:"plugin,omitempty"`
}

// AppSourceHelm is spec.source.helm: what Argo CD turns into the flags of "helm
// template".
type AppSourceHelm struct {
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace, when set, replaces the destination namespace as the release's.
	Namespace string `json:"namespace,omitempty"`
	// ValueFiles are relative to the source path (or absolute from the repository
	// root, or "$ref/..." in a multi-source Application), merged in order.
	ValueFiles              []string `json:"valueFiles,omitempty"`
	IgnoreMissingValueFiles bool     `json:"ignoreMissingValueFiles,omitempty"`
	// Values is a YAML document of values; ValuesObject, when set, replaces it.
	Values       string          `json:"values,omitempty"`
	ValuesObject json.RawMessage `json:"valuesObject,omitempty"`
	// Parameters are "--set" (or, with ForceString, "--set-string") values.
	Parameters     []AppHelmParameter     `json:"parameters,omitempty"`
	FileParameters []AppHelmFileParameter `json:"fileParameters,omitempty"`
	SkipCrds       bool                   `json:"skipCrds,omitempty"`
	SkipTests      bool                   `json:"skipTests,omitempty"`
	// SkipSchemaValidation skips the chart's values.schema.json.
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// KubeVersion and APIVersions replace what the destination cluster reports
	// as .Capabilities.
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// Version picks the chart version of a chart from a Helm repository, and
	// PassCredentials passes credentials to other hosts: neither changes what a
	// chart in a Git repository renders.
	Version         string `json:"version,omitempty"`
	PassCredentials bool   `json:"passCredentials,omitempty"`
}

// AppHelmParameter is one entry of spec.source.helm.parameters.
type AppHelmParameter struct {
	Name        string `json:"name,omitempty"`
	Value       string `json:"value,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

// AppHelmFileParameter is one entry of spec.source.helm.fileParameters: the value
// is the content of the file at Path.
type AppHelmFileParameter struct {
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"`
}

// ValuesYAML returns the values Argo CD writes to the extra values file it passes
// last: valuesObject (as YAML) when set, else values. It is empty when neither is.
func (h *AppSourceHelm) ValuesYAML() ([]byte, error) {
	if raw := strings.TrimSpace(string(h.ValuesObject)); raw != "" && raw != "null" {
		b, err := yaml.JSONToYAML(h.ValuesObject)
		if err != nil {
			return nil, fmt.Errorf("spec.source.helm.valuesObject: %w", err)
		}
		return b, nil
	}
	return []byte(h.Values), nil
}

// ManifestGeneratePathsAnnotation is Argo CD's annotation naming the paths an
// Application's manifests depend on.
const ManifestGeneratePathsAnnotation = "argocd.argoproj.io/manifest-generate-paths"

// AppSourceKustomize is spec.source.kustomize: settings Argo CD turns into
// "kustomize edit" calls before building.
type AppSourceKustomize struct {
	NamePrefix        string            `json:"namePrefix,omitempty"`
	NameSuffix        string            `json:"nameSuffix,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	CommonLabels      map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations map[string]string `json:"commonAnnotations,omitempty"`
	// Images are "kustomize edit set image" arguments.
	Images     []string               `json:"images,omitempty"`
	Replicas   []AppKustomizeReplicas `json:"replicas,omitempty"`
	Components []string               `json:"components,omitempty"`
	// Patches are kustomization patches entries (path, patch, target, options)
	// that Argo CD appends to the kustomization's own before building.
	Patches []map[string]any `json:"patches,omitempty"`
	// ForceCommonLabels and ForceCommonAnnotations let commonLabels and
	// commonAnnotations replace keys the kustomization sets already ("kustomize
	// edit add label --force"); without them such a key fails the render.
	ForceCommonLabels      bool `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations bool `json:"forceCommonAnnotations,omitempty"`
	// LabelWithoutSelector adds commonLabels as labels that leave selectors
	// alone, LabelIncludeTemplates (with it) labels pod templates too.
	LabelWithoutSelector  bool `json:"labelWithoutSelector,omitempty"`
	LabelIncludeTemplates bool `json:"labelIncludeTemplates,omitempty"`
	// CommonAnnotationsEnvsubst substitutes $ARGOCD_APP_* variables in
	// commonAnnotations values (images and commonLabels always are).
	CommonAnnotationsEnvsubst bool `json:"commonAnnotationsEnvsubst,omitempty"`
	// IgnoreMissingComponents drops components whose directory holds no
	// kustomization instead of failing the render.
	IgnoreMissingComponents bool `json:"ignoreMissingComponents,omitempty"`
	// Version names the kustomize binary (argocd-cm kustomize.path.<version>)
	// Argo CD builds with.
	Version string `json:"version,omitempty"`
	// KubeVersion and APIVersions reach only Helm charts inflated by kustomize
	// (--enable-helm in kustomize.buildOptions).
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// Unsupported names the options set on the Application that this package does
	// not read (an option of a later Argo CD). Argo CD applies them at render time,
	// so a render that ignored them would verify something Argo CD never deploys:
	// callers refuse such apps instead.
	Unsupported []string `json:"-"`
}

// kustomizeOptionsRead are the spec.source.kustomize keys AppSourceKustomize
// carries: every option of Argo CD 3.6's ApplicationSourceKustomize.
var kustomizeOptionsRead = map[string]bool{
	"namePrefix": true, "nameSuffix": true, "namespace": true, "commonLabels": true,
	"commonAnnotations": true, "images": true, "replicas": true, "components": true, "patches": true, "version": true,
	"forceCommonLabels": true, "forceCommonAnnotations": true, "labelWithoutSelector": true, "labelIncludeTemplates": true,
	"commonAnnotationsEnvsubst": true, "ignoreMissingComponents": true, "kubeVersion": true, "apiVersions": true,
}

// UnmarshalJSON decodes the options and records every other option that is set.
func (k *AppSourceKustomize) UnmarshalJSON(data []byte) error {
	type plain AppSourceKustomize
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for key, raw := range all {
		if kustomizeOptionsRead[key] || isZeroJSON(raw) {
			continue
		}
		p.Unsupported = append(p.Unsupported, key)
	}
	sort.Strings(p.Unsupported)
	*k = AppSourceKustomize(p)
	return nil
}

// isZeroJSON reports whether a JSON value is null, false, 0, "" or an empty
// collection: an option written but not in effect.
func isZeroJSON(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return true
	}
	return false
}

// AppKustomizeReplicas is one entry of spec.source.kustomize.replicas; Argo CD
// accepts the count as a number or a string.
type AppKustomizeReplicas struct {
	Name  string             `json:"name"`
	Count intstr.IntOrString `json:"count"`
}

// AppSourceDirectory is spec.source.directory.
type AppSourceDirectory struct {
	Recurse bool   `json:"recurse,omitempty"`
	Include string `json:"include,omitempty"`
	Exclude string `json:"exclude,omitempty"`
	// DisableExtensionFilter makes include and exclude alone decide which
	// files are manifests, whatever their extension (web-db.yaml.sealed).
	DisableExtensionFilter bool `json:"disableExtensionFilter,omitempty"`
}

// AppDestination is spec.destination.
type AppDestination struct {
	Server    string `json:"server,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// InClusterServer is the address Argo CD gives the cluster it runs in.
const InClusterServer = "https://kubernetes.default.svc"

// InCluster reports whether the Application deploys to the cluster Argo CD runs
// in (the one its Application resource is read from): Argo CD names that
// cluster "in-cluster" at InClusterServer.
func (d AppDestination) InCluster() bool {
	return d.Server == InClusterServer || (d.Server == "" && d.Name == "in-cluster")
}

// AppSyncPolicy is spec.syncPolicy.
type AppSyncPolicy struct {
	Automated   *AppSyncAutomated `json:"automated,omitempty"`
	SyncOptions []string          `json:"syncOptions,omitempty"`
}

// AppSyncAutomated is spec.syncPolicy.automated. Enabled (Argo CD 3.x) switches
// automation off while keeping its settings; absent means enabled.
type AppSyncAutomated struct {
	Prune    bool  `json:"prune,omitempty"`
	SelfHeal bool  `json:"selfHeal,omitempty"`
	Enabled  *bool `json:"enabled,omitempty"`
}

// AppStatus is status of an Application as the Argo CD controller writes it.
type AppStatus struct {
	Resources      []AppResourceStatus `json:"resources,omitempty"`
	Sync           AppSyncStatus       `json:"sync"`
	Health         AppHealth           `json:"health"`
	SourceType     string              `json:"sourceType,omitempty"`
	SourceTypes    []string            `json:"sourceTypes,omitempty"`
	Conditions     []AppCondition      `json:"conditions,omitempty"`
	OperationState *AppOperationState  `json:"operationState,omitempty"`
	ReconciledAt   string              `json:"reconciledAt,omitempty"`
	// ControllerNamespace is the namespace of the Argo CD controller that reconciles
	// the Application (Argo CD 2.5 and later); Applications there are tracked by name
	// alone.
	ControllerNamespace string `json:"controllerNamespace,omitempty"`
}

// AppResourceStatus is one entry of status.resources: a resource the Application
// manages, with its own sync and health status.
type AppResourceStatus struct {
	Group           string     `json:"group,omitempty"`
	Version         string     `json:"version,omitempty"`
	Kind            string     `json:"kind"`
	Namespace       string     `json:"namespace,omitempty"`
	Name            string     `json:"name"`
	Status          string     `json:"status,omitempty"`
	Health          *AppHealth `json:"health,omitempty"`
	Hook            bool       `json:"hook,omitempty"`
	RequiresPruning bool       `json:"requiresPruning,omitempty"`
}

// Ref returns the resource the entry names.
func (r AppResourceStatus) Ref() ResourceRef {
	return ResourceRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// AppSyncStatus is status.sync: Synced, OutOfSync or Unknown, against which revision.
type AppSyncStatus struct {
	Status    string   `json:"status,omitempty"`
	Revision  string   `json:"revision,omitempty"`
	Revisions []string `json:"revisions,omitempty"`
}

// AppHealth is a health status (Healthy, Progressing, Degraded, Suspended, Missing,
// Unknown) with an optional message.
type AppHealth struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// AppCondition is one entry of status.conditions. Argo CD's condition types end in
// "Warning" or "Error".
type AppCondition struct {
	Type               string `json:"type"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// AppOperationState is status.operationState: the last or current sync operation.
type AppOperationState struct {
	Phase      string         `json:"phase,omitempty"`
	Message    string         `json:"message,omitempty"`
	StartedAt  string         `json:"startedAt,omitempty"`
	FinishedAt string         `json:"finishedAt,omitempty"`
	SyncResult *AppSyncResult `json:"syncResult,omitempty"`
}

// HealthAssessedAfterSync reports whether status.health was computed after the last
// sync operation finished. Argo CD records the end of a sync first and then compares
// the Application again (a full comparison, which sets reconciledAt), so until
// reconciledAt reaches finishedAt the health may still describe the objects as they
// were before the sync. Both times are whole seconds: a comparison in the same second
// counts as after. Without either time nothing shows the health is older, and it
// counts as assessed.
func (s AppStatus) HealthAssessedAfterSync() bool {
	if s.OperationState == nil {
		return true
	}
	finished, err := time.Parse(time.RFC3339, s.OperationState.FinishedAt)
	if err != nil {
		return true
	}
	reconciled, err := time.Parse(time.RFC3339, s.ReconciledAt)
	if err != nil {
		return true
	}
	return !reconciled.Before(finished)
}

// AppSyncResult is status.operationState.syncResult.
type AppSyncResult struct {
	Revision  string   `json:"revision,omitempty"`
	Revisions []string `json:"revisions,omitempty"`
}

// Argo CD's sync statuses, health statuses and operation phases.
const (
	SyncSynced    = "Synced"
	SyncOutOfSync = "OutOfSync"
	SyncUnknown   = "Unknown"

	HealthHealthy     = "Healthy"
	HealthProgressing = "Progressing"
	HealthDegraded    = "Degraded"
	HealthSuspended   = "Suspended"
	HealthMissing     = "Missing"
	HealthUnknown     = "Unknown"

	PhaseRunning     = "Running"
	PhaseTerminating = "Terminating"
	PhaseFailed      = "Failed"
	PhaseError       = "Error"
	PhaseSucceeded   = "Succeeded"
)

// applicationObject mirrors the JSON layout of an Application for decoding.
type applicationObject struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Generation  int64             `json:"generation"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec   AppSpec   `json:"spec"`
	Status AppStatus `json:"status"`
}

// ParseApplication decodes an Application from its unstructured form (as returned by
// a dynamic client). Unknown fields are ignored; a field of the wrong type is an error.
func ParseApplication(obj map[string]any) (Application, error) {
	var o applicationObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &o); err != nil {
		name := nestedString(obj, "metadata", "name")
		ns := nestedString(obj, "metadata", "namespace")
		return Application{}, fmt.Errorf("decode application %s/%s: %w", ns, name, err)
	}
	return o.application()
}

// nestedString reads a string field for error messages; anything else reads as "".
func nestedString(obj map[string]any, fields ...string) string {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[f]
	}
	s, _ := cur.(string)
	return s
}

// DecodeApplication decodes one Application from its JSON form.
func DecodeApplication(data []byte) (Application, error) {
	var o applicationObject
	if err := json.Unmarshal(data, &o); err != nil {
		return Application{}, fmt.Errorf("decode application: %w", err)
	}
	return o.application()
}

// DecodeApplicationList decodes one page of an ApplicationList answer of the API
// server, with the token for the next page ("" on the last). An item that does not
// decode is left out and reported in invalid, so one bad object does not hide the
// others.
func DecodeApplicationList(data []byte) (apps []Application, continueToken string, invalid []error, err error) {
	var typed struct {
		Metadata listMeta            `json:"metadata"`
		Items    []applicationObject `json:"items"`
	}
	if json.Unmarshal(data, &typed) == nil {
		apps = make([]Application, 0, len(typed.Items))
		for i := range typed.Items {
			app, err := typed.Items[i].application()
			if err != nil {
				invalid = append(invalid, err)
				continue
			}
			apps = append(apps, app)
		}
		return apps, typed.Metadata.Continue, invalid, nil
	}
	// Some item has a field of the wrong type: decode item by item.
	var raw struct {
		Metadata listMeta          `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, "", nil, fmt.Errorf("decode application list: %w", err)
	}
	for _, item := range raw.Items {
		var o applicationObject
		if err := json.Unmarshal(item, &o); err != nil {
			var id struct {
				Metadata struct{ Name, Namespace string } `json:"metadata"`
			}
			_ = json.Unmarshal(item, &id)
			invalid = append(invalid, fmt.Errorf("decode application %s/%s: %w", id.Metadata.Namespace, id.Metadata.Name, err))
			continue
		}
		app, err := o.application()
		if err != nil {
			invalid = append(invalid, err)
			continue
		}
		apps = append(apps, app)
	}
	return apps, raw.Metadata.Continue, invalid, nil
}

type listMeta struct {
	Continue string `json:"continue"`
}

func (o *applicationObject) application() (Application, error) {
	if o.Metadata.Name == "" {
		return Application{}, fmt.Errorf("decode application: metadata.name is empty")
	}
	return Application{
		Name:       o.Metadata.Name,
		Namespace:  o.Metadata.Namespace,
		Generation: o.Metadata.Generation,
		// Read from the decoded map, then dropped with it.
		ManifestGeneratePaths: o.Metadata.Annotations[ManifestGeneratePathsAnnotation],
		Spec:                  o.Spec,
		Status:                o.Status,
	}, nil
}

// Automated reports whether automated sync is on.
func (a *Application) Automated() bool {
	p := a.Spec.SyncPolicy
	if p == nil || p.Automated == nil {
		return false
	}
	return p.Automated.Enabled == nil || *p.Automated.Enabled
}

// SelfHeal reports whether Argo CD reverts drift in the cluster on its own.
func (a *Application) SelfHeal() bool {
	return a.Automated() && a.Spec.SyncPolicy.Automated.SelfHeal
}

// Level is how strongly the Application defends its resources against direct change.
func (a *Application) Level() Level {
	switch {
	case a.SelfHeal():
		return LevelSelfHeal
	case a.Automated():
		return LevelAuto
	default:
		return LevelManual
	}
}

// HasMultipleSources reports whether the Application lists its sources in
// spec.sources. Argo CD then ignores spec.source, even when it is set too.
func (a *Application) HasMultipleSources() bool { return len(a.Spec.Sources) > 0 }

// Sources returns the sources Argo CD renders: spec.sources for a multi-source
// Application (spec.source is ignored then, as Argo CD ignores it), else
// spec.source.
func (a *Application) Sources() []AppSource {
	if a.HasMultipleSources() {
		return a.Spec.Sources
	}
	if a.Spec.Source != nil {
		return []AppSource{*a.Spec.Source}
	}
	return nil
}

// PrimarySource returns the source a change goes to: spec.source, or the first entry
// of spec.sources. When that entry deploys a chart from a Helm repository and
// reads values files of a ref source ("$ref/..."), a change goes to those
// values: the ref source is returned, its path the directory of the first
// values file read from it. ok is false when the Application has no source.
func (a *Application) PrimarySource() (src AppSource, ok bool) {
	s := a.Sources()
	if len(s) == 0 {
		return AppSource{}, false
	}
	if s[0].Chart != "" && s[0].Helm != nil {
		for _, f := range s[0].Helm.ValueFiles {
			name, rest, _ := strings.Cut(f, "/")
			for _, ref := range s[1:] {
				if ref.Ref != "" && name == "$"+ref.Ref {
					ref.Path = path.Dir(rest)
					return ref, true
				}
			}
		}
	}
	return s[0], true
}

// Chart names the chart the Application deploys from a Helm repository
// ("redis 18.1.0 from https://charts.example.com"): that of spec.source, or of
// the first entry of spec.sources; "" when it deploys none.
func (a *Application) Chart() string {
	s := a.Sources()
	if len(s) == 0 || s[0].Chart == "" {
		return ""
	}
	return fmt.Sprintf("%s %s from %s", s[0].Chart, s[0].TargetRevision, s[0].RepoURL)
}

// DeploysBranch reports whether a source's targetRevision deploys branch. The
// "refs/heads/" prefix is optional; an empty revision or HEAD follows the default
// branch and counts as deploying any (so a change there is verified for it too), as
// does every revision when branch is "" (not known).
func DeploysBranch(targetRevision, branch string) bool {
	rev := strings.TrimPrefix(targetRevision, "refs/heads/")
	return rev == "" || rev == "HEAD" || branch == "" || rev == strings.TrimPrefix(branch, "refs/heads/")
}

// SourceType returns status.sourceType, or the first of status.sourceTypes.
func (a *Application) SourceType() string {
	if a.Status.SourceType != "" || len(a.Status.SourceTypes) == 0 {
		return a.Status.SourceType
	}
	return a.Status.SourceTypes[0]
}

// Lists reports whether status.resources names the object (any version).
func (a *Application) Lists(ref ResourceRef) bool {
	for _, r := range a.Status.Resources {
		if r.Ref().SameObject(ref) {
			return true
		}
	}
	return false
}

// AppKey names an Application. An empty Namespace means Argo CD's control-plane
// namespace, which is not always known to the service.
type AppKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String formats the key as "namespace/name", or "name" without a namespace.
func (k AppKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
