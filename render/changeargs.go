package render

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/objref"
)

// kindAliases maps kubectl-style kind names to apiVersion and kind.
var kindAliases = map[string][2]string{
	"deployment": {"apps/v1", "Deployment"}, "deploy": {"apps/v1", "Deployment"},
	"statefulset": {"apps/v1", "StatefulSet"}, "sts": {"apps/v1", "StatefulSet"},
	"daemonset": {"apps/v1", "DaemonSet"}, "ds": {"apps/v1", "DaemonSet"},
	"replicaset": {"apps/v1", "ReplicaSet"}, "rs": {"apps/v1", "ReplicaSet"},
	"cronjob": {"batch/v1", "CronJob"}, "cj": {"batch/v1", "CronJob"},
	"job": {"batch/v1", "Job"},
	"pod": {"v1", "Pod"}, "po": {"v1", "Pod"},
	"service": {"v1", "Service"}, "svc": {"v1", "Service"},
	"configmap": {"v1", "ConfigMap"}, "cm": {"v1", "ConfigMap"},
	"secret":         {"v1", "Secret"},
	"serviceaccount": {"v1", "ServiceAccount"}, "sa": {"v1", "ServiceAccount"},
	"ingress": {"networking.k8s.io/v1", "Ingress"}, "ing": {"networking.k8s.io/v1", "Ingress"},
	"horizontalpodautoscaler": {"autoscaling/v2", "HorizontalPodAutoscaler"}, "hpa": {"autoscaling/v2", "HorizontalPodAutoscaler"},
	"persistentvolumeclaim": {"v1", "PersistentVolumeClaim"}, "pvc": {"v1", "PersistentVolumeClaim"},
	"poddisruptionbudget": {"policy/v1", "PodDisruptionBudget"}, "pdb": {"policy/v1", "PodDisruptionBudget"},
	"networkpolicy": {"networking.k8s.io/v1", "NetworkPolicy"}, "netpol": {"networking.k8s.io/v1", "NetworkPolicy"},
	"role":        {"rbac.authorization.k8s.io/v1", "Role"},
	"rolebinding": {"rbac.authorization.k8s.io/v1", "RoleBinding"},
	"rollout":     {"argoproj.io/v1alpha1", "Rollout"},
}

