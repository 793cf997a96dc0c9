package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kukie/kukie-gitops/objref"
)

// podSpecPath is where a workload kind keeps its pod spec.
func podSpecPath(kind string) []string {
	switch kind {
	case "Pod":
		return []string{"spec"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return []string{"spec", "template", "spec"}
	}
}

// scalableKinds have spec.replicas; other kinds qualify when their manifest has it.
var scalableKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "ReplicaSet": true, "ReplicationController": true}

// unscalableKinds run one pod per node or per schedule: replicas mean nothing there.
var unscalableKinds = map[string]bool{"DaemonSet": true, "Job": true, "CronJob": true, "Pod": true}

var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// Validate checks a change on its own, before any file is read: what it refuses no
// repository can make right. The pipeline refuses a request it fails when the
// request is submitted, and Plan refuses it again before it reads a file.
func (c Change) Validate() error {
	if _, err := c.kind(); err != nil {
		return err
	}
	switch {
	case c.Replicas != nil:
		if c.Replicas.Count < 0 || c.Replicas.Count > 100000 {
			return fmt.Errorf("replicas %d is out of range (0 to 100000)", c.Replicas.Count)
		}
	case c.Image != nil:
		return c.Image.validate()
	case c.Env != nil:
		if c.Env.Container == "" {
			return fmt.Errorf("env change needs a container name")
		}
		if err := checkContainerName(c.Env.Container); err != nil {
			return err
		}
		if len(c.Env.Set) == 0 && len(c.Env.Unset) == 0 {
			return fmt.Errorf("env change sets or unsets at least one variable")
		}
		// In order, so that a request is refused in the same words each time.
		for _, name := range slices.Sorted(maps.Keys(c.Env.Set)) {
			if !envName.MatchString(name) {
				return fmt.Errorf("environment variable name %q is not valid", name)
			}
		}
		for _, name := range c.Env.Unset {
			if _, both := c.Env.Set[name]; both {
				return fmt.Errorf("environment variable %s is both set and unset", name)
			}
			if !envName.MatchString(name) {
				return fmt.Errorf("environment variable name %q is not valid", name)
			}
		}
	case c.Resources != nil:
		if c.Resources.Container == "" {
			return fmt.Errorf("resources change needs a container name")
		}
		if err := checkContainerName(c.Resources.Container); err != nil {
			return err
		}
		if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
			return fmt.Errorf("resources change sets or removes at least one quantity")
		}
		for _, section := range []struct {
			name string
			m    map[string]string
		}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
			for _, name := range slices.Sorted(maps.Keys(section.m)) {
				q := section.m[name]
				if name == "" {
					return fmt.Errorf("resources %s: empty resource name", section.name)
				}
				if q == "" {
					continue
				}
				if _, err := resource.ParseQuantity(q); err != nil {
					return fmt.Errorf("resources %s %s: %q is not a quantity", section.name, name, q)
				}
			}
		}
	case c.NewResource != nil:
		if strings.TrimSpace(c.NewResource.Manifest) == "" {
			return fmt.Errorf("new resource needs a manifest")
		}
		if _, err := splitManifest(c.NewResource.Manifest); err != nil {
			var r *Refusal
			if errors.As(err, &r) {
				return errors.New(r.Reason)
			}
			return err
		}
	case c.Patch != nil:
		return c.Patch.Validate()
	}
	return nil
}

