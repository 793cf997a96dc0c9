package githubtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/google/uuid"
	"github.com/palantir/go-githubapp/githubapp"
)

// rawRecorder keeps the exact requests the fake sends.
type rawRecorder struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	status   int
}

func (rr *rawRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	rr.mu.Lock()
	rr.requests = append(rr.requests, r)
	rr.bodies = append(rr.bodies, buf.Bytes())
	status := rr.status
	rr.mu.Unlock()
	w.WriteHeader(status)
}

func TestWebhookDeliveryHeadersAndSignature(t *testing.T) {
	s := New(t)
	rr := &rawRecorder{status: http.StatusAccepted}
	srv := httptest.NewServer(rr)
	defer srv.Close()
	s.SetWebhookURL(srv.URL)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1"}, "main")
	s.CreateInstallation(t, "acme", "deploy")

	if len(rr.requests) != 1 {
		t.Fatalf("deliveries = %d, want 1 (installation created)", len(rr.requests))
	}
	r, body := rr.requests[0], rr.bodies[0]
	mac := hmac.New(sha256.New, []byte(s.WebhookSecret().Reveal()))
	mac.Write(body)
	if got, want := r.Header.Get("X-Hub-Signature-256"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
	if r.Header.Get("X-GitHub-Event") != "installation" {
		t.Errorf("event = %s", r.Header.Get("X-GitHub-Event"))
	}
	if _, err := uuid.Parse(r.Header.Get("X-GitHub-Delivery")); err != nil {
		t.Errorf("delivery id %q is not a uuid", r.Header.Get("X-GitHub-Delivery"))
	}
	if ua := r.Header.Get("User-Agent"); len(ua) < 16 || ua[:16] != "GitHub-Hookshot/" {
		t.Errorf("user agent = %q", ua)
	}
	ev, err := github.ParseWebHook("installation", body)
	if err != nil {
		t.Fatal(err)
	}
	inst := ev.(*github.InstallationEvent)
	if inst.GetAction() != "created" || inst.GetInstallation().GetAccount().GetLogin() != "acme" || len(inst.Repositories) != 1 || inst.GetSender().GetLogin() == "" {
		t.Errorf("installation payload = %+v", inst)
	}

	// Redelivery: same id, same bytes, recorded as a new attempt.
	first := s.Deliveries()[0]
	rr.mu.Lock()
	rr.status = http.StatusConflict
	rr.mu.Unlock()
	again := s.Redeliver(t, first.ID)
	if again.ID != first.ID || !again.Redelivery || again.StatusCode != http.StatusConflict {
		t.Errorf("redelivery = %+v", again)
	}
	if !bytes.Equal(rr.bodies[1], body) || rr.requests[1].Header.Get("X-GitHub-Delivery") != first.ID {
		t.Errorf("redelivery changed the body or the id")
	}
	if got := s.Deliveries(); len(got) != 2 || got[0].StatusCode != http.StatusAccepted || got[1].StatusCode != http.StatusConflict {
		t.Errorf("recorded deliveries = %+v", got)
	}
}

func TestInstallationEventHelpers(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	s.CreateRepo(t, "acme", "a", map[string]string{"f": "1"}, "main")
	s.CreateRepo(t, "acme", "b", map[string]string{"f": "1"}, "main")
	id := s.CreateInstallation(t, "acme", "a")
	if s.InstallationID(t, "acme") != id {
		t.Errorf("InstallationID mismatch")
	}
	s.AddInstallationRepos(t, id, "b")
	s.RemoveInstallationRepos(t, id, "a")
	s.SuspendInstallation(t, id)
	s.UnsuspendInstallation(t, id)
	s.AcceptNewPermissions(t, id, map[string]string{"contents": PermWrite, "metadata": PermRead, "statuses": PermRead})
	s.DeleteInstallation(t, id)

	var got []string
	for _, e := range rc.received() {
		switch p := e.payload.(type) {
		case *github.InstallationEvent:
			if p.GetInstallation().GetID() != id {
				t.Errorf("%s: installation id %d", e.event, p.GetInstallation().GetID())
			}
			got = append(got, e.event+"."+p.GetAction())
		case *github.InstallationRepositoriesEvent:
			got = append(got, e.event+"."+p.GetAction())
			if p.GetAction() == "added" && (len(p.RepositoriesAdded) != 1 || p.RepositoriesAdded[0].GetFullName() != "acme/b") {
				t.Errorf("added = %v", p.RepositoriesAdded)
			}
			if p.GetAction() == "removed" && (len(p.RepositoriesRemoved) != 1 || p.RepositoriesRemoved[0].GetFullName() != "acme/a") {
				t.Errorf("removed = %v", p.RepositoriesRemoved)
			}
		default:
			t.Errorf("unexpected %s event %T", e.event, p)
		}
	}
	want := []string{"installation.created", "installation_repositories.added", "installation_repositories.removed",
		"installation.suspend", "installation.unsuspend", "installation.new_permissions_accepted", "installation.deleted"}
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// handlerFunc adapts a function to go-githubapp's EventHandler.
type handlerFunc struct {
	events []string
	handle func(eventType, deliveryID string, payload []byte)
}

func (h handlerFunc) Handles() []string { return h.events }
func (h handlerFunc) Handle(_ context.Context, eventType, deliveryID string, payload []byte) error {
	h.handle(eventType, deliveryID, payload)
	return nil
}

// TestDeliveriesPassGoGithubappDispatcher proves that the dispatcher the service uses
// accepts the fake's signatures and payloads, and refuses a wrong secret.
func TestDeliveriesPassGoGithubappDispatcher(t *testing.T) {
	s := New(t)
	var mu sync.Mutex
	var handled []string
	h := handlerFunc{events: []string{"pull_request", "push", "installation"}, handle: func(eventType, id string, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, eventType)
	}}
	srv := httptest.NewServer(githubapp.NewDefaultEventDispatcher(appConfig(s), h))
	defer srv.Close()
	s.SetWebhookURL(srv.URL)

	s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1"}, "main")
	s.CreateInstallation(t, "acme", "deploy")
	s.PushCommit(t, "acme/deploy", "feature", map[string]string{"f": "2"}, DefaultAuthor)
	n := s.OpenPullRequest(t, "acme/deploy", "feature", "main", "Change f", DefaultAuthor)
	s.Merge(t, "acme/deploy", n, Squash)
	d := s.DeliverPayload(t, "pull_request", Fixture(t, "pull_request", "closed_merged"))
	if d.StatusCode != http.StatusOK {
		t.Errorf("fixture delivery status = %d (%s)", d.StatusCode, d.ResponseBody)
	}
	for _, d := range s.Deliveries() {
		// go-githubapp answers 200 for handled events and 202 for ones no handler takes.
		if d.StatusCode != http.StatusOK && d.StatusCode != http.StatusAccepted {
			t.Errorf("%s %s answered %d: %s", d.Event, d.Action, d.StatusCode, d.ResponseBody)
		}
	}
	mu.Lock()
	count := len(handled)
	mu.Unlock()
	// installation, push(feature), pull_request opened, push(main), pull_request closed, fixture
	if count != 6 {
		t.Errorf("handled %d events (%v), want 6", count, handled)
	}

	var wrong githubapp.Config = appConfig(s)
	wrong.App.WebhookSecret = "not-the-secret"
	bad := httptest.NewServer(githubapp.NewDefaultEventDispatcher(wrong, h))
	defer bad.Close()
	s.SetWebhookURL(bad.URL)
	if d := s.DeliverPayload(t, "push", Fixture(t, "push", "merge_to_main")); d.StatusCode == http.StatusOK {
		t.Errorf("a dispatcher with another secret accepted the delivery")
	}
}

func TestEventsOnlyForInstalledRepositories(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1"}, "main")
	s.PushCommit(t, "acme/deploy", "main", map[string]string{"f": "2"}, DefaultAuthor)
	if n := len(rc.received()); n != 0 {
		t.Errorf("%d events for a repository the App is not installed on", n)
	}
	s.CreateInstallation(t, "acme", "deploy")
	s.SetSubscribedEvents("pull_request")
	s.PushCommit(t, "acme/deploy", "main", map[string]string{"f": "3"}, DefaultAuthor)
	if got := rc.of("push"); len(got) != 0 {
		t.Errorf("push delivered although the App is not subscribed to it")
	}
	if got := rc.of("installation"); len(got) != 1 {
		t.Errorf("installation events = %d, want 1", len(got))
	}
}

// TestInstallationCreatedNamesTheInstaller holds the fake to GitHub's installation
// "created" payload: its sender is the person who installed the App and, when an
// owner approved a member's request, its requester is that member, each the same
// user (id and login) their own user access token shows on GET /user; both can then
// access the installation.
func TestInstallationCreatedNamesTheInstaller(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	s.CreateRepo(t, "acme", "a", nil, "main")
	s.CreateRepo(t, "beta", "a", nil, "main")
	installed := s.CreateInstallationBy(t, "alice", "acme", "a")
	approved := s.ApproveInstallationRequest(t, "owner", "bob", "beta", "a")

	created := map[int64]*github.InstallationEvent{}
	for _, e := range rc.received() {
		if p, ok := e.payload.(*github.InstallationEvent); ok && p.GetAction() == "created" {
			created[p.GetInstallation().GetID()] = p
		}
	}
	me := func(login string) *github.User {
		t.Helper()
		token := exchangeJSON(t, s, codeForm(s, s.AuthorizationCode(t, login)))["access_token"]
		user, _, err := apiClient(t, s, token).Users.Get(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return user
	}
	same := func(what string, got *github.User, login string) {
		t.Helper()
		want := me(login)
		if got.GetID() == 0 || got.GetID() != want.GetID() || got.GetLogin() != want.GetLogin() || got.GetType() != "User" {
			t.Errorf("%s = %d %s %s, want the user %d %s", what, got.GetID(), got.GetLogin(), got.GetType(), want.GetID(), want.GetLogin())
		}
	}
	if p := created[installed]; p == nil {
		t.Fatalf("no created event for installation %d", installed)
	} else {
		same("sender of an installation", p.GetSender(), "alice")
		if p.Requester != nil {
			t.Errorf("requester of an installation nobody requested = %v", p.Requester)
		}
	}
	if p := created[approved]; p == nil {
		t.Fatalf("no created event for installation %d", approved)
	} else {
		same("sender of an approved request", p.GetSender(), "owner")
		same("requester of an approved request", p.GetRequester(), "bob")
	}
	for login, id := range map[string]int64{"alice": installed, "owner": approved, "bob": approved} {
		token := exchangeJSON(t, s, codeForm(s, s.AuthorizationCode(t, login)))["access_token"]
		page, _, err := apiClient(t, s, token).Apps.ListUserInstallations(ctx, nil)
		if err != nil || len(page) != 1 || page[0].GetID() != id {
			t.Errorf("%s's installations = %v, %v; want [%d]", login, page, err, id)
		}
	}
}
