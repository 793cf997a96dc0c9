package argocd

import (
	"fmt"
	"strings"
)

// Options configure how Argo CD's marks are read; they mirror settings of the Argo CD
// instance that runs against the cluster (argocd-cm).
type Options struct {
	// InstanceLabelKey is argocd-cm "application.instanceLabelKey";
	// DefaultInstanceLabel when empty.
	InstanceLabelKey string
	// InstallationID is argocd-cm "installationID". When set, a tracking annotation
	// counts as this instance's only if the resource carries the same installation id;
	// otherwise another Argo CD instance manages it.
	InstallationID string
	// ControlPlaneNamespace is the namespace Argo CD runs in. When empty it is taken
	// from status.controllerNamespace of the Applications.
	ControlPlaneNamespace string
}

func (o Options) labelKey() string {
	if o.InstanceLabelKey == "" {
		return DefaultInstanceLabel
	}
	return o.InstanceLabelKey
}

// Evidence is what shows that an Application manages a resource.
type Evidence string

// Kinds of evidence, strongest first.
const (
	// EvidenceAnnotation: the resource carries a tracking-id annotation naming itself.
	EvidenceAnnotation Evidence = "annotation"
	// EvidenceLabel: the instance label names an Application that lists the resource.
	EvidenceLabel Evidence = "label"
	// EvidenceStatus: an Application lists the resource in status.resources though
	// the resource carries no usable mark (not created yet, or tracked by a label key
	// other than the configured one).
	EvidenceStatus Evidence = "status"
)

// Ownership is the answer to "does Argo CD manage this resource, and how strongly".
type Ownership struct {
	Managed bool     `json:"managed"`
	By      Evidence `json:"by,omitempty"`
	// App names the managing Application; zero when not managed.
	App AppKey `json:"application"`
	// Application is the managing Application when it was found in the cluster; nil
	// for an Application elsewhere (hub-and-spoke, another Argo CD instance) or when
	// Applications could not be read.
	Application *Application `json:"-"`
	Level       Level        `json:"level"`
	// Undetermined is set when the answer needs Applications that could not be read:
	// the resource has only an instance label, which Helm sets too.
	Undetermined bool `json:"undetermined,omitempty"`
	// Reason says in a sentence why the answer is what it is.
	Reason string `json:"reason"`
	// Warnings name marks that were present but not trusted.
	Warnings []string `json:"warnings,omitempty"`
}

// Own decides who manages res. apps is the cluster's Applications, or nil when they
// could not be read. Only a tracking annotation is Argo CD's own mark; an instance
// label counts only when the Application it names lists the resource.
func Own(res Resource, apps *AppIndex, opts Options) Ownership {
	var warnings []string
	if v := res.Annotations[TrackingIDAnnotation]; v != "" {
		o, warning, ok := ownByAnnotation(res, v, apps, opts)
		if ok {
			return o
		}
		warnings = append(warnings, warning)
	}
	if v := res.Labels[opts.labelKey()]; v != "" {
		if apps == nil {
			return Ownership{
				Level:        LevelUnknown,
				Undetermined: true,
				Reason: fmt.Sprintf("%s carries the label %s=%s, which Helm sets too; it counts only if an Argo CD Application lists the resource, and the Applications could not be read.",
					res.Ref, opts.labelKey(), v),
				Warnings: warnings,
			}
		}
		app, key := apps.Resolve(v, res.Ref, opts.ControlPlaneNamespace)
		if app != nil && app.Lists(res.Ref) {
			return Ownership{
				Managed: true, By: EvidenceLabel, App: key, Application: app, Level: app.Level(),
				Reason:   fmt.Sprintf("%s is managed by Argo CD application %s (label %s, confirmed by the application's status.resources).", res.Ref, key, opts.labelKey()),
				Warnings: append(warnings, sourceWarnings(app)...),
			}
		}
		why := "no such Application exists in the cluster"
		if app != nil {
			why = "that Application does not list it in status.resources"
		}
		warnings = append(warnings, fmt.Sprintf("The label %s=%s is not trusted: %s (Helm sets this label too).", opts.labelKey(), v, why))
	}
	if apps != nil {
		if listing := apps.Listing(res.Ref); len(listing) > 0 {
			app := listing[0]
			if len(listing) > 1 {
				warnings = append(warnings, fmt.Sprintf("Several Argo CD applications list %s: %s.", res.Ref, joinKeys(listing)))
			}
			return Ownership{
				Managed: true, By: EvidenceStatus, App: app.Key(), Application: app, Level: app.Level(),
				Reason:   fmt.Sprintf("%s is listed in status.resources of Argo CD application %s.", res.Ref, app.Key()),
				Warnings: append(warnings, sourceWarnings(app)...),
			}
		}
	}
	return Ownership{
		Level:    LevelNone,
		Reason:   fmt.Sprintf("%s carries no valid Argo CD tracking annotation of its own and no Application lists it: Argo CD does not manage it.", res.Ref),
		Warnings: warnings,
	}
}

