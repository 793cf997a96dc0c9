package plan

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// Stable error codes of plans and of the API. A program switches on these.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeNotGitOpsManaged    = "not_gitops_managed"
	CodeRepoNotConnected    = "repo_not_connected"
	CodeRevisionNotABranch  = "revision_not_a_branch"
	CodeRevisionNotFound    = "revision_not_found"
	CodeRefused             = "refused"
	CodeClusterRejected     = "cluster_rejected"
	CodePathMismatch        = "path_mismatch"
	CodeAppNotFound         = "application_not_found"
	CodeUnsupportedSource   = "unsupported_source"
	CodeRemoteError         = "remote_error"
	CodeEditNoLongerApplies = "edit_no_longer_applies"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	// CodePipelineUnavailable: this process runs no change pipeline (no GitHub App
	// is configured); the reason says what to configure.
	CodePipelineUnavailable = "pipeline_unavailable"
)

// AppRef names an Argo CD Application.
type AppRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// MaxIdempotencyKeyChars bounds a request's idempotency key, in characters: the key
// is kept with the change and in the team's unique index of keys, where the
// longest (four bytes a character) stays far below what an index entry may hold.
const MaxIdempotencyKeyChars = 200

// Request is one change request from the chat integration.
type Request struct {
	Cluster string        `json:"cluster"`
	Target  objref.Target `json:"target"`
	Change  render.Change `json:"change"`
	// Application names the Application that receives a new_resource change.
	Application    *AppRef `json:"application,omitempty"`
	Reason         string  `json:"reason"`
	RequestedBy    string  `json:"requested_by"`
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
	// ExpectedPath is the path the caller believes the change takes ("git" or
	// "direct"). Code decides: a mismatch is refused with the current decision.
	ExpectedPath string `json:"expected_path,omitempty"`
}

// Validate explains what is wrong with a request, or returns nil.
func (r Request) Validate() error {
	var problems []string
	if r.Cluster == "" {
		problems = append(problems, "cluster is required")
	}
	if r.Target.APIVersion == "" || r.Target.Kind == "" || r.Target.Name == "" {
		problems = append(problems, "target needs apiVersion, kind and name")
	} else {
		problems = append(problems, targetProblems(r.Target)...)
	}
	if n := changeCount(r.Change); n != 1 {
		problems = append(problems, fmt.Sprintf("change must set exactly one of replicas, image, env, resources, new_resource, patch, delete_resource (got %d)", n))
	} else if err := r.Change.ValidateFor(r.Target); err != nil {
		// What render refuses of the change on its own or by the target's kind (a
		// replica count out of range, an image change without its container, an
		// env variable without a name, a label key Kubernetes does not take, a
		// ConfigMap's data value that is not a string) is refused here, when the
		// request is made, rather than once the repository is read and rendered.
		problems = append(problems, err.Error())
	}
	if r.Change.NewResource != nil && (r.Application == nil || r.Application.Name == "") {
		problems = append(problems, "a new_resource change needs application {namespace, name}: the Argo CD Application that will deploy it")
	}
	// Taken with another change, the Application would be kept with a change
	// refused before its path is decided, which would then be listed as one that
	// touched that Application.
	if r.Change.NewResource == nil && r.Application != nil && changeCount(r.Change) == 1 {
		problems = append(problems, "application is given with a new_resource change only: any other change goes to the Application that manages its target, which the path decision finds; leave application out")
	}
	if strings.TrimSpace(r.Reason) == "" {
		problems = append(problems, "reason is required")
	}
	if strings.TrimSpace(r.RequestedBy) == "" {
		problems = append(problems, "requested_by is required")
	}
	for _, f := range []struct {
		name, value string
		lines       bool
	}{{"reason", r.Reason, true}, {"requested_by", r.RequestedBy, false}, {"idempotency_key", r.IdempotencyKey, false}} {
		if problem := WordsProblem(f.name, f.value, f.lines); problem != "" {
			problems = append(problems, problem)
		}
	}
	// Counted in characters, as every other bound of a request's words is, so
	// that a key written in another script is held to the bound its refusal says.
	if n := utf8.RuneCountInString(r.IdempotencyKey); n > MaxIdempotencyKeyChars {
		problems = append(problems, fmt.Sprintf("idempotency_key is %d characters long, at most %d are taken", n, MaxIdempotencyKeyChars))
	}
	switch r.ExpectedPath {
	case "", string(argocd.PathGit), string(argocd.PathDirect):
	default:
		problems = append(problems, `expected_path must be "git" or "direct"`)
	}
	if len(problems) > 0 {
		return &Error{Code: CodeInvalidRequest, Reason: strings.Join(problems, "; ")}
	}
	return nil
}

