package githubtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

// exchange posts to the token endpoint as an OAuth client does and returns the
// status, Content-Type and body.
func exchange(t *testing.T, s *Server, accept string, form url.Values) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func exchangeJSON(t *testing.T, s *Server, form url.Values) map[string]string {
	t.Helper()
	status, ctype, body := exchange(t, s, "application/json", form)
	if status != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("token endpoint = %d %s %s; GitHub answers 200 JSON", status, ctype, body)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return out
}

func codeForm(s *Server, code string) url.Values {
	return url.Values{"client_id": {s.ClientID()}, "client_secret": {s.ClientSecret().Reveal()}, "code": {code}}
}

func TestAccessTokenExchange(t *testing.T) {
	s := New(t)
	s.AddUser("alice")

	t.Run("json", func(t *testing.T) {
		out := exchangeJSON(t, s, codeForm(s, s.AuthorizationCode(t, "alice")))
		if !strings.HasPrefix(out["access_token"], "ghu_") || out["token_type"] != "bearer" || out["scope"] != "" || out["error"] != "" {
			t.Errorf("exchange = %v; want a ghu_ bearer token with empty scope", out)
		}
	})
	t.Run("form encoded without Accept", func(t *testing.T) {
		status, ctype, body := exchange(t, s, "", codeForm(s, s.AuthorizationCode(t, "alice")))
		vals, err := url.ParseQuery(body)
		if status != http.StatusOK || !strings.HasPrefix(ctype, "application/x-www-form-urlencoded") || err != nil ||
			!strings.HasPrefix(vals.Get("access_token"), "ghu_") || vals.Get("token_type") != "bearer" {
			t.Errorf("exchange = %d %s %q (%v)", status, ctype, body, err)
		}
	})

	refusals := map[string]struct {
		form      func() url.Values
		wantError string
	}{
		"used code": {
			form: func() url.Values {
				code := s.AuthorizationCode(t, "alice")
				exchangeJSON(t, s, codeForm(s, code))
				return codeForm(s, code)
			},
			wantError: "bad_verification_code",
		},
		"expired code": {
			form: func() url.Values {
				code := s.AuthorizationCode(t, "alice")
				s.Clock().Advance(authorizationCodeLifetime)
				return codeForm(s, code)
			},
			wantError: "bad_verification_code",
		},
		"unknown code": {form: func() url.Values { return codeForm(s, "nope") }, wantError: "bad_verification_code"},
		"missing code": {form: func() url.Values { return codeForm(s, "") }, wantError: "bad_verification_code"},
		"wrong secret": {
			form: func() url.Values {
				f := codeForm(s, s.AuthorizationCode(t, "alice"))
				f.Set("client_secret", "wrong")
				return f
			},
			wantError: "incorrect_client_credentials",
		},
		"wrong client id": {
			form: func() url.Values {
				f := codeForm(s, s.AuthorizationCode(t, "alice"))
				f.Set("client_id", "Iv1.other")
				return f
			},
			wantError: "incorrect_client_credentials",
		},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			out := exchangeJSON(t, s, tc.form())
			if out["error"] != tc.wantError || out["error_description"] == "" || !strings.Contains(out["error_uri"], "troubleshooting") || out["access_token"] != "" {
				t.Errorf("exchange = %v, want error %s with description and uri and no token", out, tc.wantError)
			}
		})
	}

	t.Run("a refused client does not spend the code", func(t *testing.T) {
		code := s.AuthorizationCode(t, "alice")
		f := codeForm(s, code)
		f.Set("client_secret", "wrong")
		exchangeJSON(t, s, f)
		if out := exchangeJSON(t, s, codeForm(s, code)); out["access_token"] == "" {
			t.Errorf("exchange with the right secret after a wrong one = %v, want a token", out)
		}
	})
	t.Run("counted", func(t *testing.T) {
		before := s.RequestCount("POST /login/oauth/access_token")
		exchangeJSON(t, s, codeForm(s, s.AuthorizationCode(t, "alice")))
		if got := s.RequestCount("POST /login/oauth/access_token"); got != before+1 {
			t.Errorf("count = %d, want %d", got, before+1)
		}
	})
}

func TestAccessTokenCodeLivesTenMinutes(t *testing.T) {
	s := New(t)
	s.AddUser("alice")
	code := s.AuthorizationCode(t, "alice")
	s.Clock().Advance(authorizationCodeLifetime - time.Second)
	if out := exchangeJSON(t, s, codeForm(s, code)); out["access_token"] == "" {
		t.Errorf("exchange just before expiry = %v, want a token", out)
	}
}

func TestUserInstallations(t *testing.T) {
	s := New(t)
	for _, org := range []string{"acme", "beta", "gamma"} {
		s.CreateRepo(t, org, "deploy", nil, "main")
	}
	acme := s.CreateInstallation(t, "acme", "deploy")
	beta := s.CreateInstallation(t, "beta", "deploy")
	s.CreateInstallation(t, "gamma", "deploy")
	s.AddUser("alice")
	s.AddUser("bob")
	s.GrantInstallationAccess(t, "alice", acme)
	s.GrantInstallationAccess(t, "alice", beta)
	userToken := func(login string) string {
		return exchangeJSON(t, s, codeForm(s, s.AuthorizationCode(t, login)))["access_token"]
	}

	t.Run("lists what the user can access, every page", func(t *testing.T) {
		client := apiClient(t, s, userToken("alice"))
		var got []int64
		opts := &github.ListOptions{PerPage: 1}
		for {
			page, res, err := client.Apps.ListUserInstallations(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, inst := range page {
				if inst.GetAccount().GetLogin() == "" || inst.GetAppID() != appID {
					t.Errorf("installation %+v lacks account or app id", inst)
				}
				got = append(got, inst.GetID())
			}
			if res.NextPage == 0 {
				break
			}
			opts.Page = res.NextPage
		}
		if len(got) != 2 || got[0] != acme || got[1] != beta {
			t.Errorf("alice's installations = %v, want [%d %d]", got, acme, beta)
		}
	})
	t.Run("total_count and shape", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, s.APIURL()+"user/installations", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+userToken("alice"))
		res, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			TotalCount    int               `json:"total_count"`
			Installations []json.RawMessage `json:"installations"`
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK || body.TotalCount != 2 || len(body.Installations) != 2 {
			t.Errorf("GET /user/installations = %d %+v, %v", res.StatusCode, body, err)
		}
	})
	t.Run("a user without access sees none", func(t *testing.T) {
		page, _, err := apiClient(t, s, userToken("bob")).Apps.ListUserInstallations(ctx, nil)
		if err != nil || len(page) != 0 {
			t.Errorf("bob's installations = %v, %v; want none", page, err)
		}
	})

	refusals := map[string]struct {
		token  string
		status int
	}{
		"no token":           {token: "", status: http.StatusUnauthorized},
		"unknown token":      {token: "ghu_notatoken", status: http.StatusUnauthorized},
		"installation token": {token: s.InstallationToken(t, acme, nil, nil).Reveal(), status: http.StatusForbidden},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			_, _, err := apiClient(t, s, tc.token).Apps.ListUserInstallations(ctx, nil)
			wantStatus(t, err, tc.status)
		})
	}
}

func TestGrantInstallationAccessNeedsTheInstallation(t *testing.T) {
	s := New(t)
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		s.GrantInstallationAccess(ft, "alice", 999999)
	}()
	if !ft.failed {
		t.Error("granting access to an unknown installation did not fail the test")
	}
}

// fatalRecorder records Fatalf instead of ending the test, so helpers' failures can
// be checked; Fatalf panics to stop the helper as runtime.Goexit would.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
