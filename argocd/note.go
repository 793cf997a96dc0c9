package argocd

import "fmt"

// OwnershipNote is the one line said with every answer about a resource or an
// Application, so whoever proposes a change knows beforehand who owns the resource
// and what Argo CD will do to a direct change.
func OwnershipNote(app AppKey, level Level) string {
	switch level {
	case LevelSelfHeal:
		return fmt.Sprintf("managed by Argo CD app %s with self-heal", app)
	case LevelAuto:
		return fmt.Sprintf("managed by Argo CD app %s with automated sync (no self-heal)", app)
	case LevelManual:
		return fmt.Sprintf("managed by Argo CD app %s with manual sync", app)
	case LevelUnknown:
		return fmt.Sprintf("managed by Argo CD app %s; its sync policy could not be read", app)
	default:
		return "not managed by Argo CD: a direct change stays as made"
	}
}

// OwnershipNote is the decision's one-line ownership: the managing Application at
// the decision's level, none, or unknown when the cluster could not be read.
func (d Decision) OwnershipNote() string {
	switch {
	case !d.Known:
		return fmt.Sprintf("ownership unknown: the cluster could not be read (%s), so no pull request is made", d.Failure)
	case d.Path == PathGit:
		return OwnershipNote(d.strongestApp(), d.Level)
	default:
		return OwnershipNote(AppKey{}, LevelNone)
	}
}
