package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/checkout"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/render"
)

const planUsage = `Usage: kukie-gitops plan --repo DIR (--app PATH | --application FILE) [flags] <change>

Finds where a change belongs in an Argo CD manifest repository, edits only those
bytes, renders the affected applications before and after as Argo CD would, and
prints the git diff, what will change in the cluster, warnings and the verdict.
Nothing is written unless --write is given.

Helm apps are rendered in process as Argo CD runs "helm template" (release name,
namespace, values files in order, values/valuesObject, parameters, file
parameters, skipCrds, skipTests, kubeVersion, apiVersions; --kube-version and
--api-versions stand for the destination cluster, whose capabilities the service
reads from it), from a chart in the
repository whose dependencies are vendored under charts/ or pinned by its
Chart.lock (fetched from the chart repository or OCI registry it names, digests
checked; --fetch-charts=false fetches nothing), or from a chart the Application
deploys from a Helm repository (spec.source.chart, fetched the same way at the
exact version targetRevision gives; its values files are this repository's,
"$values/..." of a ref source, and the output names the chart). The edit is found by
rendering: the values key (in the app's values files, the last one first) that
holds the value the chart renders now, set again in the app's last values file
first when the file holding it is shared (the chart's values.yaml, or a file
another app reads); a value only the chart's defaults hold is added to the app's
last values file, and so, tried last, is a key the templates read that nothing
sets (with .Values.ingress.annotations). A value the Application itself sets
(parameters, values, valuesObject) is edited in the Application's manifest when
a file of the repository defines it (app-of-apps) and says what the cluster's
Application says; the parent app that renders it must change in that field
alone. Otherwise it is refused, naming where the value is set. Each source of a
multi-source Application renders on its own;
"$ref/..." values files resolve from this repository when the ref source is this
repository at the same revision. Refused by name: dependencies neither vendored nor
locked, a Chart.lock out of sync, a chart from a Helm repository at a version range or
none (Argo CD resolves it anew at every sync: pin an exact version) or not fetched,
values files read from inside such a chart, a change of an app whose values are in no
file of this repository, remote or globbed values files, "$ref" values files of
another repository or revision, build environment variables in values paths or
parameters.

Kustomize apps are built in process as Argo CD's repo server builds them: the
Application's spec.source.kustomize settings applied through kustomize's own
"kustomize edit" commands in Argo CD's order (namePrefix, nameSuffix, images,
replicas, commonLabels with forceCommonLabels, labelWithoutSelector and
labelIncludeTemplates, commonAnnotations with forceCommonAnnotations and
commonAnnotationsEnvsubst, namespace, inline patches, components with
ignoreMissingComponents; $ARGOCD_APP_* substituted, the revision ones empty), on a
copy of the kustomization, then the build with argocd-cm's kustomize.buildOptions
(--argocd-cm; --load-restrictor and --reorder apply). Refused by name: patches read
from a file, a kustomization inflating helmCharts (with --enable-helm; without
it Argo CD fails too), --enable-alpha-plugins, --enable-exec, --output,
--enable-managedby-label and unknown build flags, a kustomize version argocd-cm does
not register, and a change of a value one of those settings overrides.

Changes:
  scale KIND/NAME --replicas N
  set-image KIND/NAME CONTAINER=[IMAGE]:TAG | CONTAINER=[IMAGE]@DIGEST
  set-env KIND/NAME -c CONTAINER KEY=VALUE... KEY-...
  set-resources KIND/NAME -c CONTAINER [--requests cpu=100m,memory=256Mi] [--limits cpu=]
  add -f FILE            (a manifest with one or more documents; "-" reads stdin)
  patch KIND/NAME --merge JSON | -f FILE | POINTER=VALUE...
                         (any fields, as a JSON merge patch: objects merge, null
                         removes, lists are replaced whole; -f reads the merge patch
                         as JSON or YAML; POINTER is a JSON pointer such as
                         /spec/requireApproval, VALUE is JSON or else a string)
  delete KIND/NAME       (removes the object: its document, or its file and the
                         file's resources entry; a "$patch: delete" patch in the
                         overlay for an object of a kustomize base; the boolean
                         Helm values key whose flip stops the chart rendering it.
                         Refused for a Secret and for an object other objects of
                         the app still name; warns when the app does not prune)

  KIND is a kind or its short name (deployment, deploy, sts, ds, cronjob, job, svc,
  cm, ...); other kinds need --api-version. An empty quantity removes it. In set-env,
  KEY- removes KEY.

Exit codes: 0 verified, 2 refused (reason on stderr), 1 error (including bad usage,
a --repo that is not a directory, an --app that is not one of its directories, and an
interruption: the first SIGINT or SIGTERM stops the plan at once). With --output json,
stdout holds one JSON document whatever the outcome: "verdict" is "verified" (with
"result"), "refused" (with "refusal") or "error" (with "error", as on stderr).

`

