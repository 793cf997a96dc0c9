package githubtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
)

func annotations(n int) []*github.CheckRunAnnotation {
	out := make([]*github.CheckRunAnnotation, n)
	for i := range out {
		out[i] = &github.CheckRunAnnotation{Path: ptr("a.yaml"), StartLine: ptr(1), EndLine: ptr(1), AnnotationLevel: ptr("warning"), Message: ptr("m")}
	}
	return out
}

func TestCheckRuns(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	head := pushPlanBranch(t, c, s, "kukie/plan-1", map[string]string{"f": "2\n"})

	run, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{
		Name: "kukie/render", HeadSHA: head, Status: ptr("in_progress"), DetailsURL: ptr("https://kukie.example/plans/1"),
		Output:  &github.CheckRunOutput{Title: ptr("Rendering"), Summary: ptr("working"), Annotations: annotations(50)},
		Actions: []*github.CheckRunAction{{Label: "Re-render", Description: "Render the change again", Identifier: "rerender"}},
	})
	if err != nil {
		t.Fatalf("create check run: %v", err)
	}
	if run.GetStatus() != "in_progress" || run.GetHeadSHA() != head || run.GetApp().GetSlug() != s.AppSlug() || run.GetOutput().GetAnnotationsCount() != 50 {
		t.Errorf("created = %+v", run)
	}
	upd, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "deploy", run.GetID(), github.UpdateCheckRunOptions{
		Name: "kukie/render", Conclusion: ptr("success"),
		Output: &github.CheckRunOutput{Title: ptr("Verified"), Summary: ptr(strings.Repeat("s", MaxCheckOutputChars)), Annotations: annotations(10)},
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if upd.GetStatus() != "completed" || upd.GetConclusion() != "success" || upd.CompletedAt == nil || upd.GetOutput().GetAnnotationsCount() != 60 {
		t.Errorf("updated = status %s conclusion %s annotations %d", upd.GetStatus(), upd.GetConclusion(), upd.GetOutput().GetAnnotationsCount())
	}
	for _, ref := range []string{head, "kukie/plan-1"} {
		list, _, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "deploy", ref, &github.ListCheckRunsOptions{CheckName: ptr("kukie/render")})
		if err != nil || list.GetTotal() != 1 || list.CheckRuns[0].GetID() != run.GetID() {
			t.Errorf("list for %s = %+v, %v", ref, list, err)
		}
	}
	// A second run of the same name: "latest" (the default) shows only it.
	second, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{Name: "kukie/render", HeadSHA: head})
	if err != nil {
		t.Fatal(err)
	}
	latest, _, _ := c.Checks.ListCheckRunsForRef(ctx, "acme", "deploy", head, nil)
	all, _, _ := c.Checks.ListCheckRunsForRef(ctx, "acme", "deploy", head, &github.ListCheckRunsOptions{Filter: ptr("all")})
	if latest.GetTotal() != 1 || latest.CheckRuns[0].GetID() != second.GetID() || all.GetTotal() != 2 {
		t.Errorf("latest = %d, all = %d", latest.GetTotal(), all.GetTotal())
	}
	if got := s.CheckRuns(t, "acme/deploy", head); len(got) != 2 {
		t.Errorf("CheckRuns = %d", len(got))
	}

	s.WaitForDeliveries() // events an API call fires are delivered asynchronously
	var created int
	for _, p := range rc.of("check_run") {
		if p.(*github.CheckRunEvent).GetAction() == "created" {
			created++
		}
	}
	if created != 2 {
		t.Errorf("check_run created events = %d, want 2", created)
	}
	d := s.RequestCheckRunAction(t, "acme/deploy", run.GetID(), "rerender")
	if d.StatusCode != http.StatusAccepted || d.Action != "requested_action" {
		t.Errorf("requested_action delivery = %+v", d)
	}
	events := rc.of("check_run")
	last := events[len(events)-1].(*github.CheckRunEvent)
	if last.GetRequestedAction().Identifier != "rerender" || last.GetCheckRun().GetID() != run.GetID() || last.GetSender().GetLogin() != "octocat" {
		t.Errorf("requested_action payload = %+v", last)
	}
	if d := s.RerequestCheckRun(t, "acme/deploy", run.GetID()); d.Action != "rerequested" {
		t.Errorf("rerequested delivery = %+v", d)
	}
	if d := s.RerequestCheckSuite(t, "acme/deploy", head); d.Action != "rerequested" || d.Event != "check_suite" {
		t.Errorf("check_suite delivery = %+v", d)
	}
}

