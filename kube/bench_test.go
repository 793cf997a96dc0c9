package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

const (
	benchApps            = 500
	benchResourcesPerApp = 10
	benchNamespaces      = 10
	benchQPS             = 100000
)

// BenchmarkDecide measures path decisions on a cluster with 500 Applications and
// 5,000 tracked resources. Run with enough iterations for a p99, for example
//
//	go test -run '^$' -bench BenchmarkDecide -benchtime 200x ./kube/
//
// cached: the same targets again within the 10 s TTL, answered from the cache; cold:
// every read expired (the cache clock jumps past the TTL before each decision), so
// each decision lists all Applications and reads its targets. concurrent_50: rounds
// of 50 simultaneous decisions on different targets, one simulated second apart; it
// fails if any 10 s window sees more than one Application list.
//
// The client-side rate limit is raised: back-to-back iterations would drain its
// bucket and measure the limiter, while a decision made on a person's request finds
// the bucket full.
func BenchmarkDecide(b *testing.B) {
	env := kubetest.StartPrivate(b, kubetest.Options{})
	argoNS := env.Namespace(b, "argocd")
	var workNS []string
	for range benchNamespaces {
		workNS = append(workNS, env.Namespace(b, "work"))
	}
	objs, refs := benchObjects(argoNS, workNS)
	start := time.Now()
	createAll(b, env, objs)
	b.Logf("created %d Applications and %d tracked resources in %v", benchApps, len(refs), time.Since(start).Round(time.Millisecond))

	pick := func(i int) argocd.ResourceRef { return refs[(i*7919)%len(refs)] }
	targetsOf := func(i, n int) []argocd.ResourceRef {
		out := make([]argocd.ResourceRef, n)
		for j := range out {
			out[j] = pick(i*n + j*benchResourcesPerApp*37 + j)
		}
		return out
	}

	for _, n := range []int{1, 5} {
		for _, cold := range []bool{false, true} {
			name := fmt.Sprintf("targets_%d/cached", n)
			if cold {
				name = fmt.Sprintf("targets_%d/cold", n)
			}
			b.Run(name, func(b *testing.B) {
				clock := clocktesting.NewFakeClock(time.Now())
				c := clusterFor(b, env.Kubeconfig, kube.Options{Clock: clock, QPS: benchQPS, Burst: benchQPS})
				ctx := context.Background()
				// Correctness first, outside the measurement.
				if d := c.Decide(ctx, targetsOf(0, n)); !d.Known || d.Path != argocd.PathGit {
					b.Fatalf("decision = %+v", d)
				}
				latencies := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					if cold {
						clock.Step(kube.DefaultCacheTTL)
					}
					targets := targetsOf(0, n)
					if cold {
						targets = targetsOf(i, n)
					}
					t0 := time.Now()
					d := c.Decide(ctx, targets)
					latencies = append(latencies, time.Since(t0))
					if !d.Known {
						b.Fatalf("decision %d unknown: %s", i, d.Reason)
					}
				}
				b.StopTimer()
				reportPercentiles(b, latencies)
			})
		}
	}

	b.Run("concurrent_50", func(b *testing.B) {
		clock := clocktesting.NewFakeClock(time.Now())
		var mu sync.Mutex
		var listTimes []time.Time
		wrap := func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodGet && r.URL.Path == "/apis/argoproj.io/v1alpha1/applications" {
					mu.Lock()
					listTimes = append(listTimes, clock.Now())
					mu.Unlock()
				}
				return rt.RoundTrip(r)
			})
		}
		c := clusterFor(b, env.Kubeconfig, kube.Options{Clock: clock, WrapTransport: wrap, QPS: benchQPS, Burst: benchQPS})
		ctx := context.Background()
		var latMu sync.Mutex
		latencies := make([]time.Duration, 0, 50*b.N)
		b.ResetTimer()
		for round := range b.N {
			var wg sync.WaitGroup
			for g := range 50 {
				wg.Go(func() {
					t0 := time.Now()
					d := c.Decide(ctx, []argocd.ResourceRef{pick(round*50 + g)})
					el := time.Since(t0)
					if !d.Known {
						b.Errorf("decision unknown: %s", d.Reason)
					}
					latMu.Lock()
					latencies = append(latencies, el)
					latMu.Unlock()
				})
			}
			wg.Wait()
			clock.Step(time.Second)
		}
		b.StopTimer()
		reportPercentiles(b, latencies)
		worst := 0
		for i := range listTimes {
			n := 0
			for _, t := range listTimes[i:] {
				if t.Sub(listTimes[i]) < kube.DefaultCacheTTL {
					n++
				}
			}
			worst = max(worst, n)
		}
		b.ReportMetric(float64(len(listTimes)), "app-lists")
		b.ReportMetric(float64(worst), "max-app-lists/10s")
		if worst > 1 {
			b.Fatalf("%d Application lists within one 10 s window", worst)
		}
	})
}

func reportPercentiles(b *testing.B, latencies []time.Duration) {
	slices.Sort(latencies)
	at := func(p float64) float64 {
		i := int(p * float64(len(latencies)-1))
		return float64(latencies[i].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// benchObjects builds Applications that each manage benchResourcesPerApp tracked
// ConfigMaps, and returns the refs of those ConfigMaps.
func benchObjects(argoNS string, workNS []string) ([]*unstructured.Unstructured, []argocd.ResourceRef) {
	var objs []*unstructured.Unstructured
	var refs []argocd.ResourceRef
	for a := range benchApps {
		name := fmt.Sprintf("app-%03d", a)
		ns := workNS[a%len(workNS)]
		app := kubetest.App{
			Namespace: argoNS, Name: name, DestinationNamespace: ns,
			RepoURL: fmt.Sprintf("https://github.com/kukie-demo/team-%d.git", a%20), Path: "apps/" + name,
			Automated: a%2 == 0, SelfHeal: a%4 == 0,
		}
		for r := range benchResourcesPerApp {
			cm := fmt.Sprintf("%s-cm-%d", name, r)
			app.Resources = append(app.Resources, kubetest.AppResource{Kind: "ConfigMap", Namespace: ns, Name: cm})
			objs = append(objs, kubetest.ConfigMap(ns, cm,
				map[string]string{argocd.DefaultInstanceLabel: name},
				map[string]string{argocd.TrackingIDAnnotation: fmt.Sprintf("%s:/ConfigMap:%s/%s", name, ns, cm)}))
			refs = append(refs, argocd.ResourceRef{Kind: "ConfigMap", Namespace: ns, Name: cm})
		}
		objs = append(objs, kubetest.Application(app))
	}
	return objs, refs
}

// createAll creates objects with a few workers; failures are collected because
// tb.Fatal may not be called from other goroutines.
func createAll(tb testing.TB, env *kubetest.Env, objs []*unstructured.Unstructured) {
	tb.Helper()
	work := make(chan *unstructured.Unstructured)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if err := env.Client.Create(context.Background(), o); err != nil {
					errs <- fmt.Errorf("create %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}
