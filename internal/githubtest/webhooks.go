package githubtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // GitHub still sends the legacy X-Hub-Signature (HMAC-SHA1).
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
	"github.com/google/uuid"
)

const (
	// hookUserAgent is GitHub's webhook user agent (the suffix is a build id).
	hookUserAgent = "GitHub-Hookshot/5f1a7c3"
	hookID        = "424242"
	// hookTimeout is how long GitHub waits for a webhook response.
	hookTimeout = 10 * time.Second
	// maxPushCommits is how many commits GitHub lists in a push payload.
	maxPushCommits = 20
)

// Delivery is one attempt to deliver a webhook, as GitHub's "Recent Deliveries" shows it.
type Delivery struct {
	ID             string // X-GitHub-Delivery; the same for a redelivery
	Event          string // X-GitHub-Event
	Action         string // the payload's "action", if any
	InstallationID int64
	Payload        []byte
	Redelivery     bool
	URL            string
	StatusCode     int // the receiver's status; 0 when nothing answered
	ResponseBody   string
	Error          string // transport error, or why nothing was sent
	DeliveredAt    time.Time
}

type pendingDelivery struct {
	d    Delivery
	done chan struct{}
}

// deliverer sends webhooks in the order they were fired, one at a time, from its own
// goroutine so that an API call which fires an event never waits on the receiver (the
// receiver may well be calling the fake at that moment).
type deliverer struct {
	s      *Server
	client *http.Client

	mu      sync.Mutex
	cond    *sync.Cond
	url     string
	queue   []*pendingDelivery
	busy    bool
	records []Delivery
	stopped bool
	exited  chan struct{}
}

func newDeliverer(s *Server) *deliverer {
	d := &deliverer{
		s:      s,
		client: &http.Client{Timeout: hookTimeout},
		exited: make(chan struct{}),
	}
	d.cond = sync.NewCond(&d.mu)
	go d.run()
	return d
}

func (d *deliverer) run() {
	defer close(d.exited)
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.stopped {
			d.cond.Wait()
		}
		if d.stopped {
			for _, p := range d.queue {
				close(p.done)
			}
			d.queue = nil
			d.mu.Unlock()
			return
		}
		p := d.queue[0]
		d.queue = d.queue[1:]
		d.busy = true
		url := d.url
		d.mu.Unlock()

		rec := d.send(url, p.d)

		d.mu.Lock()
		d.records = append(d.records, rec)
		d.busy = false
		d.cond.Broadcast()
		d.mu.Unlock()
		close(p.done)
	}
}

func (d *deliverer) stop() {
	d.mu.Lock()
	d.stopped = true
	d.cond.Broadcast()
	d.mu.Unlock()
	<-d.exited
}

func (d *deliverer) push(p *pendingDelivery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		close(p.done)
		return
	}
	d.queue = append(d.queue, p)
	d.cond.Broadcast()
}

func (d *deliverer) send(url string, rec Delivery) Delivery {
	rec.URL = url
	rec.DeliveredAt = d.s.clock.Now()
	if url == "" {
		rec.Error = "no webhook URL configured"
		return rec
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(rec.Payload))
	if err != nil {
		rec.Error = fmt.Sprintf("build request: %v", err)
		return rec
	}
	secret := []byte(d.s.webhookSecret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", hookUserAgent)
	req.Header.Set("X-GitHub-Event", rec.Event)
	req.Header.Set("X-GitHub-Delivery", rec.ID)
	req.Header.Set("X-GitHub-Hook-ID", hookID)
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(appID))
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-Hub-Signature", "sha1="+hmacHex(sha1.New, secret, rec.Payload))
	req.Header.Set("X-Hub-Signature-256", SignatureSHA256(secret, rec.Payload))
	resp, err := d.client.Do(req)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	rec.StatusCode = resp.StatusCode
	rec.ResponseBody = string(body)
	return rec
}

// SignatureSHA256 is the X-Hub-Signature-256 value GitHub sends for body.
func SignatureSHA256(secret, body []byte) string {
	return "sha256=" + hmacHex(sha256.New, secret, body)
}

