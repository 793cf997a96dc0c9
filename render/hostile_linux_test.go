package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// hostileChildEnv makes the test binary plan one repository as a child process
// under hard limits (see runHostileChild) instead of running the tests.
const hostileChildEnv = "KUKIE_TEST_HOSTILE_PLAN"

// childMemory is the address space a child may add to what it holds at start: a
// 256 MiB heap and as much again, since the collector lets the heap grow to twice
// what is live. The race detector maps several times the heap besides.
const childMemory = 512 << 20

// childCPUSeconds stops a child that runs away instead of letting it run as
// long as the package's test timeout: a guard, not a measure of speed.
const childCPUSeconds = 120

// childTimeout is the render timeout in a child. The bound a case is about must
// be what stops its plan, never the clock: CPU time does not grow with the load
// of the machine, but the wall clock does (a plan of 13 s alone under the race
// detector ran past 50 s with a load of 17 on two cores). So the CPU limit
// stops a child that computes on, and this only one that waits on something
// for good.
const childTimeout = 10 * time.Minute

func TestMain(m *testing.M) {
	if spec := os.Getenv(hostileChildEnv); spec != "" {
		os.Exit(runHostileChild(spec))
	}
	os.Exit(m.Run())
}

// hostileSpec is what a child plans.
type hostileSpec struct {
	Repo string
	// Apps are the repository's Applications, the one that manages the target first.
	Apps []Application
	// HelmMemoryBytes, when set, is the memory limit of the child's Helm workers.
	HelmMemoryBytes int64
}

// hostileOutcome is what the child reports on stdout.
type hostileOutcome struct {
	Verified bool
	Code     string
	Reason   string
	Err      string
	Elapsed  time.Duration
	// PeakRSS is the child's VmHWM in KiB: its own peak, which the rusage of a
	// child started by vfork does not give (it counts the parent's pages too).
	PeakRSS int64
}

// runHostileChild limits its own address space and CPU time, plans scaling
// deployment web to three replicas, and prints the outcome.
func runHostileChild(spec string) int {
	var s hostileSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "hostile child:", err)
		return 3
	}
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile child:", err)
		return 3
	}
	var pages uint64
	if _, err := fmt.Sscan(string(statm), &pages); err != nil {
		fmt.Fprintln(os.Stderr, "hostile child: read statm:", err)
		return 3
	}
	headroom := uint64(childMemory)
	if raceEnabled {
		headroom *= 6
	}
	timeout.Store(int64(childTimeout))
	as := pages*uint64(os.Getpagesize()) + headroom
	// A lower limit the test run itself is under stays: it may not be raised.
	var inherited syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &inherited); err == nil && inherited.Max < as {
		as = inherited.Max
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		fmt.Fprintln(os.Stderr, "hostile child: limit memory:", err)
		return 3
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: childCPUSeconds, Max: childCPUSeconds}); err != nil {
		fmt.Fprintln(os.Stderr, "hostile child: limit CPU:", err)
		return 3
	}
	ctx := context.Background()
	if s.HelmMemoryBytes > 0 {
		ctx = WithHelmWorkers(ctx, helmexec.New(helmexec.Config{Workers: 1, MemoryBytes: s.HelmMemoryBytes}))
	}
	start := time.Now()
	_, err = Plan(ctx, Request{
		RepoDir: s.Repo, Apps: s.Apps, App: s.Apps[0].Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}},
	})
	out := hostileOutcome{Verified: err == nil, Elapsed: time.Since(start), PeakRSS: peakRSS()}
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		out.Code, out.Reason = ref.Code, ref.Reason
	case err != nil:
		out.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 3
	}
	return 0
}

// peakRSS returns the process's peak resident set in KiB (VmHWM), or -1.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscan(rest, &kib); err == nil {
				return kib
			}
		}
	}
	return -1
}

