package argocd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// DecodeApplicationsYAML decodes the Applications among the YAML (or JSON) documents
// of a manifest file, as a person keeps them in Git next to the app; documents of any
// other kind are skipped. Each goes through the same decoder as an Application read
// from the API server. It is for files a person hands the plan command: the service
// reads Applications only from the API server (DecodeApplicationList), so the input
// here is not bounded.
func DecodeApplicationsYAML(data []byte) ([]Application, error) {
	var apps []Application
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return apps, nil
			}
			return nil, fmt.Errorf("parse document %d: %w", n, err)
		}
		if obj == nil || obj["kind"] != "Application" {
			continue
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("parse document %d: %w", n, err)
		}
		a, err := DecodeApplication(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		apps = append(apps, a)
	}
}
