// Package handler owns the reactions to GitHub webhook events: one go-githubapp
// EventHandler per event family, each embedding Base, and the Inbox whose workers
// take verified deliveries from the store and dispatch them to those handlers with
// retries (waiting out GitHub's rate limits by the times GitHub names), and prunes
// the done ones after their retention. Handlers never see an unverified delivery and ignore the App's own events.
// Each decodes only the payload fields it reads (payload.go), so a field it does not
// read cannot drop a delivery, and a payload without the object it acts on is
// skipped with a reason (Skip) rather than acted on or retried; one whose values it
// would act on are missing or wrong (a repository that is no owner/name, a pull
// request 0, a SHA that is none) fails at once, naming the field (payloadCheck).
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// Log keys used by the handlers, beyond those go-githubapp sets.
const (
	LogKeyDeliveryID = "github_delivery_id"
	LogKeyEventType  = "github_event_type"
	LogKeyAction     = "github_event_action"
)

// RevocationListener is told when connections lose their repository access, so the
// plans that depend on them can say so. Optional.
type RevocationListener interface {
	ConnectionsRevoked(ctx context.Context, revoked []store.RepoConnection, reason string) error
}

// Base holds what every handler needs. Handlers embed it; new event families add
// their own dependencies as fields here, so the wiring stays in one place.
type Base struct {
	ClientCreator githubapp.ClientCreator
	Store         *store.DB
	// App is the App's identity, read at startup; its bot login marks our own events.
	App github.App
	// WebHost is the GitHub host that repositories live on, for canonical URLs.
	WebHost string
	// Revocations, when set, hears about revoked connections.
	Revocations RevocationListener
	// Installations reads installations from GitHub; github.Installations over
	// ClientCreator when nil.
	Installations InstallationReader
}

// InstallationReader reads what GitHub says now about one of the App's
// installations, as github.Installations does.
type InstallationReader interface {
	Get(ctx context.Context, installationID int64) (github.Installation, error)
	Repositories(ctx context.Context, installationID int64, webHost string) ([]github.RepoRef, error)
	HasRepository(ctx context.Context, installationID int64, repo github.Repo) (bool, error)
}

func (b *Base) installations() InstallationReader {
	if b.Installations != nil {
		return b.Installations
	}
	return github.Installations{Clients: b.ClientCreator}
}

// IsOwnEvent reports whether the App itself caused the event (sender is the
// payload's sender login), such as the push of a branch it committed or a check run
// it created. Reacting to those would loop.
func (b *Base) IsOwnEvent(sender string) bool {
	return b.App.Slug != "" && strings.EqualFold(sender, b.App.BotLogin())
}

// asSender records the person a delivery names as its sender as who acts on a plan,
// for its history and audit rows ("system" when it names nobody).
func asSender(ctx context.Context, login string) context.Context {
	if login == "" {
		return ctx
	}
	return plan.WithActor(ctx, "github:"+login)
}

// Repo returns the canonical name of a repository named "owner/name" in a payload.
func (b *Base) Repo(fullName string) (github.Repo, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return github.Repo{}, fmt.Errorf("repository %q in payload has no owner/name", fullName)
	}
	return github.ParseRepoURL("https://" + b.WebHost + "/" + owner + "/" + name)
}

// parse decodes the fields of a payload that v declares (see payload.go) and
// ignores the rest; a payload that does not parse will never parse, so the error is
// permanent. The decoder's error is cut short: it quotes a number it cannot store
// whole, which may be megabytes of digits, and the inbox logs the error on every
// attempt.
func parse(eventType string, payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return Permanent(fmt.Errorf("failed to parse %s event payload: %s", eventType, shownError(err)))
	}
	return nil
}

// skipError marks a delivery its handler cannot act on and never will, such as a
// signed payload without the object the handler works on.
type skipError struct{ reason string }

func (e skipError) Error() string { return "delivery skipped: " + e.reason }

// Skip tells the Inbox to finish a delivery without acting on it, recording reason
// with it: retrying cannot help, and nothing failed that an operator must fix.
func Skip(format string, args ...any) error {
	return skipError{reason: fmt.Sprintf(format, args...)}
}

// SkipReason returns the reason of an error made by Skip.
func SkipReason(err error) (string, bool) {
	var s skipError
	if errors.As(err, &s) {
		return s.reason, true
	}
	return "", false
}

// missing is the reason for skipping an event whose payload lacks an object.
func missing(eventType, object string) error {
	return Skip("%s event payload has no %s object", eventType, object)
}

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the Inbox parks the delivery as failed
// at once instead of backing off.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
