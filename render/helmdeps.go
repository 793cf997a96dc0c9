package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// ChartDependency is one chart at an exact version in the repository it names
// (an http(s) chart repository or an oci:// registry): a dependency a chart's
// Chart.lock pins, or the chart an Application deploys from a Helm repository.
type ChartDependency struct {
	Repository string `json:"repository"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	// Artifact says the chart is the OCI artifact an Application's oci://
	// repoURL names (see convertChart): Argo CD's repo server pulls it as an
	// artifact and renders the one directory its chart layer holds, whatever
	// it and the chart are named; Name is only the repository's last segment.
	Artifact bool `json:"artifact,omitempty"`
}

func (d ChartDependency) String() string {
	return fmt.Sprintf("%s %s from %s", d.Name, d.Version, d.Repository)
}

// ChartSource fetches the chart archives (.tgz) that Chart.lock files pin, the
// way "helm dependency build" does for Argo CD before it renders, and the charts
// Applications deploy from Helm repositories, as Argo CD pulls them: from the
// repository the lock names and no other, each archive checked against the
// digest its repository publishes. An error says why the dependency could not
// be had; one wrapping ErrChartTooLarge is refused as too large.
type ChartSource interface {
	FetchChart(ctx context.Context, dep ChartDependency) ([]byte, error)
}

// ErrChartTooLarge marks a repository answer larger than its bound.
var ErrChartTooLarge = errors.New("larger than render reads")

type chartsKey struct{}

// WithCharts returns ctx carrying s: every Helm render under ctx (Plan, Revert,
// Render) fetches through it the dependencies a chart's Chart.lock pins that are
// not vendored under charts/, and the chart of an app deploying one from a Helm
// repository (Application.Chart). Without it such a chart is refused. Render itself
// does no network I/O: s does, as its caller chose.
func WithCharts(ctx context.Context, s ChartSource) context.Context {
	return context.WithValue(ctx, chartsKey{}, s)
}

func chartsOf(ctx context.Context) ChartSource {
	s, _ := ctx.Value(chartsKey{}).(ChartSource)
	return s
}

// lockDigest is the digest "helm dependency update" writes into Chart.lock: of
// the dependencies of Chart.yaml and those it locked, as Helm serialises them.
// "helm dependency build" refuses a lock whose digest differs (the lock is out
// of sync with Chart.yaml).
func lockDigest(req, locked []*chart.Dependency) (string, error) {
	data, err := json.Marshal([2][]*chart.Dependency{req, locked})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// resolveDependencies adds to ch the dependencies its Chart.lock pins that are
// not vendored under charts/, fetched through the context's ChartSource, as
// "helm dependency build" adds them for Argo CD. Archives count against budget
// like vendored ones. Each refusal names the chart and the dependency.
func resolveDependencies(ctx context.Context, ch *chart.Chart, root string, budget *archiveBudget) error {
	subs, err := fetchDependencies(ctx, ch, root, budget)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		ch.AddDependency(sub)
	}
	return nil
}

// fetchDependencies fetches the dependencies of ch that resolveDependencies
// adds to it, leaving ch as it is.
func fetchDependencies(ctx context.Context, ch *chart.Chart, root string, budget *archiveBudget) ([]*chart.Chart, error) {
	present := map[string]bool{}
	for _, d := range ch.Dependencies() {
		present[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !present[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	where := fmt.Sprintf("chart %s: the dependencies %s are not vendored under charts/", root, strings.Join(missing, ", "))
	if len(missing) == 1 {
		where = fmt.Sprintf("chart %s: the dependency %s is not vendored under charts/", root, missing[0])
	}
	if ch.Lock == nil {
		return nil, refuse(CodeHelmDependency, "%s and the chart has no Chart.lock: Argo CD would resolve their version ranges anew at every render (helm dependency update); pin them with a Chart.lock or vendor them", where)
	}
	digest, err := lockDigest(ch.Metadata.Dependencies, ch.Lock.Dependencies)
	if err != nil || digest != ch.Lock.Digest {
		return nil, refuse(CodeHelmDependency, "%s and %s is out of sync with Chart.yaml (its digest %s, Chart.yaml's dependencies give %s); helm dependency build refuses it too: run helm dependency update",
			where, chartFile(root, "Chart.lock"), ch.Lock.Digest, digest)
	}
	source := chartsOf(ctx)
	if source == nil {
		return nil, refuse(CodeHelmDependency, "%s, and this render fetches no chart dependencies: vendor them", where)
	}
	locked := map[string]*chart.Dependency{}
	var subs []*chart.Chart
	for _, d := range ch.Lock.Dependencies {
		locked[d.Name] = d
	}
	for _, name := range missing {
		l := locked[name]
		if l == nil {
			return nil, refuse(CodeHelmDependency, "chart %s: Chart.lock pins no version of the dependency %s", root, name)
		}
		dep := ChartDependency{Repository: l.Repository, Name: l.Name, Version: l.Version}
		switch {
		case dep.Repository == "":
			return nil, refuse(CodeHelmDependency, "chart %s: the dependency %s names no repository and is not vendored under charts/", root, name)
		case strings.HasPrefix(dep.Repository, "file://"):
			return nil, refuse(CodeHelmDependency, "chart %s: the dependency %s is the local chart %s, which is not supported yet: vendor it under charts/", root, name, dep.Repository)
		case strings.HasPrefix(dep.Repository, "@") || strings.HasPrefix(dep.Repository, "alias:"):
			return nil, refuse(CodeHelmDependency, "chart %s: the dependency %s names its repository by the alias %s, which only a Helm client's repository configuration resolves: name it by URL", root, name, dep.Repository)
		}
		file := chartFile(root, "charts", name+"-"+dep.Version+".tgz") + " (fetched)"
		// helm dependency build leaves the archive under charts/, where Helm's
		// loader reads it whatever its directory.
		sub, _, err := fetchChart(ctx, source, dep, file, fmt.Sprintf("chart %s: dependency %s", root, dep), budget)
		if err != nil {
			return nil, err
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// chartFile names a file of the chart at root: a path of the repository, or,
// in a chart fetched from a Helm repository (root names it, see
// ChartDependency.String), the file of that chart.
func chartFile(root string, elem ...string) string {
	if strings.Contains(root, "://") {
		return root + ", " + path.Join(elem...)
	}
	return path.Join(append([]string{root}, elem...)...)
}

// appChartArchive names the archive of an app's chart in refusals, as the
// archive a Chart.lock pins is named.
func appChartArchive(c ChartDependency) string {
	return fmt.Sprintf("the archive of chart %s (fetched)", c)
}

// checkChartVersion refuses a chart version that is not one exact version (a
// leading v allowed):
// Argo CD resolves a range (or no version) to the newest matching chart anew
// at every sync, so no render made now is what it will deploy.
func checkChartVersion(app string, c ChartDependency) error {
	if c.Version == "" {
		return refuse(CodeHelmDependency, "application %s deploys chart %s from %s at no version (targetRevision is empty): Argo CD resolves it to the newest chart anew at every sync, so no render made now is what it will deploy; pin an exact version", app, c.Name, c.Repository)
	}
	// A leading v (v1.14.4, as some charts publish their versions) is still
	// one version to Argo CD, and Helm finds the chart by it, published with
	// or without the v (ChartVersionMatch).
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(c.Version, "v")); err != nil {
		return refuse(CodeHelmDependency, "application %s deploys chart %s from %s at %q, which is not an exact version (targetRevision): Argo CD resolves it to the newest matching chart anew at every sync, so no render made now is what it will deploy; pin an exact version", app, c.Name, c.Repository, c.Version)
	}
	return nil
}

// ChartVersionMatch reports whether a chart published at version published
// is one Helm takes for the exact version requested ("helm pull --version",
// by which Argo CD fetches an Application's chart): the same string, or the
// same semantic version, a leading v and build metadata aside (1.14.4 for
// v1.14.4, v1.14.4 for 1.14.4, 1.2.3+build.1 for 1.2.3); a pre-release is
// another version. Of several a repository lists, Helm takes the one listed as
// written, else the first of its index (see package helmrepo). requested is
// read once, for the many versions of an index.
func ChartVersionMatch(requested string) func(published string) bool {
	// Helm falls back to the requested version as a constraint: for one exact
	// version, a semantic version equal to it.
	c, err := semver.NewConstraint(requested)
	return func(published string) bool {
		if published == requested {
			return true
		}
		if err != nil {
			return false
		}
		v, err := semver.NewVersion(published)
		return err == nil && c.Check(v)
	}
}

// fetchAppChart fetches and loads the chart an app deploys from a Helm
// repository, through the context's ChartSource as a Chart.lock's dependencies
// are (the repository it names and no other, the digest it publishes checked),
// its archive counted against the bound of a render's chart archives. It
// returns what is left of that bound for the chart's own locked dependencies.
func fetchAppChart(ctx context.Context, app Application) (*chart.Chart, archiveBudget, error) {
	c := *app.Chart
	if err := checkChartVersion(app.Name, c); err != nil {
		return nil, archiveBudget{}, err
	}
	source := chartsOf(ctx)
	if source == nil {
		return nil, archiveBudget{}, refuse(CodeHelmDependency, "application %s deploys chart %s, and this render fetches no charts: it cannot be rendered without the chart", app.Name, c)
	}
	budget := newArchiveBudget()
	where := fmt.Sprintf("application %s: chart %s", app.Name, c)
	ch, dir, err := fetchChart(ctx, source, c, appChartArchive(c), where, &budget)
	if err != nil {
		return nil, archiveBudget{}, err
	}
	// Argo CD unpacks the pulled archive and renders the directory its chart's
	// name gives; Helm's loader would read the chart from any. An artifact's is
	// the one directory it holds.
	if want := path.Base(c.Name); dir != want && !c.Artifact {
		return nil, archiveBudget{}, refuse(CodeHelmDependency, "%s: the archive holds its chart in the directory %s/, and Argo CD renders the directory %s/ of it, which it does not have", where, dir, want)
	}
	return ch, budget, nil
}

// fetchChart fetches dep through source and loads it, its archive (named file
// in refusals) expanded first under budget; where begins each refusal. It
// returns the chart and its directory in the archive.
func fetchChart(ctx context.Context, source ChartSource, dep ChartDependency, file, where string, budget *archiveBudget) (*chart.Chart, string, error) {
	data, err := source.FetchChart(ctx, dep)
	if err != nil {
		if errors.Is(err, ErrChartTooLarge) {
			return nil, "", refuse(CodeTooLarge, "%s: %v", where, err)
		}
		if cerr := contextError(ctx); cerr != nil {
			return nil, "", cerr
		}
		return nil, "", refuse(CodeHelmDependency, "%s: %v", where, err)
	}
	dir, err := checkChartArchive(file, data, budget)
	if err != nil {
		return nil, "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, "", refuse(CodeHelmDependency, "%s: not a chart archive: %v", where, err)
	}
	// A chart named with a path in its registry (bitnamicharts/redis) is the
	// chart its last segment names, as Argo CD finds it in the pulled archive;
	// its version is one Helm takes for the version asked (1.14.4 for v1.14.4).
	if ch.Metadata == nil || ch.Metadata.Name != path.Base(dep.Name) && !dep.Artifact || !ChartVersionMatch(dep.Version)(ch.Metadata.Version) {
		got := "no Chart.yaml"
		if ch.Metadata != nil {
			got = ch.Metadata.Name + " " + ch.Metadata.Version
		}
		return nil, "", refuse(CodeHelmDependency, "%s: the archive holds %s", where, got)
	}
	return ch, dir, nil
}
