package mixin

import (
	"encoding/json"

	"sigs.k8s.io/yaml"
)

// yamlToJSON decodes YAML into v through its JSON form (json struct tags apply).
func yamlToJSON(b []byte, v any) error {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	return json.Unmarshal(j, v)
}
