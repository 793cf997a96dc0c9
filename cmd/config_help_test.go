package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeHelpSaysWhereEachFlagDefaultsFrom: a flag that overrides a setting
// says, in serve --help, which setting it stands for when it is not given.
func TestServeHelpSaysWhereEachFlagDefaultsFrom(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := (program{}).run(context.Background(), []string{"serve", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("serve --help = %d\n%s", code, stderr.String())
	}
	help := stdout.String() + stderr.String()
	for flag, setting := range map[string]string{
		"-addr": "server.address", "-config": "KUKIE_CONFIG", "-profile": "KUKIE_PROFILE",
		"-log-format": "log.format", "-log-level": "log.level",
	} {
		_, rest, ok := strings.Cut(help, "\n  "+flag+" ")
		if !ok {
			t.Errorf("serve --help has no flag %s:\n%s", flag, help)
			continue
		}
		line, _, _ := strings.Cut(rest, "\n  -")
		if !strings.Contains(line, setting) {
			t.Errorf("serve --help's %s does not say it stands for %s: %q", flag, setting, line)
		}
	}
}
