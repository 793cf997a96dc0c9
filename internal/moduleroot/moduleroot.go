// Package moduleroot finds the directory of the module's go.mod, so that tests and
// test harnesses, which go test runs in their own package directory, can read the
// module's fixtures and scripts. It only reads the filesystem above the working
// directory.
package moduleroot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Find returns the nearest directory at or above the working directory that holds a
// go.mod.
func Find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}
