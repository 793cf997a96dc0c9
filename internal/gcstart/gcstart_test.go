package gcstart

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// childEnv makes the test binary report the collector's pacing instead of
// running the tests: each case needs a process of its own, started with the
// environment it is about.
const childEnv = "GCSTART_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "first-collection":
		before := percent()
		runtime.GC()
		<-restored
		fmt.Printf("%d %d\n", before, percent())
	case "restore":
		before := percent()
		Restore()
		Restore()
		fmt.Printf("%d %d\n", before, percent())
	}
	os.Exit(0)
}

// percent reads GOGC without changing it.
func percent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestPacing(t *testing.T) {
	for name, tc := range map[string]struct {
		child, gogc string
		want        string
	}{
		"held off until the first collection": {child: "first-collection", want: "1600 100"},
		"restored on request":                 {child: "restore", want: "1600 100"},
		"GOGC from the environment kept":      {child: "restore", gogc: "50", want: "50 50"},
		"GOGC=off kept":                       {child: "restore", gogc: "off", want: "-1 -1"},
	} {
		t.Run(name, func(t *testing.T) {
			c := exec.Command(os.Args[0], "-test.run=^$")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOGC=") {
					c.Env = append(c.Env, kv)
				}
			}
			c.Env = append(c.Env, childEnv+"="+tc.child)
			if tc.gogc != "" {
				c.Env = append(c.Env, "GOGC="+tc.gogc)
			}
			out, err := c.Output()
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Fatalf("GOGC before and after = %q, want %q", got, tc.want)
			}
		})
	}
}
