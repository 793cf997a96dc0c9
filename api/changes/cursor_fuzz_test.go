package changes

import (
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/store"
)

// FuzzListCursors reads any before a caller sends to the change and Application
// listings: a cursor read is one the listing could have written (written again,
// it reads the same), and every position the listing writes reads back to itself.
func FuzzListCursors(f *testing.F) {
	f.Add("MTcwMDAwMDAwMDAwMC53ZWIx", int64(1700000000000), "web1", 2, "argocd", "shop")
	f.Add("", int64(0), "", 0, "", "")
	f.Add("LS45LmE", int64(-9), "a.b", -1, "", "a")
	f.Add("MC8vYQ", int64(1<<62), "x", 1<<40, "ns", "n")
	f.Add("!!", int64(-1<<63), "c\x00", 0, "a/b", "c/d")
	f.Fuzz(func(t *testing.T, before string, ms int64, code string, severity int, namespace, name string) {
		if p, ok := parseChangesCursor(before); ok {
			if again, ok := parseChangesCursor(changesCursor(store.Plan{CreatedAt: p.CreatedAt, Code: p.Code})); !ok || !again.CreatedAt.Equal(p.CreatedAt) || again.Code != p.Code {
				t.Fatalf("changes cursor %q reads as %v, written again as %v", before, p, again)
			}
		}
		if p, ok := parseAppsCursor(before); ok {
			if again, ok := parseAppsCursor(appsCursor(p)); !ok || again != p {
				t.Fatalf("apps cursor %q reads as %v, written again as %v", before, p, again)
			}
		}
		if code != "" {
			at := time.UnixMilli(ms)
			if p, ok := parseChangesCursor(changesCursor(store.Plan{CreatedAt: at, Code: code})); !ok || !p.CreatedAt.Equal(at) || p.Code != code {
				t.Fatalf("changes cursor of %v %q reads as %v", at, code, p)
			}
		}
		// Neither an Application's namespace nor its name holds a slash.
		if name != "" && !strings.Contains(namespace, "/") && !strings.Contains(name, "/") {
			pos := argocd.AppPosition{Severity: severity, Namespace: namespace, Name: name}
			if p, ok := parseAppsCursor(appsCursor(pos)); !ok || p != pos {
				t.Fatalf("apps cursor of %v reads as %v", pos, p)
			}
		}
	})
}
