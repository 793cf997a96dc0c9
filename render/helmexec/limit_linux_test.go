package helmexec

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestWorkerIsTheOOMKillersFirstChoice: a worker shares the service's memory
// cgroup, so when the container runs out the kernel must end a worker, not the
// service; the worker asks for that itself.
func TestWorkerIsTheOOMKillersFirstChoice(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	var pid int
	p.sent = func(n int) { pid = n }
	renderConfigMap(t, p)
	got, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != "1000" {
		t.Fatalf("worker %d has oom_score_adj %s, want 1000", pid, got)
	}
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(own)) == "1000" {
		t.Fatal("the test process itself has oom_score_adj 1000: the worker's cannot be told from an inherited one")
	}
}
