package testutil

import (
	"encoding/json"
	"testing"
)

// JSONWithout decodes a JSON document and removes every object member
// named key, at any depth, for comparisons that must ignore it (comms: an
// Event keeps 15 bytes of one, so a second round trip may still cut it).
func JSONWithout(t testing.TB, b []byte, key string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, key)
			for _, m := range x {
				strip(m)
			}
		case []any:
			for _, m := range x {
				strip(m)
			}
		}
	}
	strip(v)
	return v
}
