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
		// An env list's item by its index: its name, which says whether it is
		// a secret, is not in the path.
		{helmValueSet{path: yamledit.Path{yamledit.K("env"), yamledit.I(1), yamledit.K("value")}, value: "n3wPassw0rd"}, `env[1].value to "[redacted]"`},
		{helmValueSet{path: yamledit.Path{yamledit.K("env"), yamledit.I(1)}, value: map[string]any{"name": "DB_PASSWORD", "value": "n3wPassw0rd"}}, `env[1] to {"name":"DB_PASSWORD","value":"[redacted]"}`},
		// Secrets by what they are, under keys that do not look secret.
		{helmValueSet{path: key("redis", "url"), value: "redis://:pw-12345@redis:6379"}, `redis.url to "[redacted]"`},
		{helmValueSet{path: key("note"), value: strings.Repeat("x", 200)}, `note to "` + strings.Repeat("x", maxSetValueText-1) + "…"},
	}
	for _, c := range cases {
		if got := c.set.describe(); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}
