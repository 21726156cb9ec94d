// Package pipelinetest gives tests the episodes of sigscope's recorded
// streams (episodes/timeline/testdata/streams): real stops, replayed as `sigscope
// timeline -f` replays them (pipeline.Replay).
// Only tests import it.
package pipelinetest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// Streams are the recordings StreamEpisodes replays by default: a
// shell-form stop, catatonit, the JVM and tini.
var Streams = []string{"docker_stop_t3.jsonl", "catatonit.jsonl", "runtime_java.jsonl", "docker_init_tini.jsonl"}

// StreamEpisodes replays the named recorded streams (Streams when none are
// named) into the episodes they make, in order.
func StreamEpisodes(tb testing.TB, names ...string) []timeline.Episode {
	tb.Helper()
	if len(names) == 0 {
		names = Streams
	}
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "timeline", "testdata", "streams")
	var eps []timeline.Episode
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		_, err = pipeline.Replay(f, pipeline.ReadOptions{}, timeline.New(timeline.Options{}), func(done []timeline.Episode) error {
			eps = append(eps, done...)
			return nil
		})
		_ = f.Close()
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
	}
	if len(eps) == 0 {
		tb.Fatal("the streams made no episode")
	}
	return eps
}