// planRefusals are the refusals a plan can give, in the order --help lists
// them: every refusal code of render but a revert's, which this command does
// not make. TestPlanHelpListsEveryRefusal holds them to render's codes.
var planRefusals = []struct{ code, means string }{
	{render.CodeInvalidRequest, "the change cannot be made as asked: an image name other than the one the container runs, a new manifest that does not parse or has no kind, a Directory include or exclude that is not a glob"},
	{render.CodeUnsupportedSource, "the app cannot be rendered as Argo CD renders it: a plugin or another source type, jsonnet files, a .argocd-source.yaml or .argocd-source-<app>.yaml in its path (parameter overrides Argo CD merges in), a source or values file of another repository or revision, the kustomize settings and build options refused above"},
	{render.CodeHelm, "a Helm option or chart render does not apply: remote or globbed values files, build environment variables in values paths or parameters, templates that include each other recursively"},
	{render.CodeHelmDependency, "a chart dependency neither vendored under charts/ nor had as its Chart.lock pins it (no lock, a lock out of sync, a repository not reached, a digest that does not match), or a chart the Application deploys from a Helm repository not had (a version range or none, not fetched, not found)"},
	{render.CodeSecret, "the target is a Secret, a new manifest holds one, an env change would write a value a Secret holds into the repository, or the edit would commit a plain value of a secret-looking env variable or ConfigMap key"},
	{render.CodeRemoteBase, "the target or a resource of the app comes over the network (a remote base or resource)"},
	{render.CodeGenerated, "a change of a generated ConfigMap or Secret other than its data keys, or one its generator cannot take"},
	{render.CodeComponent, "the target comes from a kustomize component the edit cannot change for this app alone"},
	{render.CodeSymlinkEscape, "a symlink leads out of the repository, or an edit would write through a symlink to a missing file"},
	{render.CodeFileTooLarge, "a file is over the byte limit a plan reads"},
	{render.CodeAliasBomb, "YAML aliases refer to themselves or expand past the bound"},
	{render.CodePathEscape, "a path (the app's, a values file's, a kustomization's entry, an edited file's) leaves the repository"},
	{render.CodeRenderFailed, "the app does not render: no kustomization file or Chart.yaml, a file that does not parse, a kustomize or helm failure"},
	{render.CodeTargetNotFound, "the app renders no such object (the reason names what it renders of that kind)"},
	{render.CodeTargetAmbiguous, "the app renders the target more than once"},
	{render.CodeContainerNotFound, "the target has no such container, or the container no image"},
	{render.CodeNotScalable, "the target has no spec.replicas"},
	{render.CodeNoChange, "the target already renders that way"},
	{render.CodeAppOverride, "the Application sets the value (spec.source.kustomize images, replicas, labels or annotations, Helm parameters or values it alone holds), so a Git edit would be overridden"},
	{render.CodeTransformerOverride, "a transformer of the app's kustomization (commonLabels, labels, commonAnnotations, a LabelTransformer) sets the label or annotation after every patch"},
	{render.CodeAlreadyExists, "the app already renders the object a new manifest adds"},
	{render.CodeVerificationFailed, "no edit location renders exactly the current objects plus the change (the reason lists each one tried)"},
	{render.CodeLeak, "every edit that makes the change also changes another app that reads the edited files (--applications)"},
	{render.CodeUnverifiableApp, "another app reads the edited files and cannot be rendered or verified"},
	{render.CodeReferenced, "a delete of an object other objects of the app still name"},
	{render.CodeTooLarge, "the repository holds more than a plan reads (documents, YAML nodes, nesting, bytes of all renders)"},
	{render.CodeTimeout, "the render took longer than --timeout"},
}

