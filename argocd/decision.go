package argocd

import (
	"fmt"
	"sort"
	"strings"
)

// Path is how a change reaches the cluster.
type Path string

const (
	// PathGit: an Argo CD Application manages the resource; the change is a pull
	// request on the Application's source.
	PathGit Path = "git"
	// PathDirect: nothing reverts a direct change, or the answer is unknown; the
	// service makes no pull request.
	PathDirect Path = "direct"
)

// FailureClass says why a cluster read failed; each class has a different next step
// for the person asking.
type FailureClass string

const (
	// FailureNotInstalled: the cluster does not serve Argo CD's Application type.
	FailureNotInstalled FailureClass = "not_installed"
	// FailureForbidden: the service's credentials may not read the object (403).
	FailureForbidden FailureClass = "forbidden"
	// FailureUnreachable: connection refused, DNS, timeout, TLS, or credentials
	// rejected (401).
	FailureUnreachable FailureClass = "unreachable"
	// FailureNotFound: the object (or its namespace) does not exist.
	FailureNotFound FailureClass = "not_found"
	// FailureOther: any other failure of the API server.
	FailureOther FailureClass = "error"
)

// ReadError is a classified failure of one cluster read.
type ReadError struct {
	Class FailureClass `json:"class"`
	// Detail is the underlying error text.
	Detail string `json:"detail"`
	// Remedy, when set, is what the caller can do instead of the class's next step:
	// a read that fails for what it was asked (a namespaced kind without a
	// namespace) fails again however often it is retried.
	Remedy string `json:"-"`
}

// nextStep says what a person can do about a failure.
func (e *ReadError) nextStep(what string) string {
	if e.Remedy != "" {
		return fmt.Sprintf("reading %s failed (%s): %s", what, e.Detail, e.Remedy)
	}
	switch e.Class {
	case FailureNotInstalled:
		return "Argo CD's Application type (applications.argoproj.io) is not served by this cluster: if Argo CD runs in another cluster, register that cluster; otherwise nothing here is managed by Argo CD"
	case FailureForbidden:
		return fmt.Sprintf("the service's credentials for this cluster may not read %s (%s): grant them get and list on it", what, e.Detail)
	case FailureUnreachable:
		return fmt.Sprintf("the cluster's API server could not be reached while reading %s (%s): check its address, the network path and that the stored credentials are still valid, then retry", what, e.Detail)
	default:
		return fmt.Sprintf("reading %s failed (%s): retry, and check the API server if it persists", what, e.Detail)
	}
}

// TargetRead is the outcome of reading one target resource from the cluster.
type TargetRead struct {
	Ref ResourceRef
	// Resource is the live object's metadata; nil when missing or not read.
	Resource *Resource
	// Missing is set when the API server answered that the object does not exist.
	Missing bool
	// Err is set when the read failed.
	Err *ReadError
}

// DecideInput is everything the path decision looks at.
type DecideInput struct {
	// Targets are the examined targets, in request order.
	Targets []TargetRead
	// Apps is the cluster's Applications; nil when they could not be read, with
	// AppsErr saying why.
	Apps    *AppIndex
	AppsErr *ReadError
	// Skipped counts targets beyond the examined ones.
	Skipped int
	Options Options
}

// TargetDecision is the decision for one target.
type TargetDecision struct {
	Ref       ResourceRef `json:"ref"`
	Path      Path        `json:"path"`
	Known     bool        `json:"known"`
	Missing   bool        `json:"missing,omitempty"`
	Err       *ReadError  `json:"error,omitempty"`
	Ownership Ownership   `json:"ownership"`
}

// Decision is the path a change takes, with the evidence behind it.
type Decision struct {
	Path Path `json:"path"`
	// Known is false when a failed read left some target undecided; Path is then
	// PathDirect and Reason says what to fix.
	Known  bool   `json:"known"`
	Reason string `json:"reason"`
	// Failure is the class of the first failed read the decision depended on: the
	// cause of Known=false, or of a LevelUnknown warning.
	Failure FailureClass     `json:"failure,omitempty"`
	Level   Level            `json:"level"`
	Targets []TargetDecision `json:"targets"`
	Skipped int              `json:"skipped,omitempty"`
}

