package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// Commands people can write on a kukie pull request.
const (
	CommandRerender = "/kukie rerender"
	CommandCancel   = "/kukie cancel"
)

// WriteAccess answers whether a GitHub user may push to a repository.
type WriteAccess interface {
	CanWrite(ctx context.Context, installationID int64, repo, login string) (bool, error)
}

// IssueComment runs "/kukie rerender" and "/kukie cancel" written on a kukie pull
// request by someone with write access to the repository; others get a reply
// saying why nothing happened. What follows "/kukie cancel" on its line is the
// cancel's reason, held to the API's rules for one, and the cancel is done as the
// comment's author ("github:<login>"), as the API's is done as the team.
type IssueComment struct {
	Base
	Pipeline Pipeline
	Access   WriteAccess
}

// Handles implements githubapp.EventHandler.
func (h *IssueComment) Handles() []string { return []string{"issue_comment"} }

// Handle implements githubapp.EventHandler.
func (h *IssueComment) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event issueCommentEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	issue := event.Issue
	if issue == nil {
		return missing(eventType, "issue")
	}
	if event.Action != "created" || len(issue.PullRequest) == 0 || string(issue.PullRequest) == "null" || h.IsOwnEvent(event.Sender.Login) {
		return nil
	}
	command, words, ok := commandOf(event.Comment.Body)
	if !ok {
		return nil
	}
	c := checkPayload(eventType)
	repo := c.repo("repository", event.Repo)
	c.number("issue.number", issue.Number)
	c.text("comment.user.login", event.Comment.User.Login)
	if err := c.Err(); err != nil {
		return err
	}
	number := issue.Number
	plans, err := h.Store.ListPlans(ctx, store.PlanFilter{Repo: repo, PRNumber: number, Limit: 1})
	if err != nil || len(plans) == 0 {
		return err
	}
	pl := plans[0]
	login := event.Comment.User.Login
	logger := zerolog.Ctx(ctx).With().Str("plan", pl.Code).Str("command", command).Str("user", login).Logger()
	ctx = logger.WithContext(ctx)

	allowed := false
	if h.Access != nil {
		allowed, err = h.Access.CanWrite(ctx, pl.InstallationID, repo, login)
		if err != nil {
			return err
		}
	}
	if !allowed {
		logger.Info().Msg("Ignoring a command from a user without write access")
		return h.reply(ctx, pl, repo, number, event.Comment.ID, event.commentedAt(), fmt.Sprintf("@%s `%s` needs write access to this repository.", login, command))
	}
	switch command {
	case CommandRerender:
		return h.Pipeline.Reverify(asSender(ctx, login), pl.Code)
	default:
		// A reason the API would refuse is refused here too, before anything is
		// closed: it would reach the plan's history and every listing of it.
		err := plan.CheckReason("the reason after `"+CommandCancel+"`", words)
		if err == nil {
			_, err = h.Pipeline.Cancel(asSender(ctx, login), pl.TeamID, pl.Code, words)
		}
		if refused, ok := plan.AsError(err); ok {
			// An unfit reason, or a plan that can no longer be cancelled, is the
			// user's answer, not a retry.
			return h.reply(ctx, pl, repo, number, event.Comment.ID, event.commentedAt(), fmt.Sprintf("Plan `%s` was not cancelled: %s", pl.Code, refused.Reason))
		}
		// Anything else failed in the service or at GitHub: its text (hosts, URLs,
		// the store's own words) is not for the pull request, which everyone who
		// can read the repository reads, and the inbox takes the command again.
		return err
	}
}

// commandOf returns the command a comment starts with: the command alone or
// followed by white space (and whatever the person adds), never a first word that
// only begins like one ("/kukie cancelled", "/kukie cancel?"), which is talk about
// the plan rather than a command. words are what follows it on its line, trimmed:
// the lines below are the person's talk (thanks, a signature, a quoted mail),
// which a command's argument would carry into the plan's history unasked. A line
// ends at a line feed or at a carriage return, which some clients end lines with
// alone.
func commandOf(body string) (command, words string, ok bool) {
	body = strings.TrimSpace(body)
	for _, command := range []string{CommandRerender, CommandCancel} {
		rest, ok := strings.CutPrefix(body, command)
		if next, _ := utf8.DecodeRuneInString(rest); ok && (rest == "" || unicode.IsSpace(next)) {
			line := rest
			if end := strings.IndexAny(rest, "\r\n"); end >= 0 {
				line = rest[:end]
			}
			return command, strings.TrimSpace(line), true
		}
	}
	return "", "", false
}

// reply answers the comment commentID (made at commentAt) with text, once for that
// comment: an attempt whose create GitHub carried out but whose answer was lost
// returns an error, the inbox takes the delivery again, and the retry, on whichever
// replica, finds the first reply by its marker on the pull request instead of
// posting a second one. A comment without an ID is not answered: every such reply
// would carry the same marker, and the first would stand for all that follow.
func (h *IssueComment) reply(ctx context.Context, pl store.Plan, repo string, number, commentID int64, commentAt time.Time, text string) error {
	if h.ClientCreator == nil {
		return nil
	}
	if commentID == 0 {
		return Permanent(errors.New("reply to a command: the payload names no comment ID, so the reply could not be told from replies to other comments"))
	}
	owner, name, _ := strings.Cut(repo, "/")
	c, err := h.ClientCreator.NewInstallationClient(pl.InstallationID)
	if err != nil {
		return err
	}
	if h.App.Slug == "" {
		// Without the App's login its replies cannot be told from planted markers.
		return Permanent(errors.New("reply to a command: the App's slug is unknown, so its own replies cannot be told apart"))
	}
	return github.CommentOnce(ctx, c, owner, name, number, h.App.BotLogin(), commentAt, github.ReplyMarker(commentID), text)
}

// GitHubWriteAccess implements WriteAccess with the repository collaborator
// permission endpoint.
type GitHubWriteAccess struct{ Base }

// CanWrite implements WriteAccess.
func (a GitHubWriteAccess) CanWrite(ctx context.Context, installationID int64, repo, login string) (bool, error) {
	owner, name, _ := strings.Cut(repo, "/")
	c, err := a.ClientCreator.NewInstallationClient(installationID)
	if err != nil {
		return false, err
	}
	return github.CanWrite(ctx, c, owner, name, login)
}

var _ githubapp.EventHandler = &IssueComment{}