// refusalUsage lists planRefusals for --help, each meaning wrapped beside its code.
func refusalUsage() string {
	const width = 84
	var b strings.Builder
	b.WriteString("Refusals (exit code 2; stderr says \"Refused (CODE): why\", --output json gives\n\"refusal\": {\"error\": CODE, \"reason\": ...}):\n")
	for _, r := range planRefusals {
		line := fmt.Sprintf("  %-22s", r.code)
		for i, word := range strings.Fields(r.means) {
			if i > 0 && len(line)+1+len(word) > width {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", 24)
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

const changeUsage = `Change flags:
  -c, --container NAME   container (set-env, set-resources)
  -n, --namespace NS     the target's namespace (default: the app's destination)
  --api-version V        the target's apiVersion (default: from KIND)
  --replicas N           (scale)
  --requests LIST        name=quantity,... (set-resources)
  --limits LIST          name=quantity,... (set-resources)
  -f FILE                manifest file (add), merge patch file (patch)
  --merge JSON           a JSON merge patch (patch)
`

type planFlags struct {
	repo, appPath, sourceType, namespace, name string
	application, applications                  string
	// argocdCM is argocd-cm's manifest: its kustomize settings apply to every
	// Kustomize app, as the service reads them from the cluster.
	argocdCM string
	write    bool
	output   string
	// timeout bounds the render, as render.timeout bounds the service's.
	timeout time.Duration
	// Helm: the values files and release name of an app given by --app, and the
	// destination cluster's version and API versions for every Helm app that
	// does not set its own.
	valueFiles               stringList
	releaseName, kubeVersion string
	apiVersions              string
	fetchCharts              bool
}

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// changeFlags are the flags of a change (see changeUsage): given before the
// change, the plan's own flag set does not know them.
var changeFlags = map[string]bool{
	"c": true, "container": true, "n": true, "api-version": true, "replicas": true,
	"requests": true, "limits": true, "f": true, "merge": true,
}

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The user's own repository on the user's own machine: kustomize builds in
	// this process, as the user would run kustomize, not in worker processes,
	// whose start costs more than most builds and which guard a service's
	// memory and deadlines against repositories it does not trust.
	render.SetKustomizeInProcess(true)
	var f planFlags
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.repo, "repo", "", "repository checkout to plan against (required)")
	fs.StringVar(&f.appPath, "app", "", "the application's path in the repository (spec.source.path)")
	fs.StringVar(&f.sourceType, "type", "", "source type: Directory, Kustomize or Helm (default: from --application, else detected like Argo CD)")
	fs.StringVar(&f.namespace, "namespace", "", "the application's destination namespace")
	fs.StringVar(&f.name, "name", "", "the application's name (default: from --application, else the path's last element)")
	fs.StringVar(&f.application, "application", "", "Argo CD Application manifest giving path, type, destination and options (a file on this machine; relative to the current directory, not --repo)")
	fs.StringVar(&f.applications, "applications", "", "directory of Application manifests that may share files with this app (all are verified; relative to the current directory)")
	fs.StringVar(&f.argocdCM, "argocd-cm", "", "Argo CD's argocd-cm ConfigMap manifest (kubectl get configmap argocd-cm -n argocd -o yaml): its kustomize.buildOptions\napply to every Kustomize app and its kustomize versions are checked, as the service reads them from the cluster\n(default: Argo CD's defaults, no build options)")
	fs.Var(&f.valueFiles, "values", "a Helm values file of the --app chart, relative to its path (repeatable, merged in order)")
	fs.StringVar(&f.releaseName, "release-name", "", "the Helm release name (default: from --application, else the app's name)")
	fs.StringVar(&f.kubeVersion, "kube-version", "", "the destination cluster's Kubernetes version, as Helm charts see it (default: the Application's, else Helm's)")
	fs.StringVar(&f.apiVersions, "api-versions", "", "the destination cluster's API versions, comma-separated, as Helm charts see them (default: the Application's)")
	fs.BoolVar(&f.fetchCharts, "fetch-charts", true, "fetch the Helm chart dependencies a Chart.lock pins and charts/ does not vendor, and the chart an Application deploys from a Helm repository, from the repositories they name (the command's only network reads)")
	fs.BoolVar(&f.write, "write", false, "apply the verified edit to the repository directory")
	fs.StringVar(&f.output, "output", "text", "output format: text or json")
	fs.DurationVar(&f.timeout, "timeout", render.Timeout, "how long the render may take before it is stopped and refused as render_timeout (the service's render.timeout)")
	printUsage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, planUsage)
		fmt.Fprint(w, refusalUsage())
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(w)
		fmt.Fprint(w, changeUsage)
	}
	// Printed below, once: on stdout when asked for, on stderr after a bad flag.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		// The flag package said which flag was wrong; the whole usage would bury it.
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok && changeFlags[strings.TrimLeft(name, "-")] {
			fmt.Fprintf(stderr, "%s is a flag of the change: give it after the change (plan [flags] <change> [change flags])\n", name)
		}
		fmt.Fprintln(stderr, "Run 'kukie-gitops plan --help' for usage.")
		return 1
	}
	// An error (1) says so on stderr and, with --output json, in the one JSON
	// document stdout holds whatever the outcome.
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "kukie-gitops plan: %s\n", msg)
		if f.output == "json" {
			printJSON(stdout, stderr, map[string]any{"verdict": "error", "error": msg})
		}
		return 1
	}
	// A usage mistake is an error (1), never a refusal (2): a script that reads 2 as
	// "the change is wrong" must not be told so about its own command line.
	usageErr := func(format string, a ...any) int {
		code := fail(format, a...)
		fmt.Fprintln(stderr, "Run 'kukie-gitops plan --help' for usage.")
		return code
	}
	if output := f.output; output != "text" && output != "json" {
		f.output = "text"
		return usageErr("--output must be text or json, not %q", output)
	}
	if f.repo == "" {
		return usageErr("--repo is required")
	}
	if f.appPath == "" && f.application == "" {
		return usageErr("--app or --application is required")
	}
	// The synopsis's (--app PATH | --application FILE): the Application's
	// spec.source.path is its path, and another path would verify an app that
	// is not deployed.
	if f.appPath != "" && f.application != "" {
		return usageErr("give --app or --application, not both: the Application's spec.source.path is the app's path")
	}
	if f.timeout <= 0 {
		return usageErr("--timeout must be a positive duration such as 5s or 1m, not %s", f.timeout)
	}
	if fs.NArg() == 0 {
		return usageErr("no change given")
	}
	render.SetTimeout(f.timeout)
	target, change, err := render.ParseChangeArgs(fs.Args(), readManifest)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := checkRepoDir(f.repo); err != nil {
		return fail("%v", err)
	}
	if f.appPath != "" {
		if err := checkAppPath(f.repo, f.appPath); err != nil {
			return fail("%v", err)
		}
	}

	// Kustomize's deprecation warnings reach the person as warnings, not raw text.
	logging.LibraryOutputFrom(ctx).Use(zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true,
		PartsExclude: []string{zerolog.TimestampFieldName}}).Level(zerolog.WarnLevel))
	apps, primary, notes, err := planApplications(f)
	if err != nil {
		var ref *render.Refusal
		if errors.As(err, &ref) {
			return printRefusal(stdout, stderr, f.output, ref, notes)
		}
		return fail("%v", err)
	}
	// Helm's own flags said of an app that is not Helm would be dropped unseen.
	if primary.SourceType != render.SourceHelm {
		switch {
		case len(f.valueFiles) > 0:
			return usageErr("--values is for a Helm app; application %s is %s", primary.Name, primary.SourceType)
		case f.releaseName != "":
			return usageErr("--release-name is for a Helm app; application %s is %s", primary.Name, primary.SourceType)
		}
	}
	if target.Namespace == "" {
		target.Namespace = primary.Namespace
	}
	// Plan returns as soon as ctx is done: the first SIGINT or SIGTERM stops it,
	// even inside a kustomize build, which cannot be cancelled (it is abandoned
	// and dies with the process). Nothing has been written then.
	if f.fetchCharts {
		// A dependency Chart.lock pins, and a chart the Application deploys from
		// a Helm repository, are fetched from the repository named, as helm
		// dependency build and Argo CD's repo server fetch them.
		ctx = render.WithCharts(ctx, helmrepo.New())
	} else if primary.Chart != nil {
		notes = append(notes, fmt.Sprintf("application %s deploys chart %s, which --fetch-charts=false does not fetch", primary.Name, primary.Chart))
	}
	res, err := render.Plan(ctx, render.Request{RepoDir: f.repo, Apps: apps, App: primary.Name, Target: target, Change: change})
	if ctx.Err() != nil {
		return fail("interrupted; nothing written")
	}
	if err != nil {
		var ref *render.Refusal
		if errors.As(err, &ref) {
			return printRefusal(stdout, stderr, f.output, ref, notes)
		}
		printNotes(stderr, notes)
		return fail("%v", err)
	}
	if f.write {
		if ctx.Err() != nil {
			return fail("interrupted; nothing written")
		}
		if err := checkout.WriteEdits(f.repo, res.Edits); err != nil {
			return fail("%v", err)
		}
	}
	if f.output == "json" {
		return printJSON(stdout, stderr, map[string]any{"verdict": "verified", "notes": notes, "result": res, "written": f.write})
	}
	shown := primary
	for _, a := range apps {
		// The source of a multi-source Application that renders the target.
		if a.Name == res.App {
			shown = a
		}
	}
	printResult(stdout, shown, change, res, notes, f.write)
	return 0
}

