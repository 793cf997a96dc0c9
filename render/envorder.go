package render

import (
	"fmt"
	"strings"
)

// alignEnvOrder is want (the expected body of a workload after an env change
// of container) with that container's env list in the order got (the render
// after the edit) has it, when the two lists differ in nothing but the places
// of the variables the change adds (added): the same entries, the variables
// that were there before in the same order, and no $(NAME) reference of a
// value that reads another variable for the move (Kubernetes expands $(NAME)
// only from a variable listed before it, or from envFrom). The expectation
// appends a new variable at the end; a Helm chart that ranges over a mapping
// of values renders it in key order, and either place sets the same
// environment. False when the lists differ in more, or the order changes what
// a reference reads, which why then says.
func alignEnvOrder(want, got map[string]any, kind, container string, added map[string]bool) (body map[string]any, why string, ok bool) {
	out := deepCopy(want).(map[string]any)
	wc, ok := findContainer(out, kind, container)
	if !ok {
		return nil, "", false
	}
	gc, ok := findContainer(got, kind, container)
	if !ok {
		return nil, "", false
	}
	wl, _ := wc.body["env"].([]any)
	gl, _ := gc.body["env"].([]any)
	wn, ok1 := namedItems(wl)
	gn, ok2 := namedItems(gl)
	if !ok1 || !ok2 || len(wn) != len(gn) || strings.Join(wn, "\x00") == strings.Join(gn, "\x00") {
		return nil, "", false
	}
	wIndex := make(map[string]int, len(wn))
	for i, n := range wn {
		wIndex[n] = i
	}
	var keptWant, keptGot []string
	for _, n := range wn {
		if !added[n] {
			keptWant = append(keptWant, n)
		}
	}
	for _, n := range gn {
		if _, ok := wIndex[n]; !ok {
			return nil, "", false
		}
		if !added[n] {
			keptGot = append(keptGot, n)
		}
	}
	if strings.Join(keptWant, "\x00") != strings.Join(keptGot, "\x00") {
		return nil, "", false
	}
	before := func(names []string, at int, ref string) bool {
		for _, n := range names[:at] {
			if n == ref {
				return true
			}
		}
		return false
	}
	for gi, n := range gn {
		entry, _ := wl[wIndex[n]].(map[string]any)
		value, _ := entry["value"].(string)
		for _, ref := range gn {
			if ref != n && strings.Contains(value, "$("+ref+")") && before(wn, wIndex[n], ref) != before(gn, gi, ref) {
				where := "after"
				if before(gn, gi, ref) {
					where = "before"
				}
				return nil, fmt.Sprintf("container %s's variable %s refers to $(%s), which the render lists %s it, so the order changes its value", container, n, ref, where), false
			}
		}
	}
	list := make([]any, len(gn))
	for i, n := range gn {
		list[i] = wl[wIndex[n]]
	}
	wc.body["env"] = list
	return out, "", true
}

// addedEnv are the variables e sets that the container of target has no env
// entry for.
func addedEnv(target *object, e *Env) map[string]bool {
	ct, ok := findContainer(target.body, target.kind, e.Container)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for name := range e.Set {
		out[name] = true
	}
	for _, entry := range items(ct.body, "env") {
		delete(out, str(entry, "name"))
	}
	return out
}
