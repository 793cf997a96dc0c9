package argocdharness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// manifestClient is the program in the Argo CD build that calls the repo server's
// GenerateManifest (e2e/argocdharness/manifestclient).
const manifestClient = "argocd-manifest-client"

// ManifestRequest is the part of the repo server's ManifestRequest
// (reposerver/apiclient) the tests send, under its JSON field names. The client
// program decodes it into Argo CD's own type and refuses unknown fields, so a
// misspelt name fails the call instead of being dropped.
type ManifestRequest struct {
	Repo     Repository `json:"repo"`
	Revision string     `json:"revision"`
	// AppName and AppLabelKey make the repo server add its tracking marks to the
	// objects; the parity tests leave them empty, as tracking is Argo CD's mark at
	// apply time, not part of the repository's render.
	AppName     string `json:"appName,omitempty"`
	AppLabelKey string `json:"appLabelKey,omitempty"`
	// Namespace is the destination namespace (helm template --namespace).
	Namespace string `json:"namespace,omitempty"`
	// ApplicationSource is one of the Application's sources exactly as the
	// Application spells it (spec.source or an entry of spec.sources).
	ApplicationSource map[string]any `json:"applicationSource"`
	// NoCache makes the repo server render again instead of answering from Redis.
	NoCache            bool                 `json:"noCache,omitempty"`
	KubeVersion        string               `json:"kubeVersion,omitempty"`
	APIVersions        []string             `json:"apiVersions,omitempty"`
	HasMultipleSources bool                 `json:"hasMultipleSources,omitempty"`
	RefSources         map[string]RefTarget `json:"refSources,omitempty"`
	ProjectName        string               `json:"projectName,omitempty"`
	ProjectSourceRepos []string             `json:"projectSourceRepos,omitempty"`
	// KustomizeOptions are the kustomize settings of the cluster's argocd-cm, as
	// the application controller reads them and passes them along.
	KustomizeOptions *KustomizeOptions `json:"kustomizeOptions,omitempty"`
}

// KustomizeOptions is argocd-cm's kustomize settings as Argo CD's KustomizeOptions
// carries them. Argo CD's type has no JSON tags, so its fields go by their Go
// names.
type KustomizeOptions struct {
	// BuildOptions is "kustomize.buildOptions": the flags the repo server adds to
	// every "kustomize build".
	BuildOptions string `json:"BuildOptions"`
}

// Repository names the repository a source reads, as Argo CD's Repository does.
type Repository struct {
	Repo string `json:"repo"`
	// Type is "helm" for a chart repository; empty is Git.
	Type string `json:"type,omitempty"`
	// EnableOCI says a Helm repository is an OCI registry, as a repository
	// secret's enableOCI does.
	EnableOCI bool `json:"enableOCI,omitempty"`
	// InsecureOCIForceHttp reaches an OCI registry over plain HTTP (helm pull
	// --plain-http), for a registry on the loopback interface.
	InsecureOCIForceHttp bool `json:"insecureOCIForceHttp,omitempty"` //nolint:revive // Argo CD's JSON name
}

// RefTarget is what a "$ref" of a multi-source Application points at. Argo CD's
// type has no JSON tags, so its fields go by their Go names.
type RefTarget struct {
	Repo           Repository `json:"Repo"`
	TargetRevision string     `json:"TargetRevision"`
}

// ManifestResponse is the part of the repo server's answer the tests read.
type ManifestResponse struct {
	// Manifests are the rendered objects, one JSON document each.
	Manifests  []string `json:"manifests"`
	Revision   string   `json:"revision"`
	SourceType string   `json:"sourceType"`
	Commands   []string `json:"commands"`
}

// GenerateManifest asks the running repo server for the manifests of req, over the
// same gRPC call the application controller makes. An error carries the repo
// server's gRPC status text.
func (a *ArgoCD) GenerateManifest(ctx context.Context, req ManifestRequest) (ManifestResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ManifestResponse{}, fmt.Errorf("encode manifest request: %w", err)
	}
	timeout := 2 * time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(a.dir, manifestClient), "-addr", a.repoServerAddr, "-timeout", timeout.String())
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return ManifestResponse{}, fmt.Errorf("generate manifest of %v at %s: %w: %s", req.ApplicationSource["path"], req.Revision, err, strings.TrimSpace(stderr.String()))
	}
	var resp ManifestResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return ManifestResponse{}, fmt.Errorf("decode manifest response: %w", err)
	}
	return resp, nil
}