// planApplications builds the Applications of the request from the flags. The
// manifests go through render.FromArgoCD, as the cluster's Applications do in the
// service, so both read the same options and refuse the same ones.
func planApplications(f planFlags) ([]render.Application, render.Application, []string, error) {
	var notes []string
	var primary render.Application
	var primaryName, repoURL, revision string
	// The later sources of a multi-source Application: render edits the one
	// rendering the target.
	var sources []render.Application
	var settings *argocd.Settings
	if f.argocdCM != "" {
		data, err := os.ReadFile(f.argocdCM)
		if err != nil {
			return nil, primary, nil, fmt.Errorf("read --argocd-cm: %w", err)
		}
		s, err := argocd.DecodeSettingsConfigMap(data)
		if err != nil {
			return nil, primary, nil, fmt.Errorf("%s: %w", f.argocdCM, err)
		}
		settings = &s
		// An app given by flags alone reads them too.
		primary.Kustomize.BuildOptions = s.KustomizeBuildOptions
	}
	if f.application != "" {
		apps, err := readApplications("--application", f.application, f.repo, settings)
		if err != nil {
			return nil, primary, nil, err
		}
		if len(apps) != 1 {
			return nil, primary, nil, fmt.Errorf("%s holds %d Applications; --application takes one", f.application, len(apps))
		}
		converted := render.FromArgoCD(apps[0], nil)
		if len(converted) == 0 {
			return nil, primary, nil, fmt.Errorf("%s: application %s has no spec.source", f.application, apps[0].Key())
		}
		primary, primaryName, sources = converted[0], apps[0].Name, converted[1:]
		if src, ok := apps[0].PrimarySource(); ok {
			repoURL, revision = src.RepoURL, src.TargetRevision
			if r := strings.TrimPrefix(revision, "refs/heads/"); r == "HEAD" {
				// The default branch, which only the repository knows.
				revision = ""
			}
		}
	}
	if f.appPath != "" {
		primary.Path = f.appPath
	}
	if f.name != "" {
		for i := range sources {
			sources[i].Name = f.name + strings.TrimPrefix(sources[i].Name, primary.Name)
		}
		primary.Name = f.name
	}
	if primary.Name == "" {
		primary.Name = path.Base(filepath.ToSlash(filepath.Clean(primary.Path)))
	}
	if f.namespace != "" {
		primary.Namespace = f.namespace
	}
	if f.sourceType != "" {
		t, err := parseSourceType(f.sourceType)
		if err != nil {
			return nil, primary, nil, err
		}
		primary.SourceType = t
	}
	if primary.SourceType == "" {
		t, err := render.DetectSourceType(f.repo, primary.Path)
		if err != nil {
			return nil, primary, nil, err
		}
		primary.SourceType = t
		how := "(pass --type or --application to say it)"
		if f.application != "" {
			how = "for an Application whose source names none (pass --type to say otherwise)"
		}
		notes = append(notes, fmt.Sprintf("source type %s detected from the files at %s, as Argo CD's repo server does %s", t, primary.Path, how))
	}
	if len(f.valueFiles) > 0 {
		primary.Helm.ValueFiles = append(primary.Helm.ValueFiles, f.valueFiles...)
	}
	if f.releaseName != "" {
		primary.Helm.ReleaseName = f.releaseName
	}
	if primary.SourceType == render.SourceHelm && primary.Helm.ReleaseName == "" {
		primary.Helm.ReleaseName = primary.Name
	}
	for i := range sources {
		if sources[i].SourceType == "" {
			t, err := render.DetectSourceType(f.repo, sources[i].Path)
			if err != nil {
				return nil, primary, nil, fmt.Errorf("application %s: %w", sources[i].Name, err)
			}
			sources[i].SourceType = t
		}
	}
	apps := append([]render.Application{primary}, sources...)
	if f.applications != "" {
		others, err := readApplications("--applications", f.applications, f.repo, settings)
		if err != nil {
			return nil, primary, nil, err
		}
		// As the service does: the apps that deploy the tree being edited, the
		// same repository at the same branch.
		sameTree := func(src argocd.AppSource) bool {
			return (repoURL == "" || src.RepoURL == "" || github.SameRepo(src.RepoURL, repoURL)) &&
				argocd.DeploysBranch(src.TargetRevision, revision)
		}
		for _, o := range others {
			// The primary app, however it was named on the command line.
			if o.Name == primary.Name || o.Key().String() == primary.Name || (primaryName != "" && o.Name == primaryName) {
				continue
			}
			for _, a := range render.FromArgoCD(o, sameTree) {
				if a.SourceType == "" {
					t, err := render.DetectSourceType(f.repo, a.Path)
					if err != nil {
						notes = append(notes, fmt.Sprintf("application %s skipped: %v", a.Name, err))
						continue
					}
					a.SourceType = t
				}
				apps = append(apps, a)
			}
		}
	}
	for i := range apps {
		if apps[i].SourceType != render.SourceHelm {
			continue
		}
		if apps[i].Helm.KubeVersion == "" {
			apps[i].Helm.KubeVersion = f.kubeVersion
		}
		if len(apps[i].Helm.APIVersions) == 0 && f.apiVersions != "" {
			apps[i].Helm.APIVersions = strings.Split(f.apiVersions, ",")
		}
	}
	return apps, apps[0], notes, nil
}

