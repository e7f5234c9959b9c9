package permissions

import (
	"encoding/json"
	"fmt"
	"io"
)

// Write prints rules as JSON: what a component's --print-permissions
// shows, for an operator who grants them by hand and for the launcher,
// which runs our programs without linking their code (Read).
func Write(w io.Writer, rules []Rule) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rules)
}

// Read parses what Write printed. An empty list is an error: every
// component needs something.
func Read(data []byte) ([]Rule, error) {
	var rules []Rule
	if err := json.Unmarshal(data, &rules); err != nil {
		return nil, fmt.Errorf("reading permissions: %w", err)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("reading permissions: none listed")
	}
	return rules, nil
}
