package render

import (
	"strings"
	"testing"
)

func TestAlignEnvOrder(t *testing.T) {
	pod := func(env ...string) map[string]any {
		var list []any
		for _, e := range env {
			name, value, _ := strings.Cut(e, "=")
			list = append(list, map[string]any{"name": name, "value": value})
		}
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "env": list}}}}}}
	}
	names := func(body map[string]any) string {
		c, _ := findContainer(body, "Deployment", "app")
		n, _ := namedItems(c.body["env"].([]any))
		return strings.Join(n, " ")
	}
	cases := map[string]struct {
		want, got []string
		added     []string
		ok        bool
		why       string
	}{
		"a new variable rendered first": {
			want: []string{"B=1", "C=2", "A=0"}, got: []string{"A=0", "B=1", "C=2"}, added: []string{"A"}, ok: true,
		},
		"two new variables between the others": {
			want: []string{"B=1", "D=3", "A=0", "C=2"}, got: []string{"A=0", "B=1", "C=2", "D=3"}, added: []string{"A", "C"}, ok: true,
		},
		"a variable that was there moves": {
			want: []string{"B=1", "C=2", "A=0"}, got: []string{"C=2", "A=0", "B=1"}, added: []string{"A"},
		},
		"another entry than the change's": {
			want: []string{"B=1", "A=0"}, got: []string{"A=0", "X=9"}, added: []string{"A"},
		},
		"a value that now reads the new variable": {
			want: []string{"URL=db/$(NAME)", "NAME=orders"}, got: []string{"NAME=orders", "URL=db/$(NAME)"}, added: []string{"NAME"},
			why: "container app's variable URL refers to $(NAME), which the render lists before it, so the order changes its value",
		},
		"the new variable's value no longer reads a later one": {
			want: []string{"HOST=db", "A=$(HOST):5432"}, got: []string{"A=$(HOST):5432", "HOST=db"}, added: []string{"A"},
			why: "container app's variable A refers to $(HOST), which the render lists after it, so the order changes its value",
		},
		"a reference to a variable before both places": {
			want: []string{"HOST=db", "URL=x", "A=$(HOST)"}, got: []string{"HOST=db", "A=$(HOST)", "URL=x"}, added: []string{"A"}, ok: true,
		},
		"the same order": {
			want: []string{"A=0", "B=1"}, got: []string{"A=0", "B=1"}, added: []string{"B"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			added := map[string]bool{}
			for _, a := range tc.added {
				added[a] = true
			}
			got := pod(tc.got...)
			body, why, ok := alignEnvOrder(pod(tc.want...), got, "Deployment", "app", added)
			if ok != tc.ok || why != tc.why {
				t.Fatalf("ok %v, why %q; want %v, %q", ok, why, tc.ok, tc.why)
			}
			if ok && !deepEqual(body, got) {
				t.Fatalf("aligned to %s, want %s", names(body), names(got))
			}
		})
	}
}
