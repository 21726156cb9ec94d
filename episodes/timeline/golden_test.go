package timeline_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the recorded streams")

// Every recorded stream (testdata/streams) replays into the same episodes,
// byte for byte, as JSON and as text: testdata/golden holds what they gave
// when it was last written (go test -run TestStreamsGolden -update). A
// change to the engine that is meant to leave the recorded stops alone
// (a new kind of event, a field only some episodes have) must leave these
// files alone too.
func TestStreamsGolden(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("testdata", "streams", "*.jsonl"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no streams: %v", err)
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".jsonl"), func(t *testing.T) {
			var b bytes.Buffer
			for _, ep := range pipelinetest.StreamEpisodes(t, name) {
				j, err := json.Marshal(ep)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(j)
				b.WriteByte('\n')
				if err := ep.WriteText(&b); err != nil {
					t.Fatal(err)
				}
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(name, ".jsonl")+".out")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s replays differently from %s:\n%s\nwant\n%s", name, golden, b.Bytes(), want)
			}
		})
	}
}
