package web_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kukie/kukie-gitops/internal/leakscan"
	"github.com/kukie/kukie-gitops/web"
)

// browser is a fresh headless Chromium (Debian's chromium; hack/test.sh installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs Chromium: install Debian's chromium package (apt-get install -y chromium): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium makes temporary directories of its own beside the profile and
		// leaves them when it is killed: in the test's, they go with the test.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(1200, 1600),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	// A bound for a browser that hangs, not a measurement.
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// signInWithBrowser opens the change's page, which sends the browser to the fake
// GitHub's authorize page, signs in there as login and waits for the page GitHub's
// redirect back leads to. It returns that page's text, its HTML and a screenshot.
func (e *env) signInWithBrowser(t *testing.T, login string) (text, dom string, shot []byte) {
	t.Helper()
	text, dom, shot, _ = e.signInWithBrowserAt(t, login, web.ChangePathPrefix+e.code)
	return text, dom, shot
}

// signInWithBrowserAt is signInWithBrowser starting at the page path; ctx is the
// browser, still on the page.
func (e *env) signInWithBrowserAt(t *testing.T, login, page string) (text, dom string, shot []byte, ctx context.Context) {
	t.Helper()
	ctx = browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+page),
		chromedp.WaitVisible(chromedp.CSS("#login")),
	); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	at, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasPrefix(at, e.gh.URL()+"/login/oauth/authorize") {
		t.Fatalf("without a session the browser is at %s (%v), want GitHub's authorize page", at, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#login"), login),
		chromedp.Click(chromedp.CSS("#authorize")),
		chromedp.WaitVisible(chromedp.CSS("main h1")),
	); err != nil {
		t.Fatalf("sign in as %s: %v", login, err)
	}
	if at, err = chromedp.Run(ctx, chromedp.Location()); err != nil || at != e.srv.URL+page {
		t.Errorf("after sign-in the browser is at %s (%v), want the page %s", at, err, page)
	}
	if text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main"))); err != nil {
		t.Fatal(err)
	}
	if dom, err = chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil {
		t.Fatal(err)
	}
	if shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), login+".png")
	if err := os.WriteFile(path, shot, 0o600); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(written))
	if err != nil || len(written) == 0 {
		t.Fatalf("screenshot %s: %d bytes, %v", path, len(written), err)
	}
	if b := img.Bounds(); b.Dx() == 0 || b.Dy() == 0 {
		t.Errorf("screenshot is %v", b)
	}
	return text, dom, shot, ctx
}

func TestBrowserSignsInAndShowsTheDiff(t *testing.T) {
	e := newEnv(t)
	text, dom, _ := e.signInWithBrowser(t, reader)
	for _, want := range []string{gitDiffLine, "image: web:v1.4.2", "Signed in as " + reader} {
		if !strings.Contains(text, want) {
			t.Errorf("the page as the browser shows it lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(dom, `class="add"`) || !strings.Contains(dom, `href="/assets/style.css"`) {
		t.Errorf("the page's DOM lacks the styled diff:\n%s", dom)
	}
	if leakscan.Matches(text) || leakscan.Matches(dom) {
		t.Error("the browser shows a Secret value")
	}
}

func TestBrowserWithoutReadAccessSeesNoDiff(t *testing.T) {
	e := newEnv(t)
	text, dom, _ := e.signInWithBrowser(t, outsider)
	if strings.Contains(dom, "newTag") || strings.Contains(dom, "image: web") || strings.Contains(dom, e.code) {
		t.Errorf("a person without read access sees the change:\n%s", text)
	}
	if !strings.Contains(text, "does not exist, or your GitHub account cannot read its repository") {
		t.Errorf("the page does not say not found:\n%s", text)
	}
}

func TestBrowserSignsInAndShowsTheCheck(t *testing.T) {
	e := newEnv(t)
	text, dom, _, ctx := e.signInWithBrowserAt(t, reader, web.CheckPathPrefix+e.check)
	for _, want := range []string{checkDiffLine, "argocd/api (cluster prod)", "apps/api/deployment.yaml", "Signed in as " + reader,
		// the policy findings: rule, file:line and message
		"dry_run", "apps/api/deployment.yaml:9", checkFindingMessage, "image_digest", "is not pinned by digest"} {
		if !strings.Contains(text, want) {
			t.Errorf("the check's page as the browser shows it lacks %q:\n%s", want, text)
		}
	}
	findings, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#policy tbody tr")].map(r => r.innerText)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 2 || !strings.Contains(findings[0], "dry_run") || !strings.Contains(findings[0], "apps/api/deployment.yaml:9") ||
		!strings.Contains(findings[0], checkFindingMessage) || !strings.Contains(findings[1], "image_digest") {
		t.Errorf("the policy findings as the browser shows them: %q", findings)
	}
	if !strings.Contains(dom, `<span class="add">`+checkDiffLine+`</span>`) || !strings.Contains(dom, `href="/assets/style.css"`) {
		t.Errorf("the check's page DOM lacks the styled diff:\n%s", dom)
	}
	if leakscan.Matches(text) || leakscan.Matches(dom) {
		t.Error("the browser shows a Secret value")
	}
}

func TestBrowserWithoutReadAccessSeesNoCheck(t *testing.T) {
	e := newEnv(t)
	text, dom, _, _ := e.signInWithBrowserAt(t, outsider, web.CheckPathPrefix+e.check)
	if strings.Contains(dom, "image: api") || strings.Contains(dom, "deployment.yaml") || strings.Contains(dom, "3333333") {
		t.Errorf("a person without read access sees the check:\n%s", text)
	}
	if !strings.Contains(text, "does not exist, or your GitHub account cannot read its repository") {
		t.Errorf("the page does not say not found:\n%s", text)
	}
}
