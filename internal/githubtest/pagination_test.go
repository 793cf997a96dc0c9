package githubtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-github/v62/github"
)

// listPage lists one page of a list endpoint and returns the keys of its items.
type listPage func(t *testing.T, opts github.ListOptions) ([]string, *github.Response)

// Following go-github's Response.NextPage reads every item of every list endpoint the
// project uses exactly once.
func TestListEndpointsFollowNextPage(t *testing.T) {
	tests := map[string]struct {
		perPage int // 0 leaves GitHub's default of 30
		// setup creates the items and returns their keys and the endpoint's lister.
		setup     func(t *testing.T, s *Server) ([]string, listPage)
		wantPages int
	}{
		"check run annotations": {
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				head := s.Head(t, "acme/deploy", "main")
				var want []string
				batch := func(from int) []*github.CheckRunAnnotation {
					out := annotations(MaxAnnotationsPerRequest)
					if from+len(out) > 120 {
						out = out[:120-from]
					}
					for i, a := range out {
						a.Message = ptr(fmt.Sprintf("annotation %d", from+i))
						want = append(want, *a.Message)
					}
					return out
				}
				run, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{
					Name: "kukie/render", HeadSHA: head, Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr("s"), Annotations: batch(0)},
				})
				if err != nil {
					t.Fatal(err)
				}
				for from := MaxAnnotationsPerRequest; from < 120; from += MaxAnnotationsPerRequest {
					if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "deploy", run.GetID(), github.UpdateCheckRunOptions{
						Name: "kukie/render", Output: &github.CheckRunOutput{Title: ptr("t"), Summary: ptr("s"), Annotations: batch(from)},
					}); err != nil {
						t.Fatal(err)
					}
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.Checks.ListCheckRunAnnotations(ctx, "acme", "deploy", run.GetID(), &opts)
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, a := range page {
						keys = append(keys, a.GetMessage())
					}
					return keys, resp
				}
			},
			wantPages: 4,
		},
		"check runs for a ref": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				head := s.Head(t, "acme/deploy", "main")
				var want []string
				for i := range 25 {
					name := fmt.Sprintf("check-%02d", i)
					if _, _, err := c.Checks.CreateCheckRun(ctx, "acme", "deploy", github.CreateCheckRunOptions{Name: name, HeadSHA: head}); err != nil {
						t.Fatal(err)
					}
					want = append(want, name)
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					res, resp, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "deploy", "main", &github.ListCheckRunsOptions{ListOptions: opts})
					if err != nil {
						t.Fatal(err)
					}
					if res.GetTotal() != 25 {
						t.Errorf("total_count = %d, want 25", res.GetTotal())
					}
					var keys []string
					for _, r := range res.CheckRuns {
						keys = append(keys, r.GetName())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"pull requests": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				var want []string
				for i := range 25 {
					branch := fmt.Sprintf("change-%02d", i)
					s.CreateBranch(t, "acme/deploy", branch, "main")
					s.PushCommit(t, "acme/deploy", branch, map[string]string{"f": branch + "\n"}, DefaultAuthor)
					want = append(want, fmt.Sprint(s.OpenPullRequest(t, "acme/deploy", branch, "main", branch, DefaultAuthor)))
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.PullRequests.List(ctx, "acme", "deploy", &github.PullRequestListOptions{ListOptions: opts})
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, pr := range page {
						keys = append(keys, fmt.Sprint(pr.GetNumber()))
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"pull request files": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				s.CreateBranch(t, "acme/deploy", "many-files", "main")
				files := map[string]string{}
				var want []string
				for i := range 25 {
					path := fmt.Sprintf("apps/app-%02d.yaml", i)
					files[path] = "kind: ConfigMap\n"
					want = append(want, path)
				}
				s.PushCommit(t, "acme/deploy", "many-files", files, DefaultAuthor)
				n := s.OpenPullRequest(t, "acme/deploy", "many-files", "main", "Many files", DefaultAuthor)
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.PullRequests.ListFiles(ctx, "acme", "deploy", n, &opts)
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, f := range page {
						keys = append(keys, f.GetFilename())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"issue comments": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				s.CreateBranch(t, "acme/deploy", "feature", "main")
				s.PushCommit(t, "acme/deploy", "feature", map[string]string{"f": "2\n"}, DefaultAuthor)
				n := s.OpenPullRequest(t, "acme/deploy", "feature", "main", "Change f", DefaultAuthor)
				var want []string
				for i := range 25 {
					body := fmt.Sprintf("comment %d", i)
					s.CommentOnPullRequest(t, "acme/deploy", n, DefaultAuthor, body)
					want = append(want, body)
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.Issues.ListComments(ctx, "acme", "deploy", n, &github.IssueListCommentsOptions{ListOptions: opts})
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, c := range page {
						keys = append(keys, c.GetBody())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"installation repositories": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				var want []string
				for i := range 25 {
					name := fmt.Sprintf("deploy-%02d", i)
					s.CreateRepo(t, "acme", name, map[string]string{"f": "1\n"}, "main")
					want = append(want, "acme/"+name)
				}
				repos := make([]string, len(want))
				for i, full := range want {
					repos[i] = full[len("acme/"):]
				}
				id := s.CreateInstallation(t, "acme", repos...)
				c := apiClient(t, s, s.InstallationToken(t, id, nil, nil).Reveal())
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					res, resp, err := c.Apps.ListRepos(ctx, &opts)
					if err != nil {
						t.Fatal(err)
					}
					if res.GetTotalCount() != 25 {
						t.Errorf("total_count = %d, want 25", res.GetTotalCount())
					}
					var keys []string
					for _, r := range res.Repositories {
						keys = append(keys, r.GetFullName())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"branches": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				want := []string{"main"}
				for i := range 24 {
					branch := fmt.Sprintf("kukie/plan-%02d", i)
					s.CreateBranch(t, "acme/deploy", branch, "main")
					want = append(want, branch)
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.Repositories.ListBranches(ctx, "acme", "deploy", &github.BranchListOptions{ListOptions: opts})
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, b := range page {
						keys = append(keys, b.GetName())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
		"matching refs": {
			perPage: 10,
			setup: func(t *testing.T, s *Server) ([]string, listPage) {
				c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
				var want []string
				for i := range 25 {
					branch := fmt.Sprintf("kukie/plan-%02d", i)
					s.CreateBranch(t, "acme/deploy", branch, "main")
					want = append(want, "refs/heads/"+branch)
				}
				return want, func(t *testing.T, opts github.ListOptions) ([]string, *github.Response) {
					page, resp, err := c.Git.ListMatchingRefs(ctx, "acme", "deploy", &github.ReferenceListOptions{Ref: "heads/kukie/", ListOptions: opts})
					if err != nil {
						t.Fatal(err)
					}
					var keys []string
					for _, r := range page {
						keys = append(keys, r.GetRef())
					}
					return keys, resp
				}
			},
			wantPages: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(t)
			want, list := tc.setup(t, s)
			seen := map[string]int{}
			pages := 0
			opts := github.ListOptions{PerPage: tc.perPage}
			for {
				keys, resp := list(t, opts)
				pages++
				for _, k := range keys {
					seen[k]++
				}
				if pages == 1 && resp.LastPage != tc.wantPages {
					t.Errorf("first page: LastPage = %d, want %d (Link: %q)", resp.LastPage, tc.wantPages, resp.Header.Get("Link"))
				}
				if resp.NextPage == 0 {
					break
				}
				if pages > tc.wantPages {
					t.Fatalf("still a next page after %d pages (Link: %q)", pages, resp.Header.Get("Link"))
				}
				opts.Page = resp.NextPage
			}
			if pages != tc.wantPages {
				t.Errorf("read %d pages, want %d", pages, tc.wantPages)
			}
			if len(seen) != len(want) {
				t.Errorf("read %d distinct items, want %d", len(seen), len(want))
			}
			for _, k := range want {
				if seen[k] != 1 {
					t.Errorf("item %q read %d times, want once", k, seen[k])
				}
			}
		})
	}
}

func TestPaginateLinkHeader(t *testing.T) {
	const base = "http://github.example/api/v3/repos/acme/deploy/pulls"
	tests := map[string]struct {
		target    string
		n         int
		wantLink  string
		wantStart int
		wantEnd   int
	}{
		"one page needs no links": {
			target: "/api/v3/repos/acme/deploy/pulls", n: 30, wantStart: 0, wantEnd: 30,
		},
		"empty list": {
			target: "/api/v3/repos/acme/deploy/pulls?page=1", n: 0, wantStart: 0, wantEnd: 0,
		},
		"first page of the default size keeps the other parameters": {
			target: "/api/v3/repos/acme/deploy/pulls?state=all", n: 61,
			wantLink:  `<` + base + `?page=2&state=all>; rel="next", <` + base + `?page=3&state=all>; rel="last"`,
			wantStart: 0, wantEnd: 30,
		},
		"middle page": {
			target: "/api/v3/repos/acme/deploy/pulls?per_page=10&page=2", n: 25,
			wantLink: `<` + base + `?page=1&per_page=10>; rel="prev", <` + base + `?page=3&per_page=10>; rel="next", <` +
				base + `?page=3&per_page=10>; rel="last", <` + base + `?page=1&per_page=10>; rel="first"`,
			wantStart: 10, wantEnd: 20,
		},
		"last page": {
			target: "/api/v3/repos/acme/deploy/pulls?per_page=10&page=3", n: 25,
			wantLink:  `<` + base + `?page=2&per_page=10>; rel="prev", <` + base + `?page=1&per_page=10>; rel="first"`,
			wantStart: 20, wantEnd: 25,
		},
		"past the end points back to the last page": {
			target: "/api/v3/repos/acme/deploy/pulls?per_page=10&page=7", n: 25,
			wantLink:  `<` + base + `?page=3&per_page=10>; rel="prev", <` + base + `?page=1&per_page=10>; rel="first"`,
			wantStart: 25, wantEnd: 25,
		},
		"per_page above 100 is capped": {
			target: "/api/v3/repos/acme/deploy/pulls?per_page=500", n: 150,
			wantLink:  `<` + base + `?page=2&per_page=500>; rel="next", <` + base + `?page=2&per_page=500>; rel="last"`,
			wantStart: 0, wantEnd: 100,
		},
		"invalid parameters take the defaults": {
			target: "/api/v3/repos/acme/deploy/pulls?per_page=-3&page=x", n: 31,
			wantLink:  `<` + base + `?page=2&per_page=-3>; rel="next", <` + base + `?page=2&per_page=-3>; rel="last"`,
			wantStart: 0, wantEnd: 30,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Host = "github.example"
			r = stripAPIPrefix(r)
			w := httptest.NewRecorder()
			start, end := paginate(w, r, tc.n)
			if start != tc.wantStart || end != tc.wantEnd {
				t.Errorf("bounds = [%d:%d], want [%d:%d]", start, end, tc.wantStart, tc.wantEnd)
			}
			if got := w.Header().Get("Link"); got != tc.wantLink {
				t.Errorf("Link = %s\nwant   %s", got, tc.wantLink)
			}
		})
	}
}
