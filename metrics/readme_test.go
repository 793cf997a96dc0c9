package metrics_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/render/helmexec"
	"github.com/kukie/kukie-gitops/secret"
)

// describing records the collectors registered on it, so that every metric they
// describe is known, also a labelled one no series of which was counted yet (a
// scrape shows none of those).
type describing struct{ collectors []prometheus.Collector }

func (d *describing) Register(c prometheus.Collector) error {
	d.collectors = append(d.collectors, c)
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	d.collectors = append(d.collectors, cs...)
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// names lists the kukie_* metrics the registered collectors describe.
func (d *describing) names(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range d.collectors {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for desc := range ch {
			m := descName.FindStringSubmatch(desc.String())
			if m == nil {
				t.Fatalf("no name in %s", desc)
			}
			if strings.HasPrefix(m[1], "kukie_") && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

type idlePool struct{}

func (idlePool) Stats() helmexec.Stats { return helmexec.Stats{} }

// TestREADMEListsEveryMetric holds the README's metric table (Metrics) to the
// metrics the service registers: every constructor of this package, and the
// GitHub clients' own. A metric added without a row, or a row of a metric gone,
// fails it.
func TestREADMEListsEveryMetric(t *testing.T) {
	reg := &describing{}
	if err := metrics.RegisterBuildInfo(reg, "test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []prometheus.Collector{metrics.StoreCollector{}, metrics.CacheCollector{}} {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	for name, build := range map[string]func() error{
		"NewCluster":          func() error { _, err := metrics.NewCluster(reg); return err },
		"NewHTTP":             func() error { _, err := metrics.NewHTTP(reg); return err },
		"NewInbox":            func() error { _, err := metrics.NewInbox(reg); return err },
		"NewNotifications":    func() error { _, err := metrics.NewNotifications(reg); return err },
		"NewPipeline":         func() error { _, err := metrics.NewPipeline(reg); return err },
		"NewRender":           func() error { _, err := metrics.NewRender(reg); return err },
		"NewHelmWorkers":      func() error { _, err := metrics.NewHelmWorkers(reg, idlePool{}); return err },
		"NewKustomizeWorkers": func() error { _, err := metrics.NewKustomizeWorkers(reg, idlePool{}); return err },
	} {
		if err := build(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if _, err := github.NewClientCreator(github.Config{AppID: 1, PrivateKey: secret.New(string(keyPEM))}, reg); err != nil {
		t.Fatal(err)
	}
	registered := reg.names(t)

	// Every constructor of this package that registers metrics is called above.
	for _, name := range constructors(t) {
		switch name {
		case "RegisterBuildInfo", "StoreCollector", "CacheCollector", "NewCluster", "NewHTTP", "NewInbox", "NewNotifications", "NewPipeline",
			"NewRender", "NewHelmWorkers", "NewKustomizeWorkers":
		default:
			t.Errorf("metrics.%s registers metrics this test does not describe: call it above", name)
		}
	}

	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Metrics\n")
	if !ok {
		t.Fatal("README has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	metricName := regexp.MustCompile("`(kukie_[a-z_]+)")
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `kukie_") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range metricName.FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	for _, name := range registered {
		if !documented[name] {
			t.Errorf("README's metric table has no row for %s", name)
		}
	}
	for name := range documented {
		if !slices.Contains(registered, name) {
			t.Errorf("README's metric table has a row for %s, which the service does not register", name)
		}
	}
}

// constructors lists the functions of this package that take a
// prometheus.Registerer, and its exported collectors.
func constructors(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// A constructor, or an exported collector the service registers itself.
	fn := regexp.MustCompile(`(?m)^func (?:([A-Z]\w*)\([^)]*prometheus\.Registerer|\(\w+ ([A-Z]\w*)\) Describe\()`)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fn.FindAllStringSubmatch(string(src), -1) {
			out = append(out, m[1]+m[2])
		}
	}
	if len(out) == 0 {
		t.Fatal("found no constructor taking a prometheus.Registerer")
	}
	return out
}
