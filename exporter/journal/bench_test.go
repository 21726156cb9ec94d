package journal

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
)

// BenchmarkLoadFullJournal reads back a journal at the default bound
// (DefaultFiles × DefaultFileSize of real episodes) keeping the agent's
// default 1000: what an agent's start pays (docs/deploy.md).
func BenchmarkLoadFullJournal(b *testing.B) {
	dir := b.TempDir()
	eps := pipelinetest.StreamEpisodes(b)
	j, err := Open(Options{Dir: dir, Logger: quiet(), Queue: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	go j.Run(context.Background())
	var id uint64
	for full := false; !full; {
		for range 1000 {
			id++
			ep := eps[id%uint64(len(eps))]
			ep.ID, ep.Node = id, "node-a"
			j.ObserveEpisode(&ep)
		}
		for j.out.Queued() > 0 {
			time.Sleep(time.Millisecond) // the writer catches up
		}
		fs, _ := Files(dir)
		full = len(fs) == DefaultFiles+1 || len(fs) == DefaultFiles && lastSize(fs) > DefaultFileSize-8<<10
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var ld Loaded
	for range b.N {
		if ld, err = Load(dir, 1000); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(ld.Bytes)/(1<<20), "MiB")
	b.ReportMetric(float64(ld.Lines), "episodes")
	b.ReportMetric(float64(ld.Bytes)/float64(ld.Lines), "bytes/episode")
}

func lastSize(fs []string) int64 {
	fi, err := os.Stat(fs[len(fs)-1])
	if err != nil {
		return 0
	}
	return fi.Size()
}
