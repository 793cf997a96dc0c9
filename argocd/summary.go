package argocd

import (
	"fmt"
	"sort"
	"strings"
)

// AppList is the overview of a cluster's Applications shown to people.
type AppList struct {
	Total     int `json:"total"`
	Synced    int `json:"synced"`
	OutOfSync int `json:"out_of_sync"`
	// SelfHeal counts Applications that revert direct changes within seconds.
	SelfHeal int `json:"self_heal"`
	// Repos are the distinct source repository URLs, as written in the Applications.
	Repos []string `json:"repos"`
	// Apps lists Applications with problems first, then by namespace and name.
	Apps []AppListItem `json:"apps"`
}

// AppListItem is one Application of an AppList.
type AppListItem struct {
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	Project        string `json:"project"`
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path"`
	TargetRevision string `json:"targetRevision"`
	Sync           string `json:"sync"`
	Health         string `json:"health"`
	Level          Level  `json:"level"`
	// Problems say in words what needs attention; empty for a healthy, synced app.
	Problems []string `json:"problems,omitempty"`
	severity int
}

// SummarizeApps builds the list view of apps.
func SummarizeApps(apps []Application) AppList {
	l := AppList{Total: len(apps), Repos: []string{}, Apps: make([]AppListItem, 0, len(apps))}
	repos := map[string]bool{}
	for i := range apps {
		a := &apps[i]
		switch a.Status.Sync.Status {
		case SyncSynced:
			l.Synced++
		case SyncOutOfSync:
			l.OutOfSync++
		}
		if a.SelfHeal() {
			l.SelfHeal++
		}
		for _, s := range a.Sources() {
			if s.RepoURL != "" && !repos[s.RepoURL] {
				repos[s.RepoURL] = true
				l.Repos = append(l.Repos, s.RepoURL)
			}
		}
		item := AppListItem{
			Name: a.Name, Namespace: a.Namespace, Project: a.Spec.Project,
			Sync: a.Status.Sync.Status, Health: a.Status.Health.Status, Level: a.Level(),
		}
		if src, ok := a.PrimarySource(); ok {
			item.RepoURL, item.Path, item.TargetRevision = src.RepoURL, src.Path, src.TargetRevision
		}
		item.Problems, item.severity = problems(a)
		l.Apps = append(l.Apps, item)
	}
	sort.Strings(l.Repos)
	sort.SliceStable(l.Apps, func(i, j int) bool { return l.Apps[i].Position().Before(l.Apps[j].Position()) })
	return l
}

// AppPosition is where an item stands in an AppList's order: by severity of its
// problems (the worst first), then by namespace and name. No two Applications
// share one, so a listing split into pages resumes after the last item of a page
// (a cursor) without repeating or skipping one whose problems stayed the same.
type AppPosition struct {
	Severity  int
	Namespace string
	Name      string
}

// Position is the item's place in its AppList's order.
func (i AppListItem) Position() AppPosition {
	return AppPosition{Severity: i.severity, Namespace: i.Namespace, Name: i.Name}
}

// Before reports whether p comes before q in an AppList.
func (p AppPosition) Before(q AppPosition) bool {
	if p.Severity != q.Severity {
		return p.Severity > q.Severity
	}
	if p.Namespace != q.Namespace {
		return p.Namespace < q.Namespace
	}
	return p.Name < q.Name
}

// problems describes what needs attention in a, with a severity for ordering: failed
// operations and error conditions first, then unhealthy, then out of sync.
func problems(a *Application) ([]string, int) {
	var out []string
	severity := 0
	raise := func(s int) {
		if s > severity {
			severity = s
		}
	}
	if op := a.Status.OperationState; op != nil && (op.Phase == PhaseFailed || op.Phase == PhaseError) {
		out = append(out, fmt.Sprintf("last sync %s: %s", strings.ToLower(op.Phase), op.Message))
		raise(3)
	}
	for _, c := range a.Status.Conditions {
		if isErrorCondition(c) {
			out = append(out, c.Type+": "+c.Message)
			raise(3)
		}
	}
	switch h := a.Status.Health.Status; h {
	case HealthDegraded, HealthMissing:
		out = append(out, "health "+h)
		raise(2)
	case HealthUnknown, "":
		out = append(out, "health unknown")
		raise(1)
	}
	switch s := a.Status.Sync.Status; s {
	case SyncOutOfSync:
		out = append(out, "out of sync")
		raise(1)
	case SyncUnknown, "":
		out = append(out, "sync status unknown")
		raise(1)
	}
	return out, severity
}

// AppDetail is the detail view of one Application.
type AppDetail struct {
	Name       string      `json:"name"`
	Namespace  string      `json:"namespace"`
	Project    string      `json:"project"`
	Sources    []AppSource `json:"sources"`
	SourceType string      `json:"sourceType"`
	Sync       string      `json:"sync"`
	// Revision is the revision the Application is compared to (status.sync.revision
	// or, for multi-source apps, the first of status.sync.revisions).
	Revision      string `json:"revision"`
	Health        string `json:"health"`
	HealthMessage string `json:"healthMessage,omitempty"`
	Level         Level  `json:"level"`
	Automated     bool   `json:"automated"`
	SelfHeal      bool   `json:"self_heal"`
	// Operation is the last or running sync; nil when none was recorded.
	Operation *AppOperationState `json:"operation,omitempty"`
	// OutOfSync are the resources Argo CD reports as differing from Git.
	OutOfSync []AppResourceStatus `json:"outOfSync"`
	// Warnings and Errors split status.conditions by their type suffix; types with
	// neither suffix are shown as warnings.
	Warnings []AppCondition `json:"warnings"`
	Errors   []AppCondition `json:"errors"`
}

// DescribeApp builds the detail view of a.
func DescribeApp(a Application) AppDetail {
	d := AppDetail{
		Name: a.Name, Namespace: a.Namespace, Project: a.Spec.Project,
		Sources: append([]AppSource{}, a.Sources()...), SourceType: a.SourceType(),
		Sync: a.Status.Sync.Status, Revision: a.Status.Sync.Revision,
		Health: a.Status.Health.Status, HealthMessage: a.Status.Health.Message,
		Level: a.Level(), Automated: a.Automated(), SelfHeal: a.SelfHeal(),
		Operation: a.Status.OperationState,
		OutOfSync: []AppResourceStatus{}, Warnings: []AppCondition{}, Errors: []AppCondition{},
	}
	if d.Revision == "" && len(a.Status.Sync.Revisions) > 0 {
		d.Revision = a.Status.Sync.Revisions[0]
	}
	for _, r := range a.Status.Resources {
		if r.Status == SyncOutOfSync {
			d.OutOfSync = append(d.OutOfSync, r)
		}
	}
	for _, c := range a.Status.Conditions {
		if isErrorCondition(c) {
			d.Errors = append(d.Errors, c)
		} else {
			d.Warnings = append(d.Warnings, c)
		}
	}
	return d
}

func isErrorCondition(c AppCondition) bool { return strings.HasSuffix(c.Type, "Error") }