// ParseChangeArgs reads one change as the plan command spells it,
// "<verb> KIND/NAME [flags] [args]" (see the command's usage), into the target and
// the change of a [Request]. KIND may be a kubectl short name (deploy, sts, cm, ...);
// other kinds need --api-version. The manifest of "add -f FILE" is read with
// readManifest, so this package reads no file of its own.
func ParseChangeArgs(args []string, readManifest func(name string) ([]byte, error)) (objref.Target, Change, error) {
	var target objref.Target
	var change Change
	if len(args) == 0 {
		return target, change, fmt.Errorf("no change given")
	}
	verb, rest := args[0], args[1:]
	var ref string
	if verb != "add" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return target, change, fmt.Errorf("%s needs KIND/NAME", verb)
		}
		ref, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var container, namespace, apiVersion, requests, limits, file string
	replicas := int64(-1)
	fs.StringVar(&container, "c", "", "")
	fs.StringVar(&container, "container", "", "")
	fs.StringVar(&namespace, "n", "", "")
	fs.StringVar(&namespace, "namespace", "", "")
	fs.StringVar(&apiVersion, "api-version", "", "")
	fs.Int64Var(&replicas, "replicas", -1, "")
	fs.StringVar(&requests, "requests", "", "")
	fs.StringVar(&limits, "limits", "", "")
	fs.StringVar(&file, "f", "", "")
	var merge string
	fs.StringVar(&merge, "merge", "", "")
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			return target, change, fmt.Errorf("%s: %w", verb, err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if verb != "add" {
		kind, name, ok := strings.Cut(ref, "/")
		if !ok || kind == "" || name == "" {
			return target, change, fmt.Errorf("%q is not KIND/NAME", ref)
		}
		if alias, ok := kindAliases[strings.ToLower(kind)]; ok {
			target.APIVersion, target.Kind = alias[0], alias[1]
		} else {
			target.Kind = kind
		}
		if apiVersion != "" {
			target.APIVersion = apiVersion
		}
		if target.APIVersion == "" {
			return target, change, fmt.Errorf("kind %q is not known; give --api-version", kind)
		}
		target.Name, target.Namespace = name, namespace
	}
	switch verb {
	case "scale":
		if replicas < 0 {
			return target, change, fmt.Errorf("scale needs --replicas N")
		}
		change.Replicas = &Replicas{Count: replicas}
	case "set-image":
		if len(positional) != 1 {
			return target, change, fmt.Errorf("set-image needs one CONTAINER=IMAGE argument")
		}
		cname, img, ok := strings.Cut(positional[0], "=")
		if !ok || cname == "" || img == "" {
			return target, change, fmt.Errorf("%q is not CONTAINER=IMAGE", positional[0])
		}
		change.Image = &Image{Container: cname}
		name, rest := img, ""
		if i := strings.LastIndexAny(img, ":@"); i >= 0 && !strings.Contains(img[i:], "/") {
			if at := strings.Index(img, "@"); at >= 0 {
				i = at
			}
			name, rest = img[:i], img[i:]
		}
		change.Image.Name = name
		switch {
		case strings.HasPrefix(rest, "@"):
			change.Image.Digest = rest[1:]
		case strings.HasPrefix(rest, ":"):
			change.Image.Tag = rest[1:]
		default:
			return target, change, fmt.Errorf("%q has no tag or digest", img)
		}
	case "set-env":
		if container == "" || len(positional) == 0 {
			return target, change, fmt.Errorf("set-env needs -c CONTAINER and KEY=VALUE or KEY- arguments")
		}
		change.Env = &Env{Container: container, Set: map[string]string{}}
		for _, a := range positional {
			if k, v, ok := strings.Cut(a, "="); ok {
				change.Env.Set[k] = v
			} else if k, ok := strings.CutSuffix(a, "-"); ok {
				change.Env.Unset = append(change.Env.Unset, k)
			} else {
				return target, change, fmt.Errorf("%q is neither KEY=VALUE nor KEY-", a)
			}
		}
	case "set-resources":
		if container == "" || (requests == "" && limits == "") {
			return target, change, fmt.Errorf("set-resources needs -c CONTAINER and --requests or --limits")
		}
		req, err := parseQuantities(requests)
		if err != nil {
			return target, change, fmt.Errorf("--requests: %w", err)
		}
		lim, err := parseQuantities(limits)
		if err != nil {
			return target, change, fmt.Errorf("--limits: %w", err)
		}
		change.Resources = &Resources{Container: container, Requests: req, Limits: lim}
	case "add":
		if file == "" {
			return target, change, fmt.Errorf("add needs -f FILE")
		}
		data, err := readManifest(file)
		if err != nil {
			return target, change, fmt.Errorf("read manifest: %w", err)
		}
		change.NewResource = &NewResource{Manifest: string(data)}
	case "patch":
		p, err := parsePatchArgs(merge, file, positional, readManifest)
		if err != nil {
			return target, change, fmt.Errorf("patch: %w", err)
		}
		change.Patch = p
		positional = nil
	case "delete":
		change.DeleteResource = &DeleteResource{}
	default:
		return target, change, fmt.Errorf("unknown change %q (scale, set-image, set-env, set-resources, add, patch, delete)", verb)
	}
	if verb != "set-image" && verb != "set-env" && len(positional) > 0 {
		return target, change, fmt.Errorf("%s: unexpected argument %q", verb, positional[0])
	}
	return target, change, nil
}

func parseQuantities(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not name=quantity", part)
		}
		out[k] = v
	}
	return out, nil
}

// parsePatchArgs reads a patch given as --merge JSON, as -f FILE (a merge patch in
// JSON or YAML), or as POINTER=VALUE arguments, VALUE being JSON ("false", "[1,2]",
// "null" removes the field) or, when it is not JSON, a string.
func parsePatchArgs(merge, file string, fields []string, readManifest func(name string) ([]byte, error)) (*Patch, error) {
	given := 0
	for _, set := range []bool{merge != "", file != "", len(fields) > 0} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, fmt.Errorf("give one of --merge JSON, -f FILE or POINTER=VALUE arguments")
	}
	var doc []byte
	switch {
	case merge != "":
		doc = []byte(merge)
	case file != "":
		data, err := readManifest(file)
		if err != nil {
			return nil, fmt.Errorf("read merge patch: %w", err)
		}
		if doc, err = sigsyaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	if doc != nil {
		v, err := decodeJSONValue(doc)
		if err != nil {
			return nil, fmt.Errorf("merge patch: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("the merge patch must be a JSON object")
		}
		return &Patch{Merge: m}, nil
	}
	p := &Patch{}
	for _, a := range fields {
		ptr, text, ok := strings.Cut(a, "=")
		if !ok || ptr == "" {
			return nil, fmt.Errorf("%q is not POINTER=VALUE", a)
		}
		var v any = text
		if json.Valid([]byte(text)) {
			var err error
			if v, err = decodeJSONValue([]byte(text)); err != nil {
				return nil, fmt.Errorf("value of %s: %w", ptr, err)
			}
		}
		p.Set = append(p.Set, FieldValue{Path: ptr, Value: v})
	}
	return p, nil
}