// Decide chooses the path from what was read. Any managed target sends the change
// to Git; a target that could not be decided makes the whole decision unknown and
// direct, because the service cannot prove that a direct change would stick.
func Decide(in DecideInput) Decision {
	d := Decision{Path: PathDirect, Known: true, Level: LevelNone, Skipped: in.Skipped}
	appsErr := in.AppsErr
	if in.Apps == nil && appsErr == nil {
		appsErr = &ReadError{Class: FailureOther, Detail: "the Applications were not read"}
	}
	var failures []string
	fail := func(e *ReadError, what string) {
		if d.Failure == "" {
			d.Failure = e.Class
		}
		failures = append(failures, e.nextStep(what))
	}
	for _, t := range in.Targets {
		td := decideTarget(t, in)
		d.Targets = append(d.Targets, td)
		switch {
		case td.Err != nil:
			d.Known = false
			fail(td.Err, t.Ref.String())
		case td.Ownership.Undetermined:
			d.Known = false
			fail(appsErr, "Argo CD Applications")
		case td.Ownership.Managed:
			d.Level = Strongest(d.Level, td.Ownership.Level)
			if td.Ownership.Application == nil && in.Apps == nil && d.Failure == "" {
				d.Failure = appsErr.Class
			}
		}
	}
	if !d.Known {
		d.Path = PathDirect
		d.Level = LevelUnknown
		d.Reason = "The path is unknown, so no pull request is made: " + strings.Join(dedupe(failures), "; ") + "."
		d.Reason += skippedSentence(len(d.Targets), in.Skipped)
		return d
	}
	var managed, unmanaged []string
	for _, td := range d.Targets {
		if td.Ownership.Managed {
			d.Path = PathGit
			managed = append(managed, td.Ownership.Reason)
		} else {
			unmanaged = append(unmanaged, td.Ownership.Reason)
		}
	}
	switch {
	case len(d.Targets) == 0:
		d.Reason = "No target resource was given."
	case d.Path == PathGit:
		d.Reason = strings.Join(managed, " ") + " " + gitSourceSentence(d.Targets)
		if len(unmanaged) > 0 {
			d.Reason += " Not managed: " + strings.Join(unmanaged, " ")
		}
	default:
		d.Reason = strings.Join(unmanaged, " ") + " A direct change stays as made."
	}
	d.Reason += skippedSentence(len(d.Targets), in.Skipped)
	return d
}

func skippedSentence(examined, skipped int) string {
	if skipped == 0 {
		return ""
	}
	return fmt.Sprintf(" Only the first %d of %d targets were examined.", examined, examined+skipped)
}

func decideTarget(t TargetRead, in DecideInput) TargetDecision {
	td := TargetDecision{Ref: t.Ref, Path: PathDirect, Known: true, Missing: t.Missing, Err: t.Err}
	switch {
	case t.Err != nil:
		td.Known = false
		td.Ownership = Ownership{Level: LevelUnknown, Reason: "The resource could not be read."}
		return td
	case t.Missing || t.Resource == nil:
		// A missing object may still be one Argo CD is about to create.
		td.Ownership = Own(Resource{Ref: t.Ref}, in.Apps, in.Options)
		if !td.Ownership.Managed {
			td.Ownership.Reason = fmt.Sprintf("%s does not exist in the cluster and no Argo CD Application lists it.", t.Ref)
		}
	default:
		td.Ownership = Own(*t.Resource, in.Apps, in.Options)
	}
	if td.Ownership.Undetermined {
		td.Known = false
	}
	if td.Ownership.Managed {
		td.Path = PathGit
	}
	return td
}

// gitSourceSentence names where the change will be made.
func gitSourceSentence(targets []TargetDecision) string {
	var parts []string
	seen := map[AppKey]bool{}
	for _, td := range targets {
		o := td.Ownership
		if !o.Managed || seen[o.App] {
			continue
		}
		seen[o.App] = true
		if o.Application == nil {
			parts = append(parts, fmt.Sprintf("The source of application %s is unknown to the service, so the pull request cannot be prepared here; change it in that application's repository.", o.App))
			continue
		}
		src, ok := o.Application.PrimarySource()
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("Change it in Git: %s, path %q, revision %q.", src.RepoURL, src.Path, src.TargetRevision))
	}
	return strings.Join(parts, " ")
}

