package githubtest

import "testing"

func TestSmoke(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"a.txt": "hi\n"})
	r, _, err := c.Repositories.Get(ctx, "acme", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.GetDefaultBranch(), r.GetCloneURL())
	t.Log(s.Endpoints())
}
