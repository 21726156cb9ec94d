package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// The many-containers test's scale: SIGSCOPE_MANY_CONTAINERS Docker
// containers (default 200, what CI runs) and 50 pid namespaces per
// container (10,000), started and stopped at the same time.
const (
	manyBatch = 10 // containers started, then stopped, together
	// manyHeapSlack is how much more live heap the agent may keep after the
	// loop than at the baseline: the resolver remembers ended containers
	// for its TTL (5 min), and the ring of episodes holds other episodes.
	manyHeapSlack = 2 << 20
)

// 10,000 short-lived pid namespaces and 200 Docker containers started and
// stopped in a loop, at the same time, so that pids (pid_max is 32768 here)
// and pid namespace inodes are reused, by namespaces and containers alike,
// while the agent runs. Every stop's episode names the right container or
// namespace with the outcome its workload implies, and no episode names
// one that was not stopped; the agent's caches stay within their bounds
// (sigscope_cache_entries <= sigscope_cache_capacity at every poll); its
// live heap returns to its baseline (after a warm-up that fills the ring
// of episodes) within manyHeapSlack.
func TestManyContainers(t *testing.T) {
	testutil.RequirePrivileged(t)
	containers := 200
	if v := os.Getenv("SIGSCOPE_MANY_CONTAINERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < manyBatch {
			t.Fatalf("SIGSCOPE_MANY_CONTAINERS=%q: want a number >= %d", v, manyBatch)
		}
		containers = n
	}
	namespaces := 50 * containers
	img := busyboxImage(t)
	d := dockertest.EnsureDaemon(t)
	port, agentErr := startServe(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	agentPID := servePID(t, port)
	tag := strconv.Itoa(os.Getpid())

	poll := startManyPoller(base)
	defer poll.stop()

	// Warm-up: fill the ring of episodes and reach the runtime once, then
	// take the baseline.
	start := time.Now()
	warmNS := manyNamespaces(t, 1000, 0)
	warm := manyDockerBatch(t, d, img, tag, 0, manyBatch)
	if err := warmNS.Wait(); err != nil {
		t.Fatal(err)
	}
	poll.waitQuiet(t)
	heap0, rss0 := manyLiveHeap(t, base, agentPID)
	t.Logf("many: baseline after the warm-up (%v): live_heap=%.1fMiB rss=%.1fMiB", time.Since(start).Round(time.Millisecond),
		float64(heap0)/(1<<20), float64(rss0)/1024)

	// The loop: namespaces paced to last about as long as the containers
	// (10 per 2.5 s batch), both at once.
	start = time.Now()
	interval := 2500 * time.Millisecond * time.Duration(containers/manyBatch) / time.Duration(namespaces)
	ns := manyNamespaces(t, namespaces, interval)
	ctrs := slices.Clone(warm)
	for from := manyBatch; from < manyBatch+containers; from += manyBatch {
		ctrs = append(ctrs, manyDockerBatch(t, d, img, tag, from, from+manyBatch)...)
	}
	dockerTook := time.Since(start)
	if err := ns.Wait(); err != nil {
		t.Fatal(err)
	}
	loopTook := time.Since(start)
	poll.waitQuiet(t)
	eps, caches, err := poll.stop()
	if err != nil {
		t.Fatal(err)
	}
	heap1, rss1 := manyLiveHeap(t, base, agentPID)
	hwm := procStatusKB(t, agentPID, "VmHWM")
	t.Logf("many: loop namespaces=%d containers=%d took=%v (containers %v) episodes=%d",
		namespaces, containers, loopTook.Round(time.Millisecond), dockerTook.Round(time.Millisecond), len(eps))
	t.Logf("many: after live_heap=%.1fMiB rss=%.1fMiB peak_rss=%.1fMiB (VmHWM); baseline live_heap=%.1fMiB rss=%.1fMiB",
		float64(heap1)/(1<<20), float64(rss1)/1024, float64(hwm)/1024, float64(heap0)/(1<<20), float64(rss0)/1024)
	names := make([]string, 0, len(caches))
	for name := range caches {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := caches[name]
		t.Logf("many: cache=%s max_entries=%.0f capacity=%.0f", name, c.max, c.capacity)
		if c.max > c.capacity {
			t.Errorf("cache %s held %.0f entries, over its capacity %.0f", name, c.max, c.capacity)
		}
	}
	for _, want := range []string{"resolver_processes", "resolver_containers", "timeline_open_episodes", "episodes"} {
		if _, ok := caches[want]; !ok {
			t.Errorf("no sigscope_cache_entries{cache=%q}", want)
		}
	}

	recs := append(warmNS.records(t), ns.records(t)...)
	bad := checkManyNamespaces(t, eps, recs)
	bad += checkManyContainers(t, eps, ctrs, "many-"+tag+"-")
	inodes := map[uint32]bool{}
	for _, r := range recs {
		inodes[r.pidns] = true
	}
	shared := 0
	for _, c := range ctrs {
		if inodes[c.pidns] {
			shared++
		}
	}
	t.Logf("many: containers whose pid namespace inode a namespace of the helper also had: %d of %d", shared, len(ctrs))
	if bad > 0 {
		t.Logf("agent:\n%s", tail(agentErr.String()))
	}
	if heap1 > heap0+manyHeapSlack {
		t.Errorf("live heap %.1f MiB after the loop, baseline %.1f MiB: more than %d MiB above",
			float64(heap1)/(1<<20), float64(heap0)/(1<<20), manyHeapSlack>>20)
	}
}

