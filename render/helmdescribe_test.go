package render

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

func TestHelmValueSetDescribe(t *testing.T) {
	key := func(ks ...string) yamledit.Path {
		p := make(yamledit.Path, len(ks))
		for i, k := range ks {
			p[i] = yamledit.K(k)
		}
		return p
	}
	cases := []struct {
		set  helmValueSet
		want string
	}{
		{helmValueSet{path: key("replicas"), value: int64(3)}, `replicas to 3`},
		{helmValueSet{path: key("replicas"), value: "3"}, `replicas to "3"`},
		{helmValueSet{path: key("api", "env"), value: map[string]any{"TIMEOUT": nil}}, `api.env to {"TIMEOUT":null}`},
		{helmValueSet{path: key("db", "password"), value: "hunter22"}, `db.password to "[redacted]"`},
		{helmValueSet{path: key("env"), value: map[string]any{"API_TOKEN": "s3cr3t-value", "LOG_LEVEL": "info"}}, `env to {"API_TOKEN":"[redacted]","LOG_LEVEL":"info"}`},
		{helmValueSet{path: key("note"), value: strings.Repeat("x", 200)}, `note to "` + strings.Repeat("x", maxSetValueText-1) + "…"},
	}
	for _, c := range cases {
		if got := c.set.describe(); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}