// CheckTarget refuses a target no Kubernetes object can be: one without its
// apiVersion, kind or name, or whose apiVersion, kind, namespace or name is not
// one Kubernetes takes. Such a target would be looked for in the cluster and the
// repository, found in neither, and answered as a resource Argo CD does not manage.
func CheckTarget(t objref.Target) error {
	if t.APIVersion == "" || t.Kind == "" || t.Name == "" {
		return &Error{Code: CodeInvalidRequest, Reason: "target needs apiVersion, kind and name"}
	}
	if problems := targetProblems(t); len(problems) > 0 {
		return &Error{Code: CodeInvalidRequest, Reason: strings.Join(problems, "; ")}
	}
	return nil
}

var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// targetProblems says what of t no Kubernetes object can have.
func targetProblems(t objref.Target) []string {
	var problems []string
	group, version, grouped := strings.Cut(t.APIVersion, "/")
	if !grouped {
		group, version = "", t.APIVersion
	}
	if (grouped && len(validation.IsDNS1123Subdomain(group)) > 0) || len(validation.IsDNS1123Label(version)) > 0 {
		problems = append(problems, fmt.Sprintf("target.apiVersion %s is no API version: it is a version (v1) or a group and a version (apps/v1)%s",
			strconv.QuoteToASCII(t.APIVersion), otherScript(t.APIVersion)))
	}
	if !kindPattern.MatchString(t.Kind) {
		problems = append(problems, fmt.Sprintf("target.kind %s is no kind: a kind is a word of ASCII letters and digits (Deployment)%s",
			strconv.QuoteToASCII(t.Kind), otherScript(t.Kind)))
	}
	if t.Namespace != "" {
		if msgs := validation.IsDNS1123Label(t.Namespace); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("target.namespace %s is no namespace's name: %s%s",
				strconv.QuoteToASCII(t.Namespace), strings.Join(msgs, "; "), otherScript(t.Namespace)))
		}
	}
	// A few kinds (RBAC's, a PersistentVolume) take any name a URL path segment can
	// be; every other takes a DNS subdomain, which is ASCII.
	anyName := group == "rbac.authorization.k8s.io" || (group == "" && t.Kind == "PersistentVolume")
	if msgs := path.IsValidPathSegmentName(t.Name); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("target.name %s is no object's name: %s", strconv.QuoteToASCII(t.Name), strings.Join(msgs, "; ")))
	} else if !anyName && strings.ContainsFunc(t.Name, func(r rune) bool { return r > unicode.MaxASCII }) {
		problems = append(problems, fmt.Sprintf("target.name %s is no %s's name: it holds characters other than ASCII%s",
			strconv.QuoteToASCII(t.Name), t.Kind, otherScript(t.Name)))
	}
	return problems
}

// otherScript is what a refusal adds for a value holding characters other than
// ASCII: "shоp" with a Cyrillic о reads as the "shop" the cluster has, and the
// refusal, quoting it in ASCII, as a contradiction without it.
func otherScript(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r > unicode.MaxASCII }) {
		return ""
	}
	return " (letters of another script look like Latin ones; type it again)"
}

// MaxReasonChars bounds the reason of a change, a rollback or a cancel: it is
// copied into the pull request, commit, check run, notifications and every
// listing of the change, so the body limit alone would let each carry a megabyte.
const MaxReasonChars = 2000

// CheckReason refuses the reason of a rollback or a cancel (which may be empty)
// that is longer than MaxReasonChars or holds a character WordsProblem refuses,
// with an invalid_request Error naming the problem; field is what the refusal
// calls it, for whoever wrote it ("reason" in the API).
func CheckReason(field, reason string) error {
	if n := utf8.RuneCountInString(reason); n > MaxReasonChars {
		return &Error{Code: CodeInvalidRequest, Reason: fmt.Sprintf("%s is %d characters long, at most %d are taken", field, n, MaxReasonChars)}
	}
	if problem := WordsProblem(field, reason, true); problem != "" {
		return &Error{Code: CodeInvalidRequest, Reason: problem}
	}
	return nil
}

