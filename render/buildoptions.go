package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
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
// plugins, executables, network or Helm cannot mirror. --enable-helm is not one:
// it changes only the build of a kustomization that inflates a Helm chart, which
// the build refuses (see helmChartsRefusal); argocd-cm sets it for every app.
var buildFlagsRefused = map[string]string{
	"enable-alpha-plugins":   "kustomize plugins are not supported",
	"enable-exec":            "exec functions are not supported",
	"output":                 "it writes the build to files instead of answering it",
	"enable-managedby-label": "the label carries the version of the kustomize binary Argo CD runs",
}

// parseBuildOptions reads argocd-cm "kustomize.buildOptions" as Argo CD passes
// it to "kustomize build <path>" (split on white space) into the options of an
// in-process build, through the kustomize CLI's own flag set: the same flags,
// spellings, defaults and checks. A flag render does not apply, an unknown flag
// or a second path is an error naming it. helm reports --enable-helm, which the
// options leave off like every plugin.
func parseBuildOptions(s string) (_ *krusty.Options, helm bool, _ error) {
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
		return nil, false, fmt.Errorf("argocd-cm kustomize.buildOptions %q: %w", s, err)
	}
	if args := flags.Args(); len(args) > 1 {
		return nil, false, fmt.Errorf("argocd-cm kustomize.buildOptions %q: kustomize build takes one path, the options name %q too", s, strings.Join(args[1:], " "))
	}
	for _, name := range slices.Sorted(maps.Keys(buildFlagsRefused)) {
		if flags.Changed(name) {
			return nil, false, fmt.Errorf("argocd-cm kustomize.buildOptions sets --%s, which is not supported: %s", name, buildFlagsRefused[name])
		}
	}
	if err := build.Validate(flags.Args()); err != nil {
		return nil, false, fmt.Errorf("argocd-cm kustomize.buildOptions %q: %w", s, err)
	}
	o := build.HonorKustomizeFlags(krusty.MakeDefaultOptions(), flags)
	helm = o.PluginConfig.HelmConfig.Enabled
	// Plugins stay off whatever else the flags say (the Helm and function
	// settings only configure them).
	o.PluginConfig = types.DisabledPluginConfig()
	o.AddManagedbyLabel = false
	return o, helm, nil
}

// helmChartsRefusal refuses the build of a kustomization graph one of whose
// kustomizations inflates a Helm chart (helmCharts, or the older
// helmChartInflationGenerator): with --enable-helm (helm) kustomize runs helm,
// which render does not; without it kustomize fails, in Argo CD too. It is nil
// when no kustomization of reach inflates one.
func helmChartsRefusal(app string, reach *kustReach, helm bool) *Refusal {
	for _, n := range reach.nodes {
		var charts []string
		for _, c := range n.k.HelmCharts {
			charts = append(charts, c.Name)
		}
		for _, c := range n.k.HelmChartInflationGenerator {
			charts = append(charts, c.ChartName)
		}
		if len(charts) == 0 {
			continue
		}
		what := fmt.Sprintf("%s inflates the Helm chart %s (helmCharts)", n.file, strings.Join(charts, ", "))
		if len(charts) > 1 {
			what = fmt.Sprintf("%s inflates the Helm charts %s (helmCharts)", n.file, strings.Join(charts, ", "))
		}
		if helm {
			return &Refusal{Code: CodeUnsupportedSource, App: app, Reason: fmt.Sprintf(
				"application %s: %s, which kustomize builds by running helm, as argocd-cm kustomize.buildOptions --enable-helm lets it: Helm charts inflated by kustomize are not supported; a Helm Application of the chart is", app, what)}
		}
		return &Refusal{Code: CodeRenderFailed, App: app, Reason: fmt.Sprintf(
			"application %s: %s, which kustomize builds only with --enable-helm, and argocd-cm kustomize.buildOptions does not set it: Argo CD fails to build the app too", app, what)}
	}
	return nil
}
