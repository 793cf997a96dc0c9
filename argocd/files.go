package argocd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// ReadApplications reads the Argo CD Applications of the manifest file name in fsys,
// or, when name is a directory, of its YAML and JSON files (not recursive), through
// DecodeApplicationsYAML. Documents of other kinds are skipped; finding no
// Application at all is an error.
func ReadApplications(fsys fs.FS, name string) ([]Application, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	files := []string{name}
	if info.IsDir() {
		entries, err := fs.ReadDir(fsys, name)
		if err != nil {
			return nil, err
		}
		files = nil
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml") || strings.HasSuffix(e.Name(), ".json")) {
				files = append(files, path.Join(name, e.Name()))
			}
		}
	}
	var apps []Application
	for _, file := range files {
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		found, err := DecodeApplicationsYAML(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		apps = append(apps, found...)
	}
	if len(apps) == 0 {
		return nil, errors.New("no Argo CD Application found")
	}
	return apps, nil
}