// WordsProblem says why a request's words (its reason when lines is set, who
// asked for it, its idempotency key) are not taken, or "": a control character
// (beside a line break or tab in a reason) or a character that reorders text
// (U+202A to U+202E, U+2066 to U+2069) would reach the pull request, commit and
// check run as it is, where an escape sequence rewrites a terminal's view of the
// commit and a right-to-left override shows a reviewer other words than it holds.
func WordsProblem(field, value string, lines bool) string {
	for i, r := range []rune(value) {
		switch {
		case lines && (r == '\n' || r == '\t' || r == '\r'):
		case unicode.IsControl(r):
			return fmt.Sprintf("%s holds the control character %U at character %d; remove it", field, r, i+1)
		case (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069):
			return fmt.Sprintf("%s holds %U at character %d, which reorders how the text around it is shown; remove it", field, r, i+1)
		}
	}
	return ""
}

func changeCount(c render.Change) int {
	n := 0
	for _, set := range []bool{c.Replicas != nil, c.Image != nil, c.Env != nil, c.Resources != nil, c.NewResource != nil, c.Patch != nil, c.DeleteResource != nil} {
		if set {
			n++
		}
	}
	return n
}

// Verb names the change in PR titles: "scale", "set image of", …
func Verb(c render.Change) string {
	switch {
	case c.Replicas != nil:
		return "scale"
	case c.Image != nil:
		return "set image of"
	case c.Env != nil:
		return "set env of"
	case c.Resources != nil:
		return "set resources of"
	case c.NewResource != nil:
		return "add"
	case c.Patch != nil:
		return "patch"
	case c.DeleteResource != nil:
		return "delete"
	}
	return "change"
}

