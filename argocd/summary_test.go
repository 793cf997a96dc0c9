package argocd

import (
	"reflect"
	"testing"
)

func TestSummarizeApps(t *testing.T) {
	l := SummarizeApps(fixtureApps(t))
	if l.Total != 4 || l.Synced != 2 || l.OutOfSync != 2 || l.SelfHeal != 2 {
		t.Errorf("counts = total %d synced %d outOfSync %d selfHeal %d, want 4 2 2 2", l.Total, l.Synced, l.OutOfSync, l.SelfHeal)
	}
	wantRepos := []string{
		"git@github.com:kukie-demo/billing.git",
		"https://github.com/kukie-demo/payments",
		"https://github.com/kukie-demo/reports.git",
		"https://github.com/kukie-demo/shop-deploy.git",
	}
	if !reflect.DeepEqual(l.Repos, wantRepos) {
		t.Errorf("repos = %v", l.Repos)
	}
	var order []string
	for _, a := range l.Apps {
		order = append(order, a.Name)
	}
	// reports failed to sync and has an error condition; billing is out of sync;
	// payments is progressing (not a problem); shop is fine.
	if want := []string{"reports", "billing", "shop", "payments"}; !reflect.DeepEqual(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
	if len(l.Apps[0].Problems) == 0 || len(l.Apps[3].Problems) != 0 {
		t.Errorf("problems: first %q, last %q", l.Apps[0].Problems, l.Apps[3].Problems)
	}
	if l.Apps[0].Level != LevelManual || l.Apps[2].Level != LevelSelfHeal {
		t.Errorf("levels = %s, %s", l.Apps[0].Level, l.Apps[2].Level)
	}
}

func TestSummarizeNoApps(t *testing.T) {
	l := SummarizeApps(nil)
	if l.Total != 0 || l.Apps == nil || l.Repos == nil {
		t.Errorf("empty list = %+v; want zero counts and empty (not null) lists", l)
	}
}

func TestDescribeApp(t *testing.T) {
	var reports Application
	for _, a := range fixtureApps(t) {
		if a.Name == "reports" {
			reports = a
		}
	}
	d := DescribeApp(reports)
	if d.Sync != SyncOutOfSync || d.Health != HealthDegraded || d.Level != LevelManual || d.SourceType != "Helm" {
		t.Errorf("detail = %+v", d)
	}
	if len(d.OutOfSync) != 1 || d.OutOfSync[0].Name != "reports-api" {
		t.Errorf("outOfSync = %+v, want reports-api only", d.OutOfSync)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Type != "SharedResourceWarning" {
		t.Errorf("warnings = %+v", d.Warnings)
	}
	if len(d.Errors) != 1 || d.Errors[0].Type != "ComparisonError" {
		t.Errorf("errors = %+v", d.Errors)
	}
	if d.Operation == nil || d.Operation.Phase != PhaseFailed {
		t.Errorf("operation = %+v", d.Operation)
	}
	if d.Revision != "v3.2.0" {
		t.Errorf("revision = %q", d.Revision)
	}
}