// checkRepoDir says what is wrong with --repo before anything is read from it.
func checkRepoDir(repo string) error {
	st, err := os.Stat(repo)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--repo %s: no such directory", repo)
	case err != nil:
		return fmt.Errorf("--repo %s: %w", repo, err)
	case !st.IsDir():
		return fmt.Errorf("--repo %s is not a directory: give the repository's checkout", repo)
	}
	return nil
}

// checkAppPath says what is wrong with --app: a path that leaves the repository
// or is not one of its directories. It is read as Argo CD reads
// spec.source.path, from the repository's root ("/apps/web" is apps/web); a
// path on this machine that names a directory of the repository is answered
// with the path to give instead.
func checkAppPath(repo, app string) error {
	rel := path.Clean(strings.TrimPrefix(filepath.ToSlash(app), "/"))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("--app %s leaves the repository: give the app's path in it, as spec.source.path does (apps/web)", app)
	}
	if st, err := os.Stat(filepath.Join(repo, filepath.FromSlash(rel))); err == nil && st.IsDir() {
		return nil
	}
	msg := fmt.Sprintf("--app %s is not a directory of the repository %s", app, repo)
	if absRepo, err := filepath.Abs(repo); err == nil && filepath.IsAbs(app) {
		if inRepo, err := filepath.Rel(absRepo, app); err == nil && inRepo != ".." && !strings.HasPrefix(inRepo, ".."+string(filepath.Separator)) {
			if st, err := os.Stat(app); err == nil && st.IsDir() {
				msg += fmt.Sprintf(": give its path in the repository, --app %s", filepath.ToSlash(inRepo))
			}
		}
	}
	return errors.New(msg)
}