// manyEpisode is the part of an /api/v1/episodes object the test checks.
type manyEpisode struct {
	ID        uint64 `json:"id"`
	Container struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		PidNS uint32 `json:"pidns"`
	} `json:"container"`
	Main struct {
		PID   uint32 `json:"pid"`
		NsPID uint32 `json:"ns_pid"`
		Comm  string `json:"comm"`
	} `json:"main"`
	MainIsInit bool      `json:"main_is_init"`
	Outcome    string    `json:"outcome"`
	Start      time.Time `json:"start"`
	ExitStatus *int      `json:"exit_status"`
	StopSender *struct {
		PID uint32 `json:"pid"`
	} `json:"stop_sender"`
	CascadeKills []struct {
		NsPID uint32 `json:"ns_pid"`
	} `json:"cascade_kills"`
}

func (ep *manyEpisode) String() string {
	st := "-"
	if ep.ExitStatus != nil {
		st = strconv.Itoa(*ep.ExitStatus)
	}
	return fmt.Sprintf("episode %d: container %.12s %q pidns %d, main %d %q, %s, status %s, %d cascade kills",
		ep.ID, ep.Container.ID, ep.Container.Name, ep.Container.PidNS, ep.Main.PID, ep.Main.Comm, ep.Outcome, st, len(ep.CascadeKills))
}

// manyCache is the most entries a cache held at any poll, and its capacity.
type manyCache struct{ max, capacity float64 }

// manyPoller reads every episode the agent completes (its ring keeps the
// last 1000: it is read every 250 ms) and samples the caches.
type manyPoller struct {
	base   string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	eps    map[uint64]manyEpisode
	caches map[string]manyCache
	lastID uint64
	polls  int
	err    error
}