func TestCheckRunLimits(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	head := s.Head(t, "acme/deploy", "main")
	tooLong := strings.Repeat("x", MaxCheckOutputChars+1)
	multiByte := strings.Repeat("é", MaxCheckOutputChars/2+1) // few characters, too many bytes
	action := func(label, desc, id string) *github.CheckRunAction {
		return &github.CheckRunAction{Label: label, Description: desc, Identifier: id}
	}
	tests := map[string]struct {
		opts    github.CreateCheckRunOptions
		message string
	}{
		"summary too long":       {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr(tooLong)}}, message: "Only 65535 characters are allowed; 65536 were supplied."},
		"text too long":          {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr("s"), Text: ptr(tooLong)}}, message: "Only 65535 characters are allowed"},
		"title too long":         {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr(tooLong), Summary: ptr("s")}}, message: "Only 65535 characters are allowed"},
		"summary too many bytes": {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr(multiByte)}}, message: "Validation Failed"},
		"51 annotations":         {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr("s"), Annotations: annotations(51)}}, message: "Only 50 elements are allowed; 51 were supplied."},
		"output without summary": {opts: github.CreateCheckRunOptions{Output: &github.CheckRunOutput{Title: ptr("t")}}, message: `"summary" wasn't supplied.`},
		"four actions":           {opts: github.CreateCheckRunOptions{Actions: []*github.CheckRunAction{action("a", "b", "c"), action("a", "b", "c"), action("a", "b", "c"), action("a", "b", "c")}}, message: "Only 3 elements are allowed; 4 were supplied."},
		"label too long":         {opts: github.CreateCheckRunOptions{Actions: []*github.CheckRunAction{action(strings.Repeat("l", 21), "d", "i")}}, message: "Only 20 characters are allowed; 21 were supplied."},
		"description too long":   {opts: github.CreateCheckRunOptions{Actions: []*github.CheckRunAction{action("l", strings.Repeat("d", 41), "i")}}, message: "Only 40 characters are allowed; 41 were supplied."},
		"identifier too long":    {opts: github.CreateCheckRunOptions{Actions: []*github.CheckRunAction{action("l", "d", strings.Repeat("i", 21))}}, message: "Only 20 characters are allowed; 21 were supplied."},
		"unknown commit":         {opts: github.CreateCheckRunOptions{HeadSHA: strings.Repeat("a", 40)}, message: "No commit found for SHA"},
		"bad conclusion":         {opts: github.CreateCheckRunOptions{Conclusion: ptr("great")}, message: "is not a valid conclusion"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := tc.opts
			opts.Name = "kukie/render"
			if opts.HeadSHA == "" {
				opts.HeadSHA = head
			}
			_, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", opts)
			er := wantStatus(t, err, http.StatusUnprocessableEntity)
			if !strings.Contains(er.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", er.Message, tc.message)
			}
		})
	}
	if runs := s.CheckRuns(t, "acme/deploy", head); len(runs) != 0 {
		t.Errorf("refused requests created %d check runs", len(runs))
	}
	t.Run("update is limited too", func(t *testing.T) {
		run, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{Name: "kukie/render", HeadSHA: head})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Checks.UpdateCheckRun(ctx, "acme", "deploy", run.GetID(), github.UpdateCheckRunOptions{Name: "kukie/render",
			Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr("s"), Annotations: annotations(51)}})
		wantStatus(t, err, http.StatusUnprocessableEntity)
	})
}
