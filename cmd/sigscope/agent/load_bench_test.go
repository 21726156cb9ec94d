package agent

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// BenchmarkLoadClients is the HTTP side of e2e's TestLoad without the
// kernel: a full ring of 1000 episodes, 50 keep-alive clients over
// loopback each asking /metrics, /api/v1/episodes, ?limit=50 and
// /api/v1/info in turn. One op is one round of the four by every client.
// It reports the peak of the Go runtime's mapped memory and of its heap
// (objects, live and not yet collected), sampled every millisecond: what
// the answers in flight cost, the part of the agent's RSS that grows with
// clients.
func BenchmarkLoadClients(b *testing.B) {
	const clients = 50
	src := pipelinetest.StreamEpisodes(b)
	eps := make([]timeline.Episode, 1000)
	for i := range eps {
		eps[i] = src[i%len(src)]
	}
	a, err := New(Options{MaxEpisodes: len(eps), NodeName: "node-a", Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.resolver.Close() })
	a.complete(eps)
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	paths := []string{"/metrics", "/api/v1/episodes", "/api/v1/episodes?limit=50", "/api/v1/info"}

	runtime.GC()
	var peakTotal, peakHeap uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peakTotal = max(peakTotal, s[0].Value.Uint64()-releasedBytes())
			peakHeap = max(peakHeap, s[1].Value.Uint64())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	b.ResetTimer()
	var wg sync.WaitGroup
	var failed sync.Once
	for range clients {
		wg.Go(func() {
			for range b.N {
				for _, p := range paths {
					resp, err := client.Get(srv.URL + p)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if err == nil && resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("%s: %s", p, resp.Status)
						}
					}
					if err != nil {
						failed.Do(func() { b.Error(err) })
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(stop)
	<-sampled
	b.ReportMetric(float64(peakTotal)/(1<<20), "peak-mapped-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
}

// releasedBytes is the heap the runtime has returned to the kernel:
// mapped but not resident.
func releasedBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
