package tracer

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Decode reads an aligned record in place and copies one that is not: both
// give the same event.
func TestDecodeUnalignedRecord(t *testing.T) {
	for p, raw := range recordedRecords(t) {
		buf := make([]byte, len(raw)+1)
		copy(buf[1:], raw)
		var aligned, unaligned sigvocab.Event
		if err := Decode(raw, Clock{}, &aligned); err != nil {
			t.Fatal(err)
		}
		if err := Decode(buf[1:], Clock{}, &unaligned); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(aligned, unaligned) {
			t.Errorf("%s: unaligned %+v, aligned %+v", p, unaligned, aligned)
		}
	}
}

// recordedRecords are the records the privileged tests captured
// (testdata/events), by file name.
func recordedRecords(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "events", "*.hex"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded events: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		out[p] = loadFixture(t, strings.TrimSuffix(filepath.Base(p), ".hex"))
	}
	return out
}
