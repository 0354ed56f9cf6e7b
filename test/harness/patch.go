//go:build e2e

package harness

import "encoding/json"

// LabelValue is a label's value in a merge patch: "" removes the label.
func LabelValue(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// MustJSON is v in JSON, for a patch.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