// planInChild plans the app of repo in a child process under the hard limits and
// returns its outcome; a child killed by a limit fails the test.
func planInChild(t *testing.T, repo string, apps []Application) hostileOutcome {
	t.Helper()
	return planSpecInChild(t, hostileSpec{Repo: repo, Apps: apps})
}

// planSpecInChild is planInChild of a whole spec.
func planSpecInChild(t *testing.T, s hostileSpec) hostileOutcome {
	t.Helper()
	apps := s.Apps
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostileChildEnv+"="+string(spec))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		t.Fatalf("child planning %s did not finish within its limits (%v):\n%s", apps[0].Path, err, tail)
	}
	wall := time.Since(start)
	var out hostileOutcome
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("child output %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	t.Logf("plan %v (child process %v), peak RSS %d MiB: %s", out.Elapsed.Round(time.Millisecond), wall.Round(time.Millisecond), out.PeakRSS>>10, out.describe())
	return out
}

func (o hostileOutcome) describe() string {
	switch {
	case o.Verified:
		return "verified"
	case o.Code != "":
		return "refused (" + o.Code + "): " + o.Reason
	default:
		return "error: " + o.Err
	}
}

// aliasBomb is a billion-laughs mapping body (nine levels of nine aliases each,
// about 400 bytes expanding to 9^9 strings), each line indented by indent.
func aliasBomb(indent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sa: &a [%s]\n", indent, strings.TrimSuffix(strings.Repeat(`"lol",`, 9), ","))
	for c := 'b'; c <= 'i'; c++ {
		prev := string(c - 1)
		fmt.Fprintf(&b, "%s%c: &%c [%s]\n", indent, c, c, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
	}
	return b.String()
}

func configMaps(n int, prefix string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s%d\ndata:\n  k: v\n", prefix, i)
	}
	return b.String()
}

// wideConfigMap is about 4.9 MB: one ConfigMap of keys keys.
func wideConfigMap(name string, keys int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	value := strings.Repeat("v", 90)
	for i := range keys {
		fmt.Fprintf(&b, "  key%06d: %s\n", i, value)
	}
	return b.String()
}

func kustomization(resources ...string) string {
	return "resources:\n- " + strings.Join(resources, "\n- ") + "\n"
}

