// Package handler owns the reactions to GitHub webhook events: one go-githubapp
// EventHandler per event family, each embedding Base, and the Inbox whose workers
// take verified deliveries from the store and dispatch them to those handlers with
// retries. Handlers never see an unverified delivery and ignore the App's own events.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
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
}

// IsOwnEvent reports whether the App itself caused the event, such as the push of a
// branch it committed or a check run it created. Reacting to those would loop.
func (b *Base) IsOwnEvent(sender *gh.User) bool {
	return b.App.Slug != "" && strings.EqualFold(sender.GetLogin(), b.App.BotLogin())
}

// Repo returns the canonical name of a repository in a payload.
func (b *Base) Repo(r *gh.Repository) (github.Repo, error) {
	owner, name, ok := strings.Cut(r.GetFullName(), "/")
	if !ok || owner == "" || name == "" {
		return github.Repo{}, fmt.Errorf("repository %q in payload has no owner/name", r.GetFullName())
	}
	return github.ParseRepoURL("https://" + b.WebHost + "/" + owner + "/" + name)
}

// parse decodes a payload; a payload that does not parse will never parse, so the
// error is permanent.
func parse(eventType string, payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return Permanent(fmt.Errorf("failed to parse %s event payload: %w", eventType, err))
	}
	return nil
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
