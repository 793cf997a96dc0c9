package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// TestTransformerOverrideNamesTheTransformer: a patch change of a label or
// annotation a transformer of the app's kustomization sets to another value
// is refused transformer_override naming the transformer and its file, where
// kustomize applies it to the changed field (commonLabels and
// commonAnnotations on pod templates too, a labels entry there only with
// includeTemplates or includeSelectors, a builtin transformer where its
// fieldSpecs say); a field the transformer does not reach, or a value it
// already sets, is not.
func TestTransformerOverrideNamesTheTransformer(t *testing.T) {
	const base = "resources:\n- deploy.yaml\n"
	cases := map[string]struct {
		kustomization string
		files         map[string]string
		set           FieldValue
		// want is the reason's start, or "" for a plan that is not refused so.
		want string
	}{
		"commonLabels on the pod template": {
			kustomization: base + "commonLabels:\n  team: shop\n",
			set:           FieldValue{Path: "/spec/template/metadata/labels/team", Value: "payments"},
			want:          `the label "team" (spec.template.metadata.labels.team) is set by commonLabels in app/kustomization.yaml:`,
		},
		"a labels entry with includeTemplates": {
			kustomization: base + "labels:\n- pairs: {team: shop}\n- pairs: {tier: web}\n  includeTemplates: true\n",
			set:           FieldValue{Path: "/spec/template/metadata/labels/tier", Value: "api"},
			want:          `the label "tier" (spec.template.metadata.labels.tier) is set by labels[1] in app/kustomization.yaml:`,
		},
		"commonAnnotations": {
			kustomization: base + "commonAnnotations:\n  owner: shop\n",
			set:           FieldValue{Path: "/metadata/annotations/owner", Value: "payments"},
			want:          `the annotation "owner" (metadata.annotations.owner) is set by commonAnnotations in app/kustomization.yaml:`,
		},
		"an inline AnnotationsTransformer": {
			kustomization: base + "transformers:\n- |-\n  apiVersion: builtin\n  kind: AnnotationsTransformer\n  metadata: {name: owner}\n  annotations: {owner: shop}\n  fieldSpecs: [{path: metadata/annotations, create: true}]\n",
			set:           FieldValue{Path: "/metadata/annotations/owner", Value: "payments"},
			want:          `the annotation "owner" (metadata.annotations.owner) is set by transformers[0] (AnnotationsTransformer "owner") in app/kustomization.yaml:`,
		},
		"a LabelTransformer of Services only": {
			kustomization: base + "transformers:\n- team.yaml\n",
			files:         map[string]string{"app/team.yaml": "apiVersion: builtin\nkind: LabelTransformer\nmetadata: {name: team}\nlabels: {team: shop}\nfieldSpecs: [{kind: Service, path: metadata/labels, create: true}]\n"},
			set:           FieldValue{Path: "/metadata/labels/team", Value: "payments"},
		},
		"a labels entry leaves pod templates alone": {
			kustomization: base + "labels:\n- pairs: {team: shop}\n",
			set:           FieldValue{Path: "/spec/template/metadata/labels/team", Value: "payments"},
		},
		"another label than the transformer's": {
			kustomization: base + "commonLabels:\n  team: shop\n",
			set:           FieldValue{Path: "/metadata/labels/tier", Value: "web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": tc.kustomization}
			for k, v := range tc.files {
				files[k] = v
			}
			repo := testtree.Write(t, files)
			_, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{kustomizeApp},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				Change: Change{Patch: &Patch{Set: []FieldValue{tc.set}}}})
			var ref *Refusal
			refused := errors.As(err, &ref) && ref.Code == CodeTransformerOverride
			switch {
			case tc.want == "" && refused:
				t.Fatalf("refused: %s", ref.Reason)
			case tc.want != "" && !refused:
				t.Fatalf("got %v, want refused (%s): %s", err, CodeTransformerOverride, tc.want)
			case tc.want != "" && (!strings.HasPrefix(ref.Reason, tc.want) || ref.App != "web"):
				t.Fatalf("reason (app %q):\n%s\nwant it to start:\n%s", ref.App, ref.Reason, tc.want)
			}
		})
	}
}