// TestHostileRepositoriesAreRefusedWithinBounds plans each hostile shape in a
// child process under a hard memory limit: each must end with a refusal naming
// the bound, never by exhausting memory or running on.
func TestHostileRepositoriesAreRefusedWithinBounds(t *testing.T) {
	kust := func(path string) Application {
		return Application{Name: "web", Path: path, SourceType: SourceKustomize, Namespace: "web"}
	}
	dir := func(path string) Application {
		return Application{Name: "web", Path: path, SourceType: SourceDirectory, Namespace: "web"}
	}
	bombDoc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n" + aliasBomb("  ")
	cases := map[string]struct {
		files  func() map[string]string
		app    Application
		others []Application // more Applications of the repository
		code   string
		reason string
		// reasonHas, when set, is a part of the reason instead of all of it.
		reasonHas string
	}{
		"alias bomb as a kustomize resource": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/bomb.yaml": bombDoc, "app/kustomization.yaml": kustomization("deploy.yaml", "bomb.yaml")}
			},
			app: kust("app"), code: CodeAliasBomb, reason: "app/bomb.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"alias bomb in a kustomize patch": {
			files: func() map[string]string {
				patch := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n" + aliasBomb("    ")
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/patch.yaml": patch, "app/kustomization.yaml": kustomization("deploy.yaml") + "patches:\n- path: patch.yaml\n"}
			},
			app: kust("app"), code: CodeAliasBomb, reason: "app/patch.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"alias bomb in the kustomization file": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": kustomization("deploy.yaml") + "commonAnnotations:\n" + aliasBomb("  ")}
			},
			app: kust("app"), code: CodeAliasBomb, reason: "app/kustomization.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"alias bomb in a base's kustomization file": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": kustomization("deploy.yaml", "../base"),
					"base/kustomization.yaml": "commonAnnotations:\n" + aliasBomb("  ")}
			},
			app: kust("app"), code: CodeAliasBomb, reason: "base/kustomization.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"alias bomb in a directory app": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/bomb.yaml": bombDoc}
			},
			app: dir("app"), code: CodeAliasBomb, reason: "app/bomb.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"10,000 documents in a kustomize app": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/many.yaml": configMaps(10_000, "cm"), "app/kustomization.yaml": kustomization("deploy.yaml", "many.yaml")}
			},
			app: kust("app"), code: CodeTooLarge, reason: "app/many.yaml: more than 1000 YAML documents, at most 1000",
		},
		"10,000 documents in a directory app": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/many.yaml": configMaps(10_000, "cm")}
			},
			app: dir("app"), code: CodeTooLarge, reason: "app/many.yaml: more than 1000 YAML documents, at most 1000",
		},
		"documents spread over files": {
			files: func() map[string]string {
				files := map[string]string{"app/deploy.yaml": twoContainerDeployment}
				names := []string{"deploy.yaml"}
				for i := range 12 {
					name := fmt.Sprintf("cms%02d.yaml", i)
					files["app/"+name] = configMaps(100, fmt.Sprintf("cm%d-", i))
					names = append(names, name)
				}
				files["app/kustomization.yaml"] = kustomization(names...)
				return files
			},
			app: kust("app"), code: CodeTooLarge, reason: "reading app/cms09.yaml: the render reads more than 1000 YAML documents, at most 1000",
		},
		"deep nesting": {
			files: func() map[string]string {
				deep := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  k: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/deep.yaml": deep, "app/kustomization.yaml": kustomization("deploy.yaml", "deep.yaml")}
			},
			app: kust("app"), code: CodeTooLarge, reason: "app/deep.yaml: document 1 (line 1): nested 5003 levels deep, at most 256",
		},
		"a dense file of millions of nodes": {
			files: func() map[string]string {
				dense := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dense\ndata:\n  k: [" + strings.Repeat("0,", 2_000_000) + "0]\n"
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/dense.yaml": dense, "app/kustomization.yaml": kustomization("deploy.yaml", "dense.yaml")}
			},
			app: kust("app"), code: CodeTooLarge, reason: "app/dense.yaml: about 4000021 YAML nodes, at most 500000",
		},
		"one 4.9 MB file of 49,000 keys": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/wide.yaml": wideConfigMap("wide", 49_000), "app/kustomization.yaml": kustomization("deploy.yaml", "wide.yaml")}
			},
			app: kust("app"), code: CodeTooLarge, reason: "app/wide.yaml: document 1 (line 1): a mapping of 49000 keys, at most 5000",
		},
		"20 files of 4.9 MB": {
			files: func() map[string]string {
				files := map[string]string{"app/deploy.yaml": twoContainerDeployment}
				names := []string{"deploy.yaml"}
				for i := range 20 {
					name := fmt.Sprintf("big%02d.yaml", i)
					// Few nodes, many bytes: only the byte budget stops these.
					files["app/"+name] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big%d\ndata:\n  blob: %s\n", i, strings.Repeat("x", 4_900_000))
					names = append(names, name)
				}
				files["app/kustomization.yaml"] = kustomization(names...)
				return files
			},
			app: kust("app"), code: CodeTooLarge, reason: "reading app/big03.yaml: the render reads more than 16777216 bytes, at most 16777216",
		},
		"five apps reading 14.7 MB each": {
			files: func() map[string]string {
				files := map[string]string{"deploy.yaml": twoContainerDeployment}
				for a := 1; a <= 5; a++ {
					for f := 1; f <= 3; f++ {
						// Read, counted, and skipped as Argo CD skips them: the
						// bound is on what is read, whatever the content.
						files[fmt.Sprintf("b%d%d.yaml", a, f)] = "# +argocd:skip-file-rendering\n" + strings.Repeat("x", 4_900_000) + "\n"
					}
				}
				return files
			},
			// Each reads the deployment and its own three files, within the bound
			// of one render; the plan renders all five, as the edit reaches them.
			app: Application{Name: "a1", Path: ".", SourceType: SourceDirectory, Namespace: "web", Directory: DirectoryOptions{Include: "{deploy.yaml,b1*.yaml}"}},
			others: func() []Application {
				var apps []Application
				for a := 2; a <= 5; a++ {
					apps = append(apps, Application{Name: fmt.Sprintf("a%d", a), Path: ".", SourceType: SourceDirectory, Namespace: "web", Directory: DirectoryOptions{Include: fmt.Sprintf("{deploy.yaml,b%d*.yaml}", a)}})
				}
				return apps
			}(),
			// The edit changes the other apps' deployment too, so the refusal
			// also says so; the bound is what stops the third app.
			code: CodeLeak, reasonHas: "application a3 also reads the edited files but cannot be rendered: reading b32.yaml: the plan's renders read more than 67108864 bytes together, at most 67108864",
		},
		"a large patch set on every resource": {
			files: func() map[string]string {
				// Read within every bound, but kustomize would set the value on
				// each resource after its last read, where no deadline stops it.
				patch := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\ndata:\n  blob: " + strings.Repeat("x", 200_000) + "\n"
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/cms.yaml": configMaps(900, "cm"), "app/patch.yaml": patch,
					"app/kustomization.yaml": kustomization("deploy.yaml", "cms.yaml") + "patches:\n- path: patch.yaml\n  target:\n    kind: ConfigMap\n"}
			},
			app: kust("app"), code: CodeTooLarge, reason: "kustomization app: its transformers would set about 180261268 bytes over the resources they apply to (those of app/kustomization.yaml: 200068 bytes, each set on up to 901 resources), at most 16777216",
		},
		"a large annotation set on every resource": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/cms.yaml": configMaps(900, "cm"),
					"app/kustomization.yaml": kustomization("deploy.yaml", "cms.yaml") + "commonAnnotations:\n  note: " + strings.Repeat("x", 100_000) + "\n"}
			},
			app: kust("app"), code: CodeTooLarge, reason: "kustomization app: its transformers would set about 90103604 bytes over the resources they apply to (those of app/kustomization.yaml: 100004 bytes, each set on up to 901 resources), at most 16777216",
		},
		"kustomization graph too large": {
			files: func() map[string]string {
				// Each level includes both directories of the next: kustomize
				// would build the last level 2^20 times.
				files := map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": kustomization("deploy.yaml", "../l0a", "../l0b")}
				for l := range 20 {
					for _, s := range []string{"a", "b"} {
						k := "commonLabels:\n  level: leaf\n"
						if l < 19 {
							k = kustomization(fmt.Sprintf("../l%da", l+1), fmt.Sprintf("../l%db", l+1))
						}
						files[fmt.Sprintf("l%d%s/kustomization.yaml", l, s)] = k
					}
				}
				return files
			},
			app: kust("app"), code: CodeTooLarge, reason: "kustomization app: the build passes through more than 200 kustomizations (each base counted once for every time it is included), at most 200",
		},
		"kustomization cycle": {
			files: func() map[string]string {
				return map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": kustomization("deploy.yaml", "../b"), "b/kustomization.yaml": kustomization("../c"), "c/kustomization.yaml": kustomization("../app")}
			},
			app: kust("app"), code: CodeRenderFailed, reason: "kustomization cycle: app includes b includes c includes app",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, tc.files())
			out := planInChild(t, repo, append([]Application{tc.app}, tc.others...))
			if tc.reasonHas != "" {
				if out.Code != tc.code || !strings.Contains(out.Reason, tc.reasonHas) {
					t.Fatalf("got %s\nwant refused (%s) with: %s", out.describe(), tc.code, tc.reasonHas)
				}
				return
			}
			if out.Code != tc.code || out.Reason != tc.reason {
				t.Fatalf("got %s\nwant refused (%s): %s", out.describe(), tc.code, tc.reason)
			}
		})
	}
}