// Error is a refusal or failure with a stable code, returned by the pipeline and
// recorded on plans. Details carries structured context (the current decision for
// not_gitops_managed, render attempts for refused).
type Error struct {
	Code    string `json:"error"`
	Reason  string `json:"reason"`
	Details any    `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

func refusal(code, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// AsError returns err's *Error, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// newCode returns a short plan code: lower-case, unambiguous letters and digits, fit
// for branch names and chat.
func newCode() string {
	const alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic("plan code: system random source failed: " + err.Error())
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Payload is the plan's stored JSON document: what the pipeline learned at each step.
type Payload struct {
	Decision *DecisionInfo      `json:"decision,omitempty"`
	ArgoCD   *argocd.Payload    `json:"argocd,omitempty"`
	App      *argocd.PayloadApp `json:"app,omitempty"`
	Strategy string             `json:"strategy,omitempty"`
	// Renamed is the target's name once the edit deploys, when the edit
	// renames it (kustomize names a generated ConfigMap by a hash of its
	// content): the deployment is followed under it (deployTarget).
	Renamed string `json:"renamed,omitempty"`
	// Renames are the generated objects the edit renames (render's
	// Result.Renames), which ClusterDiff shows as one removed and one added.
	Renames     []render.Rename     `json:"renames,omitempty"`
	Edits       []StoredEdit        `json:"edits,omitempty"`
	GitDiff     string              `json:"git_diff,omitempty"`
	ClusterDiff []render.ObjectDiff `json:"cluster_diff,omitempty"`
	Warnings    []string            `json:"warnings,omitempty"`
	// Verification is render's record of what was compared.
	Verification *render.Verification `json:"verification,omitempty"`
	// ClusterCheck is one of the ClusterCheck* values, with ClusterCheckNote.
	ClusterCheck     string `json:"cluster_check,omitempty"`
	ClusterCheckNote string `json:"cluster_check_note,omitempty"`
	// NotChecked lists the team's other clusters whose Applications could not be
	// read, "cluster <name> (<why>)": an Application there that deploys from the
	// same repository and branch may change too without the verification knowing.
	NotChecked []string `json:"not_checked,omitempty"`
	// Refusal or failure details, when the plan stopped.
	Problem *Error `json:"problem,omitempty"`
	// Deployment is followed after merge.
	Deployment *Deployment `json:"deployment,omitempty"`
	// VerificationResult summarises the last verification for people.
	VerificationResult string `json:"verification_result,omitempty"`
	// RollbackReference is what a rollback reverts (merge commit) or the plan that
	// reverted this one.
	RollbackReference string `json:"rollback_reference,omitempty"`
	// Reverts is, of a revert (store.Plan.RollbackOf), the merge commit of the plan
	// it undoes. RollbackReference names it too until the revert is merged, and then
	// the revert's own merge commit, as it does of any merged plan.
	Reverts string `json:"reverts,omitempty"`
	// CancelReason is why the plan was cancelled, as the caller of Cancel gave it.
	CancelReason string `json:"cancel_reason,omitempty"`
	// CheckConclusion is the last published check run conclusion.
	CheckConclusion string `json:"check_conclusion,omitempty"`
	// VerifiedHead is the head commit known to be the base plus exactly the verified
	// edits: the commit this plan built from them, or a pushed head whose comparison
	// with them completed and matched. Only a check run on this commit may conclude
	// success; a head pushed by someone else is compared before anything is said.
	VerifiedHead string `json:"verified_head,omitempty"`
	// BaseRefusal says why the change is refused on the base its branch last moved
	// to; the head is then never called verified, only asked to be acted on. A rebase
	// that succeeds clears it.
	BaseRefusal string `json:"base_refusal,omitempty"`
	// RetargetedTo is the branch a person retargeted the open pull request at, when
	// it is not the plan's base: merged there, the change would not reach the branch
	// the Application tracks, so the head's kukie/render run fails saying so until
	// the pull request targets the base again.
	RetargetedTo string `json:"retargeted_to,omitempty"`

	// capabilities says, by app name, why a Helm app of the verification
	// renders with Helm's default capabilities; the verified apps among them
	// become warnings (recordVerified).
	capabilities map[string]string
}

// RevertedMerge is the merge commit of the plan a revert undoes, "" when pl is no
// revert or, for a revert recorded before Payload.Reverts, once it was merged.
func RevertedMerge(pl store.Plan, pay Payload) string {
	switch {
	case pl.RollbackOf == "":
		return ""
	case pay.Reverts != "":
		return pay.Reverts
	case pl.MergeSHA == "":
		return pay.RollbackReference
	}
	return ""
}

// deployTarget is the object the plan's deployment is followed by: its target,
// of the kind the cluster serves and under the name the edit gives it, as its
// messages name it.
func deployTarget(pl store.Plan, pay Payload) objref.Target {
	t := ShownTarget(pl, pay)
	if pay.Renamed != "" {
		t.Name = pay.Renamed
	}
	return t
}

// DecisionInfo is the path decision as stored with the plan.
type DecisionInfo struct {
	Path    argocd.Path         `json:"path"`
	Known   bool                `json:"known"`
	Reason  string              `json:"reason"`
	Level   argocd.Level        `json:"level"`
	Failure argocd.FailureClass `json:"failure,omitempty"`
}

// StoredEdit is one edited file with its bytes (needed to commit on resume). The
// bytes are never returned by the API; people see the masked git diff.
type StoredEdit struct {
	Path    string `json:"path"`
	Old     []byte `json:"old,omitempty"`
	New     []byte `json:"new"`
	Created bool   `json:"created,omitempty"`
}

// Outcomes of the server-side dry-run before the pull request.
const (
	ClusterCheckPassed = "passed"
	// ClusterCheckUnreachable: the cluster could not be asked; the check run says
	// "not checked against the cluster" and asks for attention.
	ClusterCheckUnreachable = "unreachable"
	// ClusterCheckSkipped: nothing could be sent (no changed object, or its
	// after-render is not available); the note says why.
	ClusterCheckSkipped = "skipped"
)

// Deployment states after merge.
const (
	DeployPending    = "pending"
	DeployInProgress = "in_progress"
	DeploySucceeded  = "succeeded"
	DeployFailed     = "failed"
	DeployRolledBack = "rolled_back"
)

// Deployment is what the cluster says about a merged change.
type Deployment struct {
	State        string `json:"state"`
	Message      string `json:"message,omitempty"`
	SyncRevision string `json:"sync_revision,omitempty"`
	Phase        string `json:"phase,omitempty"`
	Health       string `json:"health,omitempty"`
}

func decodePayload(p store.Plan) (Payload, error) {
	var pl Payload
	if len(p.Payload) == 0 {
		return pl, nil
	}
	if err := json.Unmarshal(p.Payload, &pl); err != nil {
		return pl, fmt.Errorf("decode payload of plan %s: %w", p.Code, err)
	}
	return pl, nil
}

func encodePayload(p *store.Plan, pl Payload) error {
	b, err := json.Marshal(pl)
	if err != nil {
		return fmt.Errorf("encode payload of plan %s: %w", p.Code, err)
	}
	p.Payload = b
	return nil
}

// ChangeOf decodes a plan's stored change.
func ChangeOf(p store.Plan) (render.Change, error) {
	var c render.Change
	if err := json.Unmarshal(p.Change, &c); err != nil {
		return c, fmt.Errorf("decode change of plan %s: %w", p.Code, err)
	}
	return c, nil
}

// PayloadOf decodes a plan's stored payload.
func PayloadOf(p store.Plan) (Payload, error) { return decodePayload(p) }