func parseSourceType(s string) (render.SourceType, error) {
	for _, t := range []render.SourceType{render.SourceDirectory, render.SourceKustomize, render.SourceHelm, render.SourcePlugin} {
		if strings.EqualFold(s, string(t)) {
			return t, nil
		}
	}
	return "", fmt.Errorf("--type %q is not one of Directory, Kustomize, Helm", s)
}

// readApplications reads the Application manifests of a file, or of the YAML and
// JSON files of a directory (not recursive), given by flag (--application or
// --applications) as p; a relative p is read from the current directory, not from
// repo.
func readApplications(flag, p, repo string, settings *argocd.Settings) ([]argocd.Application, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, p, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, missingApplications(flag, p, abs, repo, err)
	}
	apps, err := argocd.ReadApplications(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	if err != nil {
		return nil, fmt.Errorf("read applications %s: %w", p, err)
	}
	for i := range apps {
		apps[i].Settings = settings
	}
	return apps, nil
}

// missingApplications is the error of a --application or --applications path
// that cannot be read: it names the path looked for and, for a relative one, the
// directory it was resolved against, and points at the file of that name in the
// repository when there is one (the usual mistake: a path given as in the
// repository).
func missingApplications(flag, p, abs, repo string, statErr error) error {
	why := statErr
	var pe *fs.PathError
	if errors.As(statErr, &pe) {
		why = pe.Err
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("%s %s: %v", flag, p, why)
	}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "(unknown: " + err.Error() + ")"
	}
	msg := fmt.Sprintf("%s %s: %v: looked for %s (a relative path is resolved against the current directory %s, not --repo)",
		flag, p, why, abs, cwd)
	if inRepo := filepath.Join(repo, p); repo != "" {
		if _, err := os.Stat(inRepo); err == nil {
			msg += fmt.Sprintf("; the repository has %s: give %s %s", p, flag, inRepo)
		}
	}
	return errors.New(msg)
}

