package argocd

import "fmt"

// Level is how strongly Argo CD defends a resource against a direct change. It decides
// the warning shown with a plan.
type Level string

// Levels, weakest first. LevelUnknown ranks above LevelAuto: an Application the
// service cannot read may well self-heal, and the warning must not understate that.
const (
	// LevelNone: no Argo CD Application manages the resource.
	LevelNone Level = "none"
	// LevelManual: a direct change shows as OutOfSync until the next manual sync
	// overwrites it.
	LevelManual Level = "manual"
	// LevelAuto: automated sync without self-heal; the next sync (on any new commit)
	// overwrites a direct change.
	LevelAuto Level = "auto"
	// LevelUnknown: managed, but the sync policy could not be read.
	LevelUnknown Level = "unknown"
	// LevelSelfHeal: automated sync with self-heal; a direct change is reverted within
	// seconds.
	LevelSelfHeal Level = "self_heal"
)

var levelRank = map[Level]int{LevelNone: 0, LevelManual: 1, LevelAuto: 2, LevelUnknown: 3, LevelSelfHeal: 4}

// Stronger reports whether l warns more strongly than o.
func (l Level) Stronger(o Level) bool { return levelRank[l] > levelRank[o] }

// Strongest returns the strongest of the levels, LevelNone for none.
func Strongest(levels ...Level) Level {
	out := LevelNone
	for _, l := range levels {
		if l.Stronger(out) {
			out = l
		}
	}
	return out
}

// Warning says what Argo CD will do to a direct change of a resource managed by app
// at this level, and that the change therefore goes through Git. It is empty for
// LevelNone.
func (l Level) Warning(app AppKey) string {
	switch l {
	case LevelSelfHeal:
		return fmt.Sprintf("Argo CD application %s syncs automatically with self-heal: Argo CD will revert this within seconds if changed directly in the cluster, so the change goes through Git.", app)
	case LevelAuto:
		return fmt.Sprintf("Argo CD application %s syncs automatically: a direct change would leave it OutOfSync and be overwritten by the next sync, so the change goes through Git.", app)
	case LevelManual:
		return fmt.Sprintf("Argo CD application %s syncs manually: a direct change would show as OutOfSync and be overwritten by the next sync someone starts, so the change goes through Git.", app)
	case LevelUnknown:
		return fmt.Sprintf("Argo CD application %s manages this resource but its sync policy could not be read: Argo CD may revert a direct change within seconds, so the change goes through Git.", app)
	default:
		return ""
	}
}