// ownByAnnotation evaluates a tracking-id annotation. ok is false when the annotation
// is not trusted; warning then says why.
func ownByAnnotation(res Resource, value string, apps *AppIndex, opts Options) (o Ownership, warning string, ok bool) {
	id, err := ParseTrackingID(value)
	if err != nil {
		return Ownership{}, fmt.Sprintf("The tracking annotation is ignored: %v.", err), false
	}
	if !tracks(id, res.Ref) {
		return Ownership{}, fmt.Sprintf("The tracking annotation names %s, not %s: it was probably copied from that resource and is not trusted.", id.Resource(), res.Ref), false
	}
	installation := res.Annotations[InstallationIDAnnotation]
	if opts.InstallationID != "" && installation != opts.InstallationID {
		return Ownership{
			Managed: true, By: EvidenceAnnotation, App: instanceKey(id.AppInstance), Level: LevelUnknown,
			Reason: fmt.Sprintf("%s is managed by application %s of another Argo CD instance (installation id %q, this cluster's Argo CD is %q); its sync policy cannot be read here.",
				res.Ref, id.AppInstance, installation, opts.InstallationID),
		}, "", true
	}
	app, key := apps.Resolve(id.AppInstance, res.Ref, opts.ControlPlaneNamespace)
	if opts.InstallationID == "" && installation != "" && (app == nil || !app.Lists(res.Ref)) {
		// Argo CD itself ignores an annotation whose installation id is not its own. The
		// service does not know this cluster's id, so only an Application here that
		// lists the resource shows that the instance that applied it is this one.
		return Ownership{
			Managed: true, By: EvidenceAnnotation, App: key, Level: LevelUnknown,
			Reason: fmt.Sprintf("%s was applied by application %s of the Argo CD instance with installation id %q, and no Application in this cluster confirms it in status.resources: it may belong to another Argo CD instance, whose sync policy cannot be read here.",
				res.Ref, id.AppInstance, installation),
		}, "", true
	}
	if app == nil {
		where := "no such Application exists in this cluster (Argo CD may run in another cluster)"
		if apps == nil {
			where = "the Applications could not be read"
		}
		return Ownership{
			Managed: true, By: EvidenceAnnotation, App: key, Level: LevelUnknown,
			Reason: fmt.Sprintf("%s carries the tracking annotation of Argo CD application %s, but %s; its sync policy is unknown.", res.Ref, key, where),
		}, "", true
	}
	return Ownership{
		Managed: true, By: EvidenceAnnotation, App: key, Application: app, Level: app.Level(),
		Reason:   fmt.Sprintf("%s is managed by Argo CD application %s (tracking annotation).", res.Ref, key),
		Warnings: sourceWarnings(app),
	}, "", true
}

// tracks reports whether a tracking id was written for ref. Argo CD versions that
// applied namespaced manifests without a namespace wrote an empty namespace, so an
// empty id namespace matches any namespace; and Argo CD writes the app's destination
// namespace into the id of a cluster-scoped object, which its own check ignores when
// the object has no namespace.
func tracks(id TrackingID, ref ResourceRef) bool {
	return id.Group == ref.Group && id.Kind == ref.Kind && id.Name == ref.Name &&
		(id.Namespace == ref.Namespace || id.Namespace == "" || ref.Namespace == "")
}

func sourceWarnings(app *Application) []string {
	if n := len(app.Sources()); n > 1 {
		return []string{fmt.Sprintf("Argo CD application %s has %d sources; changes through Git support single-source applications only.", app.Key(), n)}
	}
	if n := len(app.Sources()); n == 0 {
		return []string{fmt.Sprintf("Argo CD application %s has no source.", app.Key())}
	}
	return nil
}

func joinKeys(apps []*Application) string {
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Key().String()
	}
	return strings.Join(names, ", ")
}
