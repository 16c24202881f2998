package diagnose

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaPath is the published JSON Schema of the report.
var schemaPath = filepath.Join("..", "..", "..", "docs", "diagnose.schema.json")

// validate checks a JSON report against docs/diagnose.schema.json.
func validate(t *testing.T, report []byte) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("report does not match %s: %v\n%s", schemaPath, err, report)
	}
}

func TestJSONMatchesSchema(t *testing.T) {
	for name, ws := range map[string][]Workload{
		"fixture": loadWorkloads(t, filepath.Join("testdata", "workloads.json"), 15*time.Second),
		"empty":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			for _, all := range []bool{false, true} {
				var b bytes.Buffer
				r := NewReport("live", 15*time.Second, ws, all, time.Now())
				r.Notes = []string{"collector malloc failed"}
				if err := WriteJSON(&b, r); err != nil {
					t.Fatal(err)
				}
				validate(t, b.Bytes())
			}
		})
	}
	// The schema rejects what it should: an unknown severity.
	sch, err := jsonschema.NewCompiler().Compile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"schema_version":2,"generated_at":"2026-01-01T00:00:00Z","source":"live","span_seconds":15,"worst":"bad","findings":[]}`)))
	if sch.Validate(bad) == nil {
		t.Error("schema accepted worst=bad")
	}
}
