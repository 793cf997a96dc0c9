package argocd

import "testing"

func TestOwnershipNote(t *testing.T) {
	web := AppKey{Namespace: "argocd", Name: "web"}
	managed := func(level Level) TargetDecision {
		return TargetDecision{Ownership: Ownership{Managed: true, App: web, Level: level}}
	}
	cases := map[string]struct {
		d    Decision
		want string
	}{
		"self-heal": {Decision{Known: true, Path: PathGit, Level: LevelSelfHeal, Targets: []TargetDecision{managed(LevelSelfHeal)}},
			"managed by Argo CD app argocd/web with self-heal"},
		"automated": {Decision{Known: true, Path: PathGit, Level: LevelAuto, Targets: []TargetDecision{managed(LevelAuto)}},
			"managed by Argo CD app argocd/web with automated sync (no self-heal)"},
		"manual": {Decision{Known: true, Path: PathGit, Level: LevelManual, Targets: []TargetDecision{managed(LevelManual)}},
			"managed by Argo CD app argocd/web with manual sync"},
		"policy unreadable": {Decision{Known: true, Path: PathGit, Level: LevelUnknown, Targets: []TargetDecision{managed(LevelUnknown)}},
			"managed by Argo CD app argocd/web; its sync policy could not be read"},
		"direct": {Decision{Known: true, Path: PathDirect, Level: LevelNone, Targets: []TargetDecision{{}}},
			"not managed by Argo CD: a direct change stays as made"},
		"cluster unreadable": {Decision{Known: false, Path: PathDirect, Level: LevelUnknown, Failure: FailureUnreachable},
			"ownership unknown: the cluster could not be read (unreachable), so no pull request is made"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.d.OwnershipNote(); got != tc.want {
				t.Fatalf("OwnershipNote = %q, want %q", got, tc.want)
			}
		})
	}
}