// checkNoMask refuses a change of target that would set a value holding the mask
// the service shows in place of a secret ("[redacted]"): a person or an assistant
// that read a file, a diff or a refusal through the service and gave back what it
// read would replace the secret with that text, and the diff of such a change
// reads "[redacted] -> [redacted]", so nobody reviewing it could tell. A change of
// a Secret, or a new manifest holding one, is left to the refusal every change of
// a Secret gets: a change view shows each of its values as the mask, and given
// back as shown it must not be answered with a call for the Secret's real value.
func (c Change) checkNoMask(target objref.Target) error {
	refusal := func(where string) error {
		return fmt.Errorf("%s holds %q, the text shown in place of a secret value: a change cannot set it, as it would replace the secret with that text; give the real value, or leave the field out", where, redacted)
	}
	switch {
	case c.Env != nil:
		for _, name := range slices.Sorted(maps.Keys(c.Env.Set)) {
			if strings.Contains(c.Env.Set[name], redacted) {
				return refusal("the value of environment variable " + name)
			}
		}
	case c.NewResource != nil:
		if !strings.Contains(c.NewResource.Manifest, redacted) {
			return nil
		}
		if c.NewResource.HoldsSecret() {
			return nil // refused as a Secret, or by Validate when it does not parse
		}
		// Its values, not its text: a comment sets nothing.
		docs, _ := splitManifest(c.NewResource.Manifest)
		for i, d := range docs {
			if at, ok := maskIn(d.obj.body, ""); ok {
				return refusal(fmt.Sprintf("the value of %s in document %d (%s %s) of the new resource's manifest", at, i+1, d.obj.kind, d.obj.name))
			}
		}
	case c.Patch != nil:
		if groupOf(target.APIVersion) == "" && strings.EqualFold(target.Kind, "Secret") {
			return nil
		}
		for _, f := range c.Patch.Set {
			if at, ok := maskIn(f.Value, f.Path); ok {
				return refusal("the patch's value of " + at)
			}
		}
		if at, ok := maskIn(c.Patch.Merge, ""); ok {
			return refusal("the merge patch's value of " + at)
		}
	}
	return nil
}