// readManifest reads the manifest of "add -f FILE", standard input for "-".
func readManifest(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// printRefusal reports a refusal: the reason always on stderr, and the JSON
// document on stdout with --output json. The notes (how the source type was
// found) come first, since they may explain the refusal.
func printRefusal(stdout, stderr io.Writer, output string, ref *render.Refusal, notes []string) int {
	if output == "json" {
		printJSON(stdout, stderr, map[string]any{"verdict": "refused", "notes": notes, "refusal": ref})
	}
	printNotes(stderr, notes)
	fmt.Fprintf(stderr, "Refused (%s): %s\n", ref.Code, ref.Reason)
	for _, a := range ref.Attempts {
		fmt.Fprintf(stderr, "  tried %s in %s: %s\n", a.Strategy, strings.Join(a.Files, ", "), a.Reason)
	}
	return 2
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "kukie-gitops plan: write json: %v\n", err)
		return 1
	}
	return 0
}

func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
}

func printResult(w io.Writer, app render.Application, change render.Change, res *render.Result, notes []string, written bool) {
	printNotes(w, notes)
	if app.Chart != nil {
		// Its chart is fetched; the repository holds only its values.
		fmt.Fprintf(w, "Application: %s (%s, chart %s, values in %s", app.Name, app.SourceType, app.Chart, app.Path)
	} else {
		fmt.Fprintf(w, "Application: %s (%s, path %s", app.Name, app.SourceType, app.Path)
	}
	if app.Namespace != "" {
		fmt.Fprintf(w, ", namespace %s", app.Namespace)
	}
	fmt.Fprintln(w, ")")
	// The target as the render holds it: the kind as it spells it, the
	// namespace it is applied in, a generated object's hashed name.
	if res.Target != nil {
		fmt.Fprintf(w, "Target:      %s\n", *res.Target)
	}
	var files []string
	for _, e := range res.Edits {
		files = append(files, e.Path)
	}
	fmt.Fprintf(w, "Edit:        %s (%s)\n", res.Strategy, strings.Join(files, ", "))
	for _, r := range res.Renames {
		fmt.Fprintf(w, "Renamed:     [%s] %s\n", r.App, r)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Git diff:")
	fmt.Fprintln(w, res.GitDiff)
	fmt.Fprintln(w, "What will change in the cluster:")
	for _, d := range res.ClusterDiff {
		ns := ""
		if d.Namespace != "" {
			ns = d.Namespace + "/"
		}
		action := d.Action
		if note := render.RenameNote(res.Renames, d); note != "" {
			action += " (" + note + ")"
		}
		fmt.Fprintf(w, "  [%s] %s %s%s %s\n", d.App, d.Kind, ns, d.Name, action)
		for _, c := range d.Changes {
			switch {
			case c.Before == "":
				fmt.Fprintf(w, "      %s: + %s\n", c.Path, c.After)
			case c.After == "":
				fmt.Fprintf(w, "      %s: - %s\n", c.Path, c.Before)
			default:
				fmt.Fprintf(w, "      %s: %s -> %s\n", c.Path, c.Before, c.After)
			}
		}
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, wr := range res.Warnings {
			fmt.Fprintf(w, "  - %s\n", wr)
		}
	}
	var parts []string
	total := 0
	for _, a := range res.Verification.Apps {
		parts = append(parts, a.Summary())
		total++
	}
	sort.Strings(parts)
	proof := "every object equals its current render plus only the requested change"
	if change.DeleteResource != nil {
		proof = "every object equals its current render, and only the target is gone"
	}
	fmt.Fprintf(w, "\nVerdict: verified. Rendered %s before and after (%s); %s.\n",
		plural(total, "application"), strings.Join(parts, "; "), proof)
	if written {
		fmt.Fprintln(w, "Written to the repository directory.")
	} else {
		fmt.Fprintln(w, "Nothing written (use --write to apply).")
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
