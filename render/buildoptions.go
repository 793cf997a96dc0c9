package render

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kustomize/v5/commands/build"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// buildFlagsMu serialises parses of build options: the kustomize CLI keeps its
// build flags in package variables.
var buildFlagsMu sync.Mutex

// buildFlagsRefused are the "kustomize build" flags render does not apply, and
// why. Each changes what Argo CD renders in a way an in-process build without
// plugins, executables, network or Helm cannot mirror.
var buildFlagsRefused = map[string]string{
	"enable-helm":            "Helm charts inflated by kustomize are not supported",
	"enable-alpha-plugins":   "kustomize plugins are not supported",
	"enable-exec":            "exec functions are not supported",
	"output":                 "it writes the build to files instead of answering it",
	"enable-managedby-label": "the label carries the version of the kustomize binary Argo CD runs",
}

// parseBuildOptions reads argocd-cm "kustomize.buildOptions" as Argo CD passes
// it to "kustomize build <path>" (split on white space) into the options of an
// in-process build, through the kustomize CLI's own flag set: the same flags,
// spellings, defaults and checks. A flag render does not apply, an unknown flag
// or a second path is an error naming it.
func parseBuildOptions(s string) (*krusty.Options, error) {
	buildFlagsMu.Lock()
	defer buildFlagsMu.Unlock()
	cmd := build.NewCmdBuild(filesys.MakeFsInMemory(), build.MakeHelp("kustomize", "build"), io.Discard)
	build.AddFunctionAlphaEnablementFlags(cmd.Flags())
	flags := cmd.Flags()
	flags.SetOutput(io.Discard)
	// The CLI's deprecation notices would go to its stderr.
	for _, name := range []string{"reorder", "enable-managedby-label"} {
		if f := flags.Lookup(name); f != nil {
			f.Deprecated = ""
		}
	}
	if err := flags.Parse(append([]string{"."}, strings.Fields(s)...)); err != nil {
		return nil, fmt.Errorf("argocd-cm kustomize.buildOptions %q: %w", s, err)
	}
	if args := flags.Args(); len(args) > 1 {
		return nil, fmt.Errorf("argocd-cm kustomize.buildOptions %q: kustomize build takes one path, the options name %q too", s, strings.Join(args[1:], " "))
	}
	for _, name := range sortedKeys(buildFlagsRefused) {
		if flags.Changed(name) {
			return nil, fmt.Errorf("argocd-cm kustomize.buildOptions sets --%s, which is not supported: %s", name, buildFlagsRefused[name])
		}
	}
	if err := build.Validate(flags.Args()); err != nil {
		return nil, fmt.Errorf("argocd-cm kustomize.buildOptions %q: %w", s, err)
	}
	o := build.HonorKustomizeFlags(krusty.MakeDefaultOptions(), flags)
	// Plugins stay off whatever else the flags say (the Helm and function
	// settings only configure them).
	o.PluginConfig = types.DisabledPluginConfig()
	o.AddManagedbyLabel = false
	return o, nil
}