// maskIn finds a string holding the mask in v, found at the JSON pointer at, and
// returns the pointer of the first one in key order.
func maskIn(v any, at string) (string, bool) {
	switch x := v.(type) {
	case string:
		return at, strings.Contains(x, redacted)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p, ok := maskIn(x[k], at+"/"+escapePointer(k)); ok {
				return p, true
			}
		}
	case []any:
		for i, it := range x {
			if p, ok := maskIn(it, at+"/"+strconv.Itoa(i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// ValidateFor is Validate of the change of target: what the target's kind alone
// says a patch cannot set (a ConfigMap's data value that is not a string) is
// refused too. The target itself is the caller's to check.
func (c Change) ValidateFor(target objref.Target) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := c.checkNoMask(target); err != nil {
		return err
	}
	if c.Patch != nil {
		return c.Patch.checkStringsOnlyData(target)
	}
	return nil
}

// UnmarshalJSON refuses a replicas change without its count, or with a count of
// null: decoded as is, either was a count of 0, and the change scaled the target
// to no pods at all.
func (r *Replicas) UnmarshalJSON(data []byte) error {
	var raw struct {
		Count *int64 `json:"count"`
	}
	if err := decodeStrictly(data, &raw); err != nil {
		return err
	}
	if raw.Count == nil {
		const field = "change.replicas.count"
		return &wrongTypeError{err: fmt.Errorf("%s is required: the number of pods to run (0 scales the target to none)", field),
			typed: &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[int64](), Field: field}}
	}
	*r = Replicas{Count: *raw.Count}
	return nil
}

// UnmarshalJSON refuses a variable of set whose value is not a string, naming the
// variable and the value's JSON type: decoded as a map of strings, null set the
// variable to "" (unset is what removes one), and a number was refused in words
// that named neither the variable nor its value.
func (e *Env) UnmarshalJSON(data []byte) error {
	type plain Env
	var raw struct {
		plain
		Set map[string]json.RawMessage `json:"set,omitempty"`
	}
	if err := decodeStrictly(data, &raw); err != nil {
		return err
	}
	*e = Env(raw.plain)
	var err error
	e.Set, err = stringValues("env.set", envName, raw.Set, "to remove the variable, list it in unset")
	return err
}

// UnmarshalJSON refuses a quantity of requests or limits that is not a string,
// naming the resource and the value's JSON type, as Env's does a variable's:
// decoded as maps of strings, a number ("cpu": 1) was refused naming the map
// alone. null is an empty quantity, which removes the resource's.
func (r *Resources) UnmarshalJSON(data []byte) error {
	var raw struct {
		Container string                     `json:"container"`
		Requests  map[string]json.RawMessage `json:"requests,omitempty"`
		Limits    map[string]json.RawMessage `json:"limits,omitempty"`
	}
	if err := decodeStrictly(data, &raw); err != nil {
		return err
	}
	requests, err := stringValues("resources.requests", resourceKey, raw.Requests, "")
	if err != nil {
		return err
	}
	limits, err := stringValues("resources.limits", resourceKey, raw.Limits, "")
	if err != nil {
		return err
	}
	*r = Resources{Container: raw.Container, Requests: requests, Limits: limits}
	return nil
}

// decodeStrictly decodes data into v, the shadow of a type with its own decoding,
// refusing unknown fields, which a decoder that refuses them does not reach into a
// type's own decoding for. A field of the wrong type is named as the type's field
// ("unset"), not by the shadow's embedding of it ("plain.unset").
func decodeStrictly(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var wrongType *json.UnmarshalTypeError
	if errors.As(err, &wrongType) {
		wrongType.Field = strings.TrimPrefix(wrongType.Field, "plain.")
	}
	return err
}

// resourceKey is a resource name a refusal can write after a dot
// ("resources.limits.nvidia.com/gpu"); any other is quoted.
var resourceKey = regexp.MustCompile(`^[-._/a-zA-Z0-9]+$`)

// stringValues decodes the members of a JSON object of strings, refusing a value
// that is not a string naming the member (field.name, or field["name"], quoted in
// ASCII, for a name plain does not match: the name is the caller's) and the
// value's JSON type. null is refused, saying nullHint, unless nullHint is empty:
// then it is taken as "". The members are read in order, so that a request is
// refused in the same words each time.
func stringValues(field string, plain *regexp.Regexp, raw map[string]json.RawMessage, nullHint string) (map[string]string, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string]string, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		at := field + "." + name
		if !plain.MatchString(name) {
			at = field + "[" + strconv.QuoteToASCII(name) + "]"
		}
		v, err := decodeJSONValue(raw[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if v == nil && nullHint == "" {
			out[name] = ""
			continue
		}
		s, ok := v.(string)
		if !ok {
			err := notAString(at, v)
			if v == nil {
				err = fmt.Errorf("%w (%s)", err, nullHint)
			}
			return nil, &wrongTypeError{err: err, typed: &json.UnmarshalTypeError{Value: jsonTypeName(v), Type: reflect.TypeFor[string](), Field: at}}
		}
		out[name] = s
	}
	return out, nil
}

// wrongTypeError is a known field of a JSON text given a value of the wrong type,
// in its own words. It unwraps to the *json.UnmarshalTypeError encoding/json
// reports for such a field, so that whoever decodes a request tells it, an
// invalid request, from a text that is not valid JSON.
type wrongTypeError struct {
	err   error
	typed *json.UnmarshalTypeError
}

func (e *wrongTypeError) Error() string { return e.err.Error() }
func (e *wrongTypeError) Unwrap() error { return e.typed }

// jsonTypeName is the name encoding/json gives the JSON type of a decoded value
// in an UnmarshalTypeError.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case int64, float64, json.Number:
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

// checkContainerName refuses a container name no container can have: Kubernetes
// names containers by DNS labels, so " web" or "Web" would only be looked for in
// the repository and not found there.
func checkContainerName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("container %s is no container's name: %s", strconv.Quote(name), strings.Join(msgs, "; "))
	}
	return nil
}

// containerName returns the container a change is about ("" for replicas).
func (c Change) containerName() string {
	switch {
	case c.Image != nil:
		return c.Image.Container
	case c.Env != nil:
		return c.Env.Container
	case c.Resources != nil:
		return c.Resources.Container
	}
	return ""
}

