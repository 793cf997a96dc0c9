package kube

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestReadCache(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	cache := newReadCache(clock, 10*time.Second, 2*time.Second, time.Second)
	var fetches atomic.Int32
	fetch := func(context.Context) (any, error) { return fetches.Add(1), nil }
	get := func(mode ReadMode) int32 {
		t.Helper()
		v, err := cache.get(context.Background(), readKey{read: "k"}, mode, fetch)
		if err != nil {
			t.Fatal(err)
		}
		return v.(int32)
	}

	steps := []struct {
		name    string
		advance time.Duration
		mode    ReadMode
		want    int32
	}{
		{name: "first read fetches", mode: Cached, want: 1},
		{name: "within TTL is shared", advance: 9 * time.Second, mode: Cached, want: 1},
		{name: "after TTL fetches again", advance: 2 * time.Second, mode: Cached, want: 2},
		{name: "refresh of a young result is shared", advance: time.Second, mode: Refresh, want: 2},
		{name: "refresh of a result older than the floor fetches", advance: 2 * time.Second, mode: Refresh, want: 3},
		{name: "cached read after refresh uses it", mode: Cached, want: 3},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		if got := get(s.mode); got != s.want {
			t.Fatalf("%s: got value of fetch %d, want %d", s.name, got, s.want)
		}
	}
}

func TestReadCacheCollapsesConcurrentReads(t *testing.T) {
	cache := newReadCache(clocktesting.NewFakeClock(time.Now()), 10*time.Second, 2*time.Second, time.Second)
	release := make(chan struct{})
	var fetches atomic.Int32
	fetch := func(context.Context) (any, error) {
		fetches.Add(1)
		<-release
		return "apps", nil
	}
	const callers = 50
	var started, done sync.WaitGroup
	started.Add(callers)
	for range callers {
		done.Go(func() {
			started.Done()
			if v, err := cache.get(context.Background(), readKey{read: "k"}, Cached, fetch); err != nil || v != "apps" {
				t.Errorf("get = %v, %v", v, err)
			}
		})
	}
	started.Wait()
	close(release)
	done.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches for %d concurrent callers, want 1", n, callers)
	}
}

// A caller whose budget ends returns at once; the shared fetch goes on for the others
// and its result is cached.
func TestReadCacheCallerBudgetDoesNotCancelSharedFetch(t *testing.T) {
	cache := newReadCache(clocktesting.NewFakeClock(time.Now()), 10*time.Second, 2*time.Second, time.Minute)
	release := make(chan struct{})
	fetchErr := make(chan error, 1)
	fetch := func(ctx context.Context) (any, error) {
		<-release
		fetchErr <- ctx.Err()
		return "apps", nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cache.get(ctx, readKey{read: "k"}, Cached, fetch); !errors.Is(err, context.Canceled) {
		t.Fatalf("get with a cancelled context = %v", err)
	}
	close(release)
	if err := <-fetchErr; err != nil {
		t.Fatalf("the shared fetch saw the caller's cancellation: %v", err)
	}
	v, err := cache.get(context.Background(), readKey{read: "k"}, Cached, func(context.Context) (any, error) { return "again", nil })
	if err != nil || v != "apps" {
		t.Errorf("get after the shared fetch = %v, %v; want the cached result", v, err)
	}
}

func TestReadCacheDoesNotKeepErrors(t *testing.T) {
	cache := newReadCache(clocktesting.NewFakeClock(time.Now()), 10*time.Second, 2*time.Second, time.Second)
	boom := errors.New("boom")
	if _, err := cache.get(context.Background(), readKey{read: "k"}, Cached, func(context.Context) (any, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	v, err := cache.get(context.Background(), readKey{read: "k"}, Cached, func(context.Context) (any, error) { return "ok", nil })
	if err != nil || v != "ok" {
		t.Errorf("after a failed fetch get = %v, %v", v, err)
	}
}

// A Fresh read asks the API server even when a young result is cached and does not
// wait on a fetch that started before it; later reads share what it fetched.
func TestReadCacheFreshReadIsNeverOlderThanTheCall(t *testing.T) {
	cache := newReadCache(clocktesting.NewFakeClock(time.Now()), 10*time.Second, 2*time.Second, time.Minute)
	if _, err := cache.get(context.Background(), readKey{read: "k"}, Cached, func(context.Context) (any, error) { return "before", nil }); err != nil {
		t.Fatal(err)
	}
	v, err := cache.get(context.Background(), readKey{read: "k"}, Fresh, func(context.Context) (any, error) { return "now", nil })
	if err != nil || v != "now" {
		t.Fatalf("fresh read over a young cached result = %v, %v; want a fetch of its own", v, err)
	}
	if v, _ := cache.get(context.Background(), readKey{read: "k"}, Cached, func(context.Context) (any, error) { return "again", nil }); v != "now" {
		t.Errorf("cached read after the fresh one = %v, want its result", v)
	}

	release := make(chan struct{})
	inFlight := make(chan struct{})
	older := make(chan any, 1)
	go func() {
		v, _ := cache.get(context.Background(), readKey{read: "slow"}, Refresh, func(context.Context) (any, error) {
			close(inFlight)
			<-release
			return "started before", nil
		})
		older <- v
	}()
	<-inFlight
	v, err = cache.get(context.Background(), readKey{read: "slow"}, Fresh, func(context.Context) (any, error) { return "after", nil })
	if err != nil || v != "after" {
		t.Errorf("fresh read during an older fetch = %v, %v; want a fetch of its own", v, err)
	}
	close(release)
	if v := <-older; v != "started before" {
		t.Errorf("the older read got %v", v)
	}
}

// TestReadCacheKeepsObjectsWhoseNamesJoinAlikeApart: the reads of two objects
// whose namespace and name, joined with "/", spell the same (namespace "a/b" with
// name "c", namespace "a" with name "b/c") are two entries and two fetches, in the
// cache and in the reads it shares while they run.
func TestReadCacheKeepsObjectsWhoseNamesJoinAlikeApart(t *testing.T) {
	pairs := map[string][2]readKey{
		"a slash moved between namespace and name": {
			objectKey(ApplicationResource, "a/b", "c"), objectKey(ApplicationResource, "a", "b/c"),
		},
		"a name that spells another's namespace and name": {
			objectKey(ApplicationResource, "", "a/b"), objectKey(ApplicationResource, "a", "b"),
		},
		"quotes and spaces in a name": {
			objectKey(ApplicationResource, `a" "b`, "c"), objectKey(ApplicationResource, "a", `b" "c`),
		},
		"a resource that spells another's namespace": {
			objectKey(schema.GroupVersionResource{Group: "g", Version: "v", Resource: "r a"}, "b", "c"),
			objectKey(schema.GroupVersionResource{Group: "g", Version: "v", Resource: "r"}, "a b", "c"),
		},
	}
	for name, keys := range pairs {
		t.Run(name, func(t *testing.T) {
			if keys[0] == keys[1] || keys[0].flightKey() == keys[1].flightKey() {
				t.Fatalf("%+v and %+v share a key (%s)", keys[0], keys[1], keys[0].flightKey())
			}
			cache := newReadCache(clocktesting.NewFakeClock(time.Now()), 10*time.Second, 2*time.Second, time.Second)
			for i, want := range []string{"first", "second"} {
				v, err := cache.get(context.Background(), keys[i], Cached, func(context.Context) (any, error) { return want, nil })
				if err != nil || v != want {
					t.Fatalf("read %+v = %v, %v; want %q, its own fetch", keys[i], v, err, want)
				}
			}
		})
	}
}
