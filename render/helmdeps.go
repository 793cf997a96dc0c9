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

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// ChartDependency is one dependency a chart's Chart.lock pins: the chart name
// and exact version in the repository it names (an http(s) chart repository or
// an oci:// registry).
type ChartDependency struct {
	Repository string
	Name       string
	Version    string
}

func (d ChartDependency) String() string {
	return fmt.Sprintf("%s %s from %s", d.Name, d.Version, d.Repository)
}

// ChartSource fetches the chart archives (.tgz) that Chart.lock files pin, the
// way "helm dependency build" does for Argo CD before it renders: from the
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
// not vendored under charts/. Without it such a chart is refused. Render itself
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
func resolveDependencies(ctx context.Context, ch *chart.Chart, root string, budget *int64) error {
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
		return nil
	}
	where := fmt.Sprintf("chart %s: the dependencies %s are not vendored under charts/", root, strings.Join(missing, ", "))
	if len(missing) == 1 {
		where = fmt.Sprintf("chart %s: the dependency %s is not vendored under charts/", root, missing[0])
	}
	if ch.Lock == nil {
		return refuse(CodeHelmDependency, "%s and the chart has no Chart.lock: Argo CD would resolve their version ranges anew at every render (helm dependency update); pin them with a Chart.lock or vendor them", where)
	}
	digest, err := lockDigest(ch.Metadata.Dependencies, ch.Lock.Dependencies)
	if err != nil || digest != ch.Lock.Digest {
		return refuse(CodeHelmDependency, "%s and %s is out of sync with Chart.yaml (its digest %s, Chart.yaml's dependencies give %s); helm dependency build refuses it too: run helm dependency update",
			where, path.Join(root, "Chart.lock"), ch.Lock.Digest, digest)
	}
	source := chartsOf(ctx)
	if source == nil {
		return refuse(CodeHelmDependency, "%s, and this render fetches no chart dependencies: vendor them", where)
	}
	locked := map[string]*chart.Dependency{}
	for _, d := range ch.Lock.Dependencies {
		locked[d.Name] = d
	}
	for _, name := range missing {
		l := locked[name]
		if l == nil {
			return refuse(CodeHelmDependency, "chart %s: Chart.lock pins no version of the dependency %s", root, name)
		}
		dep := ChartDependency{Repository: l.Repository, Name: l.Name, Version: l.Version}
		switch {
		case dep.Repository == "":
			return refuse(CodeHelmDependency, "chart %s: the dependency %s names no repository and is not vendored under charts/", root, name)
		case strings.HasPrefix(dep.Repository, "file://"):
			return refuse(CodeHelmDependency, "chart %s: the dependency %s is the local chart %s, which is not supported yet: vendor it under charts/", root, name, dep.Repository)
		case strings.HasPrefix(dep.Repository, "@") || strings.HasPrefix(dep.Repository, "alias:"):
			return refuse(CodeHelmDependency, "chart %s: the dependency %s names its repository by the alias %s, which only a Helm client's repository configuration resolves: name it by URL", root, name, dep.Repository)
		}
		data, err := source.FetchChart(ctx, dep)
		if err != nil {
			if errors.Is(err, ErrChartTooLarge) {
				return refuse(CodeTooLarge, "chart %s: dependency %s: %v", root, dep, err)
			}
			if cerr := contextError(ctx); cerr != nil {
				return cerr
			}
			return refuse(CodeHelmDependency, "chart %s: dependency %s: %v", root, dep, err)
		}
		file := path.Join(root, "charts", name+"-"+dep.Version+".tgz") + " (fetched)"
		if err := checkChartArchive(file, data, budget); err != nil {
			return err
		}
		sub, err := loader.LoadArchive(bytes.NewReader(data))
		if err != nil {
			return refuse(CodeHelmDependency, "chart %s: dependency %s: not a chart archive: %v", root, dep, err)
		}
		if sub.Metadata == nil || sub.Metadata.Name != dep.Name || sub.Metadata.Version != dep.Version {
			got := "no Chart.yaml"
			if sub.Metadata != nil {
				got = sub.Metadata.Name + " " + sub.Metadata.Version
			}
			return refuse(CodeHelmDependency, "chart %s: dependency %s: the archive holds %s", root, dep, got)
		}
		ch.AddDependency(sub)
	}
	return nil
}