func hmacHex(h func() hash.Hash, key, body []byte) string {
	m := hmac.New(h, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SetWebhookURL sets where deliveries go. Until it is set, deliveries are recorded
// with an error and not sent.
func (s *Server) SetWebhookURL(url string) {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	s.hooks.url = url
}

// Deliveries returns every delivery attempt so far, oldest first.
func (s *Server) Deliveries() []Delivery {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return slices.Clone(s.hooks.records)
}

// DeliveriesOf returns the delivery attempts of one event (and action, if not "").
func (s *Server) DeliveriesOf(event, action string) []Delivery {
	var out []Delivery
	for _, d := range s.Deliveries() {
		if d.Event == event && (action == "" || d.Action == action) {
			out = append(out, d)
		}
	}
	return out
}

// WaitForDeliveries blocks until every fired event has been delivered (or failed).
// Events that REST calls cause are delivered asynchronously, as on GitHub; test
// helpers (Merge, PushCommit, CreateInstallation, …) return only after theirs.
func (s *Server) WaitForDeliveries() {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	for (len(s.hooks.queue) > 0 || s.hooks.busy) && !s.hooks.stopped {
		s.hooks.cond.Wait()
	}
}

// Redeliver sends an earlier delivery again with the same id and body, as GitHub's
// "Redeliver" button does, and returns the new attempt.
func (s *Server) Redeliver(t TB, deliveryID string) Delivery {
	t.Helper()
	var orig *Delivery
	for _, d := range s.Deliveries() {
		if d.ID == deliveryID {
			orig = &d
			break
		}
	}
	if orig == nil {
		t.Fatalf("no delivery %s", deliveryID)
	}
	again := *orig
	again.Redelivery = true
	again.StatusCode, again.ResponseBody, again.Error = 0, "", ""
	return s.deliverAndWait(t, again)
}

// DeliverPayload signs and delivers a raw payload (e.g. a fixture from
// testdata/webhooks) under a new delivery id and returns the attempt.
func (s *Server) DeliverPayload(t TB, event string, payload []byte) Delivery {
	t.Helper()
	var meta struct {
		Action       string `json:"action"`
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
	}
	if err := json.Unmarshal(payload, &meta); err != nil {
		t.Fatalf("payload of %s is not JSON: %v", event, err)
	}
	return s.deliverAndWait(t, Delivery{
		ID:             uuid.NewString(),
		Event:          event,
		Action:         meta.Action,
		InstallationID: meta.Installation.ID,
		Payload:        payload,
	})
}

func (s *Server) deliverAndWait(t TB, d Delivery) Delivery {
	t.Helper()
	p := &pendingDelivery{d: d, done: make(chan struct{})}
	s.hooks.push(p)
	<-p.done
	recs := s.Deliveries()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].ID == d.ID {
			return recs[i]
		}
	}
	t.Fatalf("delivery %s was not recorded (server closed?)", d.ID)
	return Delivery{}
}

// enqueueLocked queues an event for delivery if the App receives it and returns a
// channel closed once it has been delivered. Installation events always reach the
// App; others only when it is subscribed to them.
func (h *deliverer) enqueueLocked(event string, payload any, inst *installation) <-chan struct{} {
	done := make(chan struct{})
	alwaysSent := event == "installation" || event == "installation_repositories"
	if inst == nil || (!alwaysSent && !slices.Contains(h.s.app.events, event)) {
		close(done)
		return done
	}
	body, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("githubtest: encode %s payload: %v", event, err))
	}
	var meta struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(body, &meta)
	h.push(&pendingDelivery{
		d: Delivery{
			ID:             uuid.NewString(),
			Event:          event,
			Action:         meta.Action,
			InstallationID: inst.id,
			Payload:        body,
		},
		done: done,
	})
	return done
}

// repoEventLocked fires an event about a repository to the installation that can see
// it; build receives the installation reference events carry.
func (s *Server) repoEventLocked(rp *repo, event string, build func(inst *github.Installation) any) <-chan struct{} {
	inst := s.installationForRepoLocked(rp)
	if inst == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	ref := &github.Installation{ID: ptr(inst.id), NodeID: ptr(nodeID("Installation", inst.id))}
	return s.hooks.enqueueLocked(event, build(ref), inst)
}

func waitAll(chans []<-chan struct{}) {
	for _, c := range chans {
		<-c
	}
}

// refUpdatedLocked does what GitHub does after a ref moves: a push event, a check
// suite for the new head, and for pull requests from that branch a synchronize (or,
// when the branch is deleted, closing them).
func (s *Server) refUpdatedLocked(rp *repo, name plumbing.ReferenceName, before, after plumbing.Hash, forced bool, sender *account) []<-chan struct{} {
	rp.pushedAt = s.clock.Now()
	var done []<-chan struct{}
	done = append(done, s.firePushLocked(rp, name, before, after, forced, sender))
	if !name.IsBranch() {
		return done
	}
	branch := name.Short()
	if !after.IsZero() {
		done = append(done, s.fireCheckSuiteLocked(rp, "requested", after.String(), branch, sender))
	}
	for _, pr := range rp.pulls {
		if pr.state != "open" || pr.head != branch || pr.fork != nil {
			continue
		}
		if after.IsZero() {
			done = append(done, s.closePullLocked(rp, pr, sender)...)
			continue
		}
		pr.headSHA = after.String()
		pr.updatedAt = s.clock.Now()
		done = append(done, s.firePullLocked(rp, pr, "synchronize", sender, func(ev *github.PullRequestEvent) {
			ev.Before = ptr(before.String())
			ev.After = ptr(after.String())
		}))
	}
	return done
}