// describe says what the change does, for texts.
func (c Change) describe() string {
	switch {
	case c.Replicas != nil:
		return fmt.Sprintf("set replicas to %d", c.Replicas.Count)
	case c.Image != nil:
		if c.Image.Digest != "" {
			return fmt.Sprintf("set the image digest of container %s to %s", c.Image.Container, c.Image.Digest)
		}
		return fmt.Sprintf("set the image tag of container %s to %s", c.Image.Container, c.Image.Tag)
	case c.Env != nil:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(c.Env.Set)) {
			parts = append(parts, "set "+k)
		}
		for _, k := range c.Env.Unset {
			parts = append(parts, "unset "+k)
		}
		return fmt.Sprintf("%s in container %s", strings.Join(parts, ", "), c.Env.Container)
	case c.Resources != nil:
		return fmt.Sprintf("change resources of container %s", c.Resources.Container)
	case c.NewResource != nil:
		return "add new resources"
	case c.Patch != nil:
		return "patch " + strings.Join(c.Patch.fields(), ", ")
	case c.DeleteResource != nil:
		return "the deletion"
	}
	return "change"
}

// container is one container found in a pod spec.
type container struct {
	list  string // "containers" or "initContainers"
	index int
	body  map[string]any
}

func getPath(m map[string]any, p []string) (any, bool) {
	var cur any = m
	for _, k := range p {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// findContainer finds a container by name among the containers and init containers
// of the pod spec of body.
func findContainer(body map[string]any, kind, name string) (container, bool) {
	spec, ok := getPath(body, podSpecPath(kind))
	if !ok {
		return container{}, false
	}
	specMap, _ := spec.(map[string]any)
	for _, list := range []string{"containers", "initContainers"} {
		items, _ := specMap[list].([]any)
		for i, it := range items {
			c, _ := it.(map[string]any)
			if n, _ := c["name"].(string); n == name {
				return container{list: list, index: i, body: c}, true
			}
		}
	}
	return container{}, false
}

func containerNames(body map[string]any, kind string) []string {
	spec, _ := getPath(body, podSpecPath(kind))
	specMap, _ := spec.(map[string]any)
	var names []string
	for _, list := range []string{"containers", "initContainers"} {
		items, _ := specMap[list].([]any)
		for _, it := range items {
			c, _ := it.(map[string]any)
			if n, _ := c["name"].(string); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// expectedAfter is the before-render of the target plus the requested change and
// nothing else. It is computed here, never read back from a render.
func expectedAfter(before *object, c Change) (map[string]any, error) {
	body := deepCopy(before.body).(map[string]any)
	switch {
	case c.Replicas != nil:
		spec, _ := body["spec"].(map[string]any)
		_, has := spec["replicas"]
		if unscalableKinds[before.kind] || (!scalableKinds[before.kind] && !has) {
			return nil, refuse(CodeNotScalable, "%s %s has no spec.replicas; it cannot be scaled", before.kind, before.name)
		}
		if spec == nil {
			spec = map[string]any{}
			body["spec"] = spec
		}
		spec["replicas"] = c.Replicas.Count
		return body, nil
	case c.NewResource != nil:
		return nil, fmt.Errorf("new resources have no expected object")
	case c.DeleteResource != nil:
		return nil, fmt.Errorf("a deleted resource has no expected object")
	case c.Patch != nil:
		if err := checkPatchLists(before, c.Patch); err != nil {
			return nil, err
		}
		out, err := applyMergePatch(before.body, c.Patch)
		if err != nil {
			return nil, refuse(CodeInvalidRequest, "%s %s: %v", before.kind, before.name, err)
		}
		return out, nil
	}
	name := c.containerName()
	ct, ok := findContainer(body, before.kind, name)
	if !ok {
		return nil, refuse(CodeContainerNotFound, "%s %s has no container %q (containers: %s)", before.kind, before.name, name, strings.Join(containerNames(body, before.kind), ", "))
	}
	switch {
	case c.Image != nil:
		img, _ := ct.body["image"].(string)
		if img == "" {
			return nil, refuse(CodeContainerNotFound, "container %s of %s %s has no image", name, before.kind, before.name)
		}
		ref := parseImageRef(img)
		if c.Image.Name != "" && c.Image.Name != ref.name {
			return nil, refuse(CodeInvalidRequest, "container %s of %s %s runs image %s, not %s; render changes tags and digests, never image names", name, before.kind, before.name, ref.name, c.Image.Name)
		}
		ct.body["image"] = c.Image.apply(ref).String()
	case c.Env != nil:
		applyEnv(ct.body, c.Env)
	case c.Resources != nil:
		applyResources(ct.body, c.Resources)
	}
	return body, nil
}

func applyEnv(ct map[string]any, e *Env) {
	env, _ := ct["env"].([]any)
	index := func(name string) int {
		for i, it := range env {
			m, _ := it.(map[string]any)
			if m["name"] == name {
				return i
			}
		}
		return -1
	}
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		entry := map[string]any{"name": name, "value": e.Set[name]}
		if i := index(name); i >= 0 {
			env[i] = entry
		} else {
			env = append(env, entry)
		}
	}
	for _, name := range e.Unset {
		if i := index(name); i >= 0 {
			env = append(env[:i], env[i+1:]...)
		}
	}
	if len(env) == 0 {
		delete(ct, "env")
		return
	}
	ct["env"] = env
}

func applyResources(ct map[string]any, r *Resources) {
	res, _ := ct["resources"].(map[string]any)
	if res == nil {
		res = map[string]any{}
	}
	for section, changes := range map[string]map[string]string{"requests": r.Requests, "limits": r.Limits} {
		if len(changes) == 0 {
			continue
		}
		m, _ := res[section].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		for name, q := range changes {
			if q == "" {
				delete(m, name)
			} else {
				m[name] = q
			}
		}
		if len(m) == 0 {
			delete(res, section)
		} else {
			res[section] = m
		}
	}
	if len(res) == 0 {
		delete(ct, "resources")
		return
	}
	ct["resources"] = res
}

// forComparison returns the body to compare: o's own, or a normalized copy when
// it holds empty container fields (rare, so most objects are not copied).
func forComparison(o *object) map[string]any {
	if !hasEmptyContainerFields(o.body, o.kind) {
		return o.body
	}
	body := deepCopy(o.body).(map[string]any)
	semanticNormalize(body, o.kind)
	return body
}

func hasEmptyContainerFields(body map[string]any, kind string) bool {
	spec, ok := getPath(body, podSpecPath(kind))
	if !ok {
		return false
	}
	specMap, _ := spec.(map[string]any)
	for _, list := range []string{"containers", "initContainers"} {
		items, _ := specMap[list].([]any)
		for _, it := range items {
			c, _ := it.(map[string]any)
			if env, ok := c["env"]; ok && isEmpty(env) {
				return true
			}
			if res, ok := c["resources"]; ok {
				if isEmpty(res) {
					return true
				}
				rm, _ := res.(map[string]any)
				for _, s := range []string{"requests", "limits"} {
					if v, ok := rm[s]; ok && isEmpty(v) {
						return true
					}
				}
			}
		}
	}
	return false
}

// semanticNormalize treats container fields that Kubernetes treats as absent when
// empty (env, resources and its sections) as absent, so that removing the last entry
// compares equal however the file expresses it. It works in place on a copy.
func semanticNormalize(body map[string]any, kind string) {
	spec, ok := getPath(body, podSpecPath(kind))
	if !ok {
		return
	}
	specMap, _ := spec.(map[string]any)
	for _, list := range []string{"containers", "initContainers"} {
		items, _ := specMap[list].([]any)
		for _, it := range items {
			c, _ := it.(map[string]any)
			if c == nil {
				continue
			}
			if env, ok := c["env"]; ok && isEmpty(env) {
				delete(c, "env")
			}
			if res, ok := c["resources"].(map[string]any); ok {
				for _, s := range []string{"requests", "limits"} {
					if v, ok := res[s]; ok && isEmpty(v) {
						delete(res, s)
					}
				}
			}
			if res, ok := c["resources"]; ok && isEmpty(res) {
				delete(c, "resources")
			}
		}
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// envNames lists the env entry names of a container body, in order.
func envNames(ct map[string]any) []string {
	env, _ := ct["env"].([]any)
	var names []string
	for _, it := range env {
		m, _ := it.(map[string]any)
		if n, ok := m["name"].(string); ok {
			names = append(names, n)
		}
	}
	return names
}
