package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

const unsupportedPatches = "it sets spec.source.kustomize options that are not supported yet (patches)"

// TestPlanRefusesOnlyEditsThatReachAnUnsupportedApp: an Application render cannot
// render as Argo CD does counts only when the edit reaches it. Unreached, it is
// ignored; reached, that location is given up and the next one tried; reached by
// every location, or the target's own app, the plan is refused naming why.
func TestPlanRefusesOnlyEditsThatReachAnUnsupportedApp(t *testing.T) {
	shared := testtree.Write(t, map[string]string{
		"bases/web/kustomization.yaml":  "resources:\n  - deployment.yaml\n",
		"bases/web/deployment.yaml":     twoContainerDeployment,
		"overlays/a/kustomization.yaml": "resources:\n  - ../../bases/web\n",
		"overlays/b/kustomization.yaml": "resources:\n  - ../../bases/web\n",
		"apps/other/kustomization.yaml": "resources:\n  - cm.yaml\n",
		"apps/other/cm.yaml":            configMap("other"),
		"plain/deployment.yaml":         twoContainerDeployment,
	})
	a := Application{Name: "a", Path: "overlays/a", SourceType: SourceKustomize, Namespace: "a"}
	b := Application{Name: "b", Path: "overlays/b", SourceType: SourceKustomize, Namespace: "b", Unsupported: unsupportedPatches}
	other := Application{Name: "other", Path: "apps/other", SourceType: SourceKustomize, Namespace: "other", Unsupported: unsupportedPatches}
	plain := Application{Name: "plain", Path: "plain", SourceType: SourceDirectory, Namespace: "plain"}
	everything := Application{Name: "everything", Path: ".", SourceType: SourceDirectory, Namespace: "all",
		Directory: DirectoryOptions{Recurse: true}, Unsupported: unsupportedPatches}
	scale := Change{Replicas: &Replicas{Count: 5}}
	web := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

	t.Run("unreached unsupported apps are ignored", func(t *testing.T) {
		res, err := Plan(context.Background(), Request{RepoDir: shared, Apps: []Application{plain, other, b}, App: "plain", Target: web, Change: scale})
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if !res.Verification.Verified || len(res.Verification.Apps) != 1 || res.Verification.Apps[0].App != "plain" {
			t.Fatalf("verification %+v, want plain alone", res.Verification)
		}
	})
	t.Run("an app sharing the base with an unsupported one is changed in its overlay", func(t *testing.T) {
		res, err := Plan(context.Background(), Request{RepoDir: shared, Apps: []Application{a, b, other}, App: "a", Target: web, Change: scale})
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		for _, e := range res.Edits {
			if !strings.HasPrefix(e.Path, "overlays/a/") {
				t.Fatalf("edits %s, outside the overlay of a", e.Path)
			}
		}
		if len(res.Verification.Apps) != 1 || res.Verification.Apps[0].App != "a" {
			t.Fatalf("verification %+v, want a alone", res.Verification)
		}
	})
	t.Run("refreshed by the edit but not reading it", func(t *testing.T) {
		refreshed := other
		refreshed.ManifestGeneratePaths = "/"
		res, err := Plan(context.Background(), Request{RepoDir: shared, Apps: []Application{plain, refreshed}, App: "plain", Target: web, Change: scale})
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if len(res.Verification.Apps) != 1 || res.Verification.Apps[0].App != "plain" {
			t.Fatalf("verification %+v, want plain alone", res.Verification)
		}
	})
	t.Run("reached by every location", func(t *testing.T) {
		_, err := Plan(context.Background(), Request{RepoDir: shared, Apps: []Application{plain, everything}, App: "plain", Target: web, Change: scale})
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Code != CodeUnverifiableApp || !strings.Contains(ref.Reason, "application everything") ||
			!strings.Contains(ref.Reason, "(patches)") {
			t.Fatalf("got %v, want an %s refusal naming everything and its option", err, CodeUnverifiableApp)
		}
	})
	t.Run("the target's own app", func(t *testing.T) {
		_, err := Plan(context.Background(), Request{RepoDir: shared, Apps: []Application{a, b}, App: "b", Target: web, Change: scale})
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Code != CodeUnsupportedSource || ref.App != "b" || !strings.Contains(ref.Reason, "(patches)") {
			t.Fatalf("got %v, want an %s refusal of b naming its option", err, CodeUnsupportedSource)
		}
	})
}