// Payload is the Argo CD part of a plan, stored with it and shown to people.
type Payload struct {
	Summary      string            `json:"summary"`
	Level        Level             `json:"level"`
	Warning      string            `json:"warning"`
	Applications []PayloadApp      `json:"applications"`
	Resources    []PayloadResource `json:"resources"`
}

// PayloadApp describes a managing Application. Source fields are empty for an
// Application the service could not read.
type PayloadApp struct {
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path"`
	TargetRevision string `json:"targetRevision"`
	SourceType     string `json:"sourceType"`
	// Chart names the chart the Application deploys from a Helm repository
	// (see Application.Chart); the source fields are then those of its values.
	Chart     string `json:"chart,omitempty"`
	Automated bool   `json:"automated"`
	SelfHeal  bool   `json:"self_heal"`
}

// PayloadResource is one examined target and the Application managing it ("" when
// none).
type PayloadResource struct {
	Group       string `json:"group"`
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Application string `json:"application"`
}

// Payload builds the plan payload of the decision.
func (d Decision) Payload() Payload {
	p := Payload{Level: d.Level, Applications: []PayloadApp{}, Resources: []PayloadResource{}}
	seen := map[AppKey]bool{}
	var warnings []string
	for _, td := range d.Targets {
		o := td.Ownership
		res := PayloadResource{Group: td.Ref.Group, Kind: td.Ref.Kind, Namespace: td.Ref.Namespace, Name: td.Ref.Name}
		if o.Managed {
			res.Application = o.App.String()
			if !seen[o.App] {
				seen[o.App] = true
				p.Applications = append(p.Applications, payloadApp(o))
			}
		}
		p.Resources = append(p.Resources, res)
		warnings = append(warnings, o.Warnings...)
	}
	sort.Slice(p.Applications, func(i, j int) bool {
		a, b := p.Applications[i], p.Applications[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	lead := ""
	switch {
	case !d.Known:
		lead = "The cluster could not be read, so it is unknown whether Argo CD manages the target: if it does, a direct change may be reverted within seconds."
	case d.Level != LevelNone:
		lead = d.Level.Warning(d.strongestApp())
	}
	if lead != "" {
		warnings = append([]string{lead}, warnings...)
	}
	p.Warning = strings.Join(dedupe(warnings), " ")
	p.Summary = d.summary()
	return p
}

// strongestApp returns the Application whose level is the decision's level.
func (d Decision) strongestApp() AppKey {
	for _, td := range d.Targets {
		if td.Ownership.Managed && td.Ownership.Level == d.Level {
			return td.Ownership.App
		}
	}
	return AppKey{}
}

func (d Decision) summary() string {
	n := len(d.Targets)
	switch {
	case !d.Known:
		return fmt.Sprintf("Path unknown (%s): no pull request is made.", d.Failure)
	case d.Path == PathGit:
		var apps []string
		seen := map[AppKey]bool{}
		managed := 0
		for _, td := range d.Targets {
			if td.Ownership.Managed {
				managed++
				if !seen[td.Ownership.App] {
					seen[td.Ownership.App] = true
					apps = append(apps, td.Ownership.App.String())
				}
			}
		}
		return fmt.Sprintf("Git: %d of %d target(s) managed by Argo CD application %s.", managed, n, strings.Join(apps, ", "))
	default:
		return fmt.Sprintf("Direct: %d target(s), none managed by Argo CD.", n)
	}
}

func payloadApp(o Ownership) PayloadApp {
	pa := PayloadApp{Name: o.App.Name, Namespace: o.App.Namespace}
	a := o.Application
	if a == nil {
		return pa
	}
	if src, ok := a.PrimarySource(); ok {
		pa.RepoURL, pa.Path, pa.TargetRevision = src.RepoURL, src.Path, src.TargetRevision
	}
	pa.SourceType = a.SourceType()
	pa.Chart = a.Chart()
	pa.Automated = a.Automated()
	pa.SelfHeal = a.SelfHeal()
	return pa
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
