package e2e_test

import "sigs.k8s.io/yaml"

func yamlDecode(text string, out *map[string]any) error { return yaml.Unmarshal([]byte(text), out) }