func startManyPoller(base string) *manyPoller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &manyPoller{base: base, cancel: cancel, done: make(chan struct{}),
		eps: map[uint64]manyEpisode{}, caches: map[string]manyCache{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := p.poll(); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *manyPoller) poll() error {
	body, err := get(context.Background(), http.DefaultClient, p.base+"/api/v1/episodes")
	if err != nil {
		return err
	}
	var eps []manyEpisode
	if err := json.Unmarshal(body, &eps); err != nil {
		return fmt.Errorf("/api/v1/episodes: %v", err)
	}
	fams, err := scrapeMetrics(http.DefaultClient, p.base)
	if err != nil {
		return err
	}
	body, err = get(context.Background(), http.DefaultClient, p.base+"/api/v1/info")
	if err != nil {
		return err
	}
	var info apiv1.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return fmt.Errorf("/api/v1/info: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	for _, ep := range eps {
		p.eps[ep.ID] = ep
	}
	// The info was read last: every episode up to its last_id was in
	// this poll's ring or an earlier one, unless it was evicted unread.
	p.lastID = info.Episodes.LastID
	capacity := map[string]float64{}
	if f := fams["sigscope_cache_capacity"]; f != nil {
		for _, m := range f.Metric {
			capacity[labelOf(m, "cache")] = m.GetGauge().GetValue()
		}
	}
	if f := fams["sigscope_cache_entries"]; f != nil {
		for _, m := range f.Metric {
			name, v := labelOf(m, "cache"), m.GetGauge().GetValue()
			c := p.caches[name]
			c.max, c.capacity = max(c.max, v), capacity[name]
			p.caches[name] = c
		}
	}
	return nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// waitQuiet waits until no episode has completed for 2 s (twice the
// engine's settle time: every stop has completed) and the poller has read
// the last ones.
func (p *manyPoller) waitQuiet(t *testing.T) {
	t.Helper()
	state := func() (uint64, int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.lastID, p.polls, p.err
	}
	last, _, _ := state()
	since := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		id, polls, err := state()
		if err != nil {
			t.Fatal(err)
		}
		if id != last {
			last, since = id, time.Now()
		}
		if time.Since(since) > 2*time.Second {
			for ; polls+2 > p.pollCount(); time.Sleep(50 * time.Millisecond) {
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("episodes kept completing for 60 s (last id %d)", id)
		}
	}
}

func (p *manyPoller) pollCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 1 << 30
	}
	return p.polls
}

// stop ends the polling and returns every episode read, by id, and the
// caches' figures. Episodes evicted before a poll read them are an error.
func (p *manyPoller) stop() (map[uint64]manyEpisode, map[string]manyCache, error) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, nil, p.err
	}
	missed := 0
	for id := uint64(1); id <= p.lastID; id++ {
		if _, ok := p.eps[id]; !ok {
			missed++
		}
	}
	if missed > 0 {
		return nil, nil, fmt.Errorf("%d of %d episodes left the agent's ring before the poller read them", missed, p.lastID)
	}
	return p.eps, p.caches, nil
}

// manyLiveHeap returns the agent's live heap: the least that its next
// three garbage collections found live (go_gc_heap_live_bytes), and its RSS
// in KiB. The collections are brought on by scraping /metrics in a loop,
// whose garbage is small, so that little of what they find live is a
// request in flight; the least of three drops the rest of that noise.
func manyLiveHeap(t *testing.T, base string, pid int) (live uint64, rssKB uint64) {
	t.Helper()
	gcs := func() (uint64, uint64) {
		fams, err := scrapeMetrics(http.DefaultClient, base)
		if err != nil {
			t.Fatal(err)
		}
		f := fams["go_gc_duration_seconds"]
		if f == nil || len(f.Metric) == 0 || fams["go_gc_heap_live_bytes"] == nil {
			t.Fatal("/metrics lacks go_gc_duration_seconds or go_gc_heap_live_bytes")
		}
		return f.Metric[0].GetSummary().GetSampleCount(), uint64(sumMetric(fams, "go_gc_heap_live_bytes", nil))
	}
	last, _ := gcs()
	seen := 0
	live = math.MaxUint64
	for deadline := time.Now().Add(60 * time.Second); seen < 3; {
		n, l := gcs()
		if n > last {
			last, seen, live = n, seen+1, min(live, l)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent ran %d garbage collections in 60 s", seen)
		}
	}
	return live, procStatusKB(t, pid, "VmRSS")
}

// manyNS is a run of testdata/manyns.c: n pid namespaces, one after the
// other.
type manyNS struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	stderr bytes.Buffer
}

// manyNSRecord is one namespace as the helper made it.
type manyNSRecord struct {
	i, pid  int
	pidns   uint32
	variant int // 0 SIGTERM dropped then SIGKILL; 1 SIGTERM handler; 2 exits
	status  int
	sender  int // the helper's pid: it sent the stop signal
}
