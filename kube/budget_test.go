package kube

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kukie/kukie-gitops/argocd"
)

// blockingTransport holds every request until its context ends and records the
// deadline it carried.
type blockingTransport struct {
	mu        sync.Mutex
	requests  int
	deadlines []time.Duration
	returned  chan struct{}
	once      sync.Once
}

func (b *blockingTransport) wrap(http.RoundTripper) http.RoundTripper { return b }

func (b *blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.requests++
	if dl, ok := r.Context().Deadline(); ok {
		b.deadlines = append(b.deadlines, time.Until(dl))
	} else {
		b.deadlines = append(b.deadlines, -1)
	}
	b.mu.Unlock()
	<-r.Context().Done()
	b.once.Do(func() { close(b.returned) })
	return nil, r.Context().Err()
}

func TestDecideWaitingForSlotCountsAgainstBudget(t *testing.T) {
	transport := &blockingTransport{returned: make(chan struct{})}
	c, err := NewCluster("busy", &rest.Config{Host: "https://127.0.0.1:1"}, Options{
		Concurrency: 1, DecisionBudget: 200 * time.Millisecond, WrapTransport: transport.wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.slots.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	defer c.slots.Release(1)

	d := c.Decide(context.Background(), []argocd.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"}})
	if d.Known || d.Failure != argocd.FailureUnreachable {
		t.Fatalf("decision = known %v failure %q (%s)", d.Known, d.Failure, d.Reason)
	}
	if !strings.Contains(d.Targets[0].Err.Detail, "deadline exceeded") {
		t.Errorf("target error = %q", d.Targets[0].Err.Detail)
	}
	transport.mu.Lock()
	defer transport.mu.Unlock()
	if transport.requests != 0 {
		t.Errorf("%d requests were sent while no slot was free", transport.requests)
	}
}

// The caller's budget, not the shared fetch's, decides when Decide returns: the fetch
// is still waiting on the API server when the decision is already made.
func TestDecideReturnsWhenItsBudgetEnds(t *testing.T) {
	transport := &blockingTransport{returned: make(chan struct{})}
	c, err := NewCluster("slow", &rest.Config{Host: "https://127.0.0.1:1"}, Options{
		DecisionBudget: 200 * time.Millisecond, WrapTransport: transport.wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Decide(context.Background(), []argocd.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"}})
	select {
	case <-transport.returned:
		t.Fatal("the API call ended before the decision returned; the decision waited for the call timeout instead of its budget")
	default:
	}
	if d.Known || d.Failure != argocd.FailureUnreachable {
		t.Fatalf("decision = known %v failure %q (%s)", d.Known, d.Failure, d.Reason)
	}
	transport.mu.Lock()
	defer transport.mu.Unlock()
	for _, dl := range transport.deadlines {
		if dl < 0 || dl > DefaultCallTimeout {
			t.Errorf("request deadline %v, want at most the call timeout %v", dl, DefaultCallTimeout)
		}
	}
}

// An uncached call runs within min(call timeout, what the caller has left).
func TestCallGetsRemainingBudget(t *testing.T) {
	transport := &blockingTransport{returned: make(chan struct{})}
	c, err := NewCluster("slow", &rest.Config{Host: "https://127.0.0.1:1"}, Options{WrapTransport: transport.wrap})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = c.do(ctx, "probe", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:1/version", nil)
		_, err := transport.RoundTrip(req)
		return err
	})
	if ClassOf(err) != argocd.FailureUnreachable {
		t.Fatalf("err = %v", err)
	}
	if dl := transport.deadlines[0]; dl < 0 || dl > time.Second {
		t.Errorf("call deadline %v, want at most the 1 s the caller had left", dl)
	}
}