func (s *Server) firePushLocked(rp *repo, name plumbing.ReferenceName, before, after plumbing.Hash, forced bool, sender *account) <-chan struct{} {
	full := rp.fullName()
	ev := &github.PushEvent{
		Ref:     ptr(name.String()),
		Before:  ptr(before.String()),
		After:   ptr(after.String()),
		Created: ptr(before.IsZero()),
		Deleted: ptr(after.IsZero()),
		Forced:  ptr(forced),
		Compare: ptr(s.htmlURL("%s/compare/%s...%s", full, before.String()[:12], after.String()[:12])),
		Commits: []*github.HeadCommit{},
		Repo:    s.pushRepoJSON(rp),
		Pusher:  &github.CommitAuthor{Name: ptr(sender.login), Email: ptr(fmt.Sprintf("%d+%s@users.noreply.github.com", sender.id, sender.login))},
		Sender:  s.userJSON(sender),
	}
	if !after.IsZero() {
		commits := rp.pushedCommits(name, before, after)
		if len(commits) > maxPushCommits {
			commits = commits[len(commits)-maxPushCommits:]
		}
		for _, c := range commits {
			ev.Commits = append(ev.Commits, s.headCommitJSON(rp, c))
		}
		if head, err := object.GetCommit(rp.storer(), after); err == nil {
			ev.HeadCommit = s.headCommitJSON(rp, head)
		}
	}
	return s.repoEventLocked(rp, "push", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
}

// pushedCommits are the commits a push introduced, oldest first: those reachable
// from after and not from before (or, for a new ref, from no other branch).
func (rp *repo) pushedCommits(name plumbing.ReferenceName, before, after plumbing.Hash) []*object.Commit {
	head, err := object.GetCommit(rp.storer(), after)
	if err != nil {
		return nil
	}
	known := map[plumbing.Hash]bool{}
	mark := func(h plumbing.Hash) {
		if c, err := object.GetCommit(rp.storer(), h); err == nil {
			_ = walkCommits(c, func(c *object.Commit) bool {
				known[c.Hash] = true
				return true
			})
		}
	}
	if before.IsZero() {
		refs, _ := rp.branches()
		for _, ref := range refs {
			if ref.Name() != name {
				mark(ref.Hash())
			}
		}
	} else {
		mark(before)
	}
	var out []*object.Commit
	_ = walkCommits(head, func(c *object.Commit) bool {
		if known[c.Hash] {
			return false
		}
		out = append(out, c)
		return true
	})
	slices.Reverse(out)
	return out
}

func (s *Server) headCommitJSON(rp *repo, c *object.Commit) *github.HeadCommit {
	hc := &github.HeadCommit{
		ID:        ptr(c.Hash.String()),
		TreeID:    ptr(c.TreeHash.String()),
		Distinct:  ptr(true),
		Message:   ptr(c.Message),
		Timestamp: ts(c.Committer.When),
		URL:       ptr(s.htmlURL("%s/commit/%s", rp.fullName(), c.Hash)),
		Author:    &github.CommitAuthor{Name: ptr(c.Author.Name), Email: ptr(c.Author.Email)},
		Committer: &github.CommitAuthor{Name: ptr(c.Committer.Name), Email: ptr(c.Committer.Email)},
		Added:     []string{},
		Removed:   []string{},
		Modified:  []string{},
	}
	var parentTree *object.Tree
	if len(c.ParentHashes) > 0 {
		if p, err := object.GetCommit(rp.storer(), c.ParentHashes[0]); err == nil {
			parentTree, _ = p.Tree()
		}
	}
	tree, err := c.Tree()
	if err != nil {
		return hc
	}
	files, err := s.diffFiles(rp, parentTree, tree, c.Hash.String())
	if err != nil {
		return hc
	}
	for _, f := range files {
		switch f.GetStatus() {
		case "added":
			hc.Added = append(hc.Added, f.GetFilename())
		case "removed":
			hc.Removed = append(hc.Removed, f.GetFilename())
		default:
			hc.Modified = append(hc.Modified, f.GetFilename())
		}
	}
	return hc
}

// pushRepoJSON is the repository as push payloads carry it (timestamps as Unix
// seconds, owner with name and email).
func (s *Server) pushRepoJSON(rp *repo) *github.PushEventRepository {
	r := s.repoJSON(rp)
	return &github.PushEventRepository{
		ID:            r.ID,
		NodeID:        r.NodeID,
		Name:          r.Name,
		FullName:      r.FullName,
		Owner:         r.Owner,
		Private:       r.Private,
		Description:   r.Description,
		Fork:          r.Fork,
		CreatedAt:     &github.Timestamp{Time: rp.createdAt},
		PushedAt:      &github.Timestamp{Time: rp.pushedAt},
		UpdatedAt:     r.UpdatedAt,
		DefaultBranch: r.DefaultBranch,
		MasterBranch:  r.DefaultBranch,
		Organization:  ptr(rp.owner.login),
		URL:           r.HTMLURL,
		HTMLURL:       r.HTMLURL,
		GitURL:        r.GitURL,
		SSHURL:        r.SSHURL,
		CloneURL:      r.CloneURL,
		Archived:      ptr(false),
		Disabled:      ptr(false),
	}
}
