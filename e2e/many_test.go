package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sigscope/sigscope/agent/apiv1"
	"github.com/sigscope/sigscope/internal/dockertest"
	"github.com/sigscope/sigscope/internal/testutil"
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

// manyNamespaces compiles and starts testdata/manyns.c making n
// namespaces, one every interval (0: as fast as it can).
func manyNamespaces(t *testing.T, n int, interval time.Duration) *manyNS {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manyns")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, filepath.Join("testdata", "manyns.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc testdata/manyns.c (apt-get install gcc libc6-dev): %v\n%s", err, out)
	}
	m := &manyNS{cmd: exec.Command(bin, strconv.Itoa(n), strconv.FormatInt(interval.Microseconds(), 10))}
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cmd.Process.Kill(); _ = m.Wait() })
	return m
}

// Wait waits for the helper to have made and stopped every namespace.
func (m *manyNS) Wait() error {
	if m.cmd.ProcessState != nil {
		return nil
	}
	if err := m.cmd.Wait(); err != nil {
		return fmt.Errorf("manyns: %v\n%s", err, m.stderr.String())
	}
	return nil
}

// records are the namespaces the helper made, in order.
func (m *manyNS) records(t *testing.T) []manyNSRecord {
	t.Helper()
	var out []manyNSRecord
	sc := bufio.NewScanner(bytes.NewReader(m.out.Bytes()))
	done := false
	for sc.Scan() {
		var r manyNSRecord
		if _, err := fmt.Sscanf(sc.Text(), "ns %d %d %d %d %d", &r.i, &r.pid, &r.pidns, &r.variant, &r.status); err == nil {
			r.sender = m.cmd.Process.Pid
			out = append(out, r)
		} else if strings.HasPrefix(sc.Text(), "done ") {
			done = true
		}
	}
	if !done {
		t.Fatalf("manyns did not finish: %d namespaces\n%s", len(out), m.stderr.String())
	}
	return out
}

// checkManyNamespaces: each namespace has exactly one episode, with its
// init as the main process, in its pid namespace, in no container, with
// the outcome and status of what it did; no episode names a namespace
// init of the helper that it did not make. Pids and namespace inodes are
// reused, so a (pid, pidns) pair may come back: the episodes of one pair
// are matched to its namespaces in start order. It returns how many
// namespaces or episodes were wrong.
func checkManyNamespaces(t *testing.T, eps map[uint64]manyEpisode, recs []manyNSRecord) int {
	t.Helper()
	type key struct {
		pid   uint32
		pidns uint32
	}
	byKey := map[key][]manyNSRecord{}
	for _, r := range recs {
		k := key{uint32(r.pid), r.pidns}
		byKey[k] = append(byKey[k], r)
	}
	var mine []manyEpisode
	for _, ep := range eps {
		if ep.Main.Comm == "manyns-init" {
			mine = append(mine, ep)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Start.Before(mine[j].Start) })
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	reused := 0
	for _, ep := range mine {
		k := key{ep.Main.PID, ep.Container.PidNS}
		queue := byKey[k]
		if len(queue) == 0 {
			fail("%s: no namespace the helper made had that pid and pid namespace", &ep)
			continue
		}
		r := queue[0]
		byKey[k] = queue[1:]
		if len(queue) > 1 {
			reused++
		}
		want, status, cascade := []string{"ignored_by_init", "graceful", "exited"}[r.variant], r.status, 0
		if r.variant == 0 {
			cascade = 1
		}
		st := -1
		if ep.ExitStatus != nil {
			st = *ep.ExitStatus
		}
		switch {
		case ep.Container.ID != "":
			fail("namespace %d (pid %d): %s: attributed to a container", r.i, r.pid, &ep)
		case !ep.MainIsInit || ep.Main.NsPID != 1:
			fail("namespace %d (pid %d): %s: main is not the namespace's init", r.i, r.pid, &ep)
		case ep.Outcome != want || st != status || len(ep.CascadeKills) != cascade:
			fail("namespace %d (pid %d, variant %d): %s: want %s, status %d, %d cascade kills", r.i, r.pid, r.variant, &ep, want, status, cascade)
		case r.variant != 2 && (ep.StopSender == nil || int(ep.StopSender.PID) != r.sender):
			fail("namespace %d (pid %d): %s: the stop signal's sender is not the helper %d", r.i, r.pid, &ep, r.sender)
		}
	}
	missing := 0
	for _, queue := range byKey {
		for _, r := range queue {
			if missing++; missing <= 5 {
				fail("namespace %d (pid %d, pidns %d, variant %d): no episode", r.i, r.pid, r.pidns, r.variant)
			}
		}
	}
	bad += max(missing-5, 0)
	pids, inodes := map[int]int{}, map[uint32]int{}
	for _, r := range recs {
		pids[r.pid]++
		inodes[r.pidns]++
	}
	t.Logf("many: namespaces=%d episodes=%d wrong=%d missing=%d distinct_pids=%d distinct_pidns=%d same_pid_and_pidns=%d",
		len(recs), len(mine), bad-missing, missing, len(pids), len(inodes), reused)
	return bad
}

// manyContainer is one Docker container of the loop and what its stop
// must look like.
type manyContainer struct {
	name, id string
	pidns    uint32
	outcome  string
	status   int
}

// manyDockerBatch starts containers from..to-1 at once, waits until each
// runs its script, then stops them all at once and removes them. The
// variant is i % 4:
//
//	0  sh -c 'sleep 1000 & wait', docker stop -t 1: PID 1 drops SIGTERM,
//	   SIGKILL a second later (ignored_by_init, 137)
//	1  a TERM trap that exits with 1 + i % 50, docker stop (graceful)
//	2  sh -c 'sleep 1000 & wait', docker kill (killed, 137)
//	3  exits on its own with 1 + i % 50 (exited)
func manyDockerBatch(t *testing.T, d *dockertest.Daemon, img, tag string, from, to int) []manyContainer {
	t.Helper()
	out := make([]manyContainer, to-from)
	var wg sync.WaitGroup
	errs := make([]error, to-from)
	for i := from; i < to; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := manyStart(d, img, fmt.Sprintf("many-%s-%d", tag, i), i)
			out[i-from], errs[i-from] = c, err
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		args := []string{"rm", "-f"}
		for _, c := range out {
			args = append(args, c.name)
		}
		_, _ = d.DockerErr(args...)
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	byVariant := [4][]string{}
	for i := from; i < to; i++ {
		byVariant[i%4] = append(byVariant[i%4], out[i-from].name)
	}
	cmds := [][]string{
		append([]string{"stop", "-t", "1"}, append(byVariant[0], byVariant[1]...)...),
		append([]string{"kill"}, byVariant[2]...),
		append([]string{"wait"}, byVariant[3]...),
	}
	for _, args := range cmds {
		if len(args) == 1 || args[0] == "stop" && len(args) == 3 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, err := d.DockerErr(args...); err != nil {
				t.Errorf("docker %s: %v\n%s", args[0], err, o)
			}
		}()
	}
	wg.Wait()
	// What the runtime says happened, before the containers go.
	args := []string{"inspect", "-f", "{{.Name}} {{.State.ExitCode}}"}
	for _, c := range out {
		args = append(args, c.name)
	}
	o, err := d.DockerErr(args...)
	if err != nil {
		t.Fatalf("docker inspect: %v\n%s", err, o)
	}
	for i, line := range strings.Split(strings.TrimSpace(o), "\n") {
		if want := fmt.Sprintf("/%s %d", out[i].name, out[i].status); line != want {
			t.Errorf("docker inspect says %q, want %q: the workload did not do what the test expects", line, want)
		}
	}
	rm := []string{"rm"}
	for _, c := range out {
		rm = append(rm, c.name)
	}
	if o, err := d.DockerErr(rm...); err != nil {
		t.Fatalf("docker rm: %v\n%s", err, o)
	}
	return out
}

// manyStart starts container i and waits until PID 1 runs its script
// (sh, with its trap in place for variant 1).
func manyStart(d *dockertest.Daemon, img, name string, i int) (manyContainer, error) {
	code := 1 + i%50
	c := manyContainer{name: name}
	var script string
	switch i % 4 {
	case 0, 2:
		script, c.status = "sleep 1000 & wait", 137
		c.outcome = map[int]string{0: "ignored_by_init", 2: "killed"}[i%4]
	case 1:
		script, c.outcome, c.status = fmt.Sprintf("trap 'exit %d' TERM; sleep 1000 & wait", code), "graceful", code
	case 3:
		script, c.outcome, c.status = fmt.Sprintf("sleep 1; exit %d", code), "exited", code
	}
	_, _ = d.DockerErr("rm", "-f", name)
	id, err := d.DockerErr("run", "-d", "--network", "none", "--name", name, img, "sh", "-c", script)
	if err != nil {
		return c, fmt.Errorf("docker run %s: %v\n%s", name, err, id)
	}
	c.id = strings.TrimSpace(id)
	o, err := d.DockerErr("inspect", "-f", "{{.State.Pid}}", name)
	pid, _ := strconv.Atoi(strings.TrimSpace(o))
	if err != nil || pid <= 0 {
		return c, fmt.Errorf("container %s: no pid: %v %s", name, err, o)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil && bytes.Contains(status, []byte("Name:\tsh\n")) && (i%4 != 1 || sigCaught(status, syscall.SIGTERM)) {
			break
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("container %s: PID 1 (%d) not running its script after 10 s (%v)", name, pid, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st); err != nil {
		return c, err
	}
	c.pidns = uint32(st.Ino)
	return c, nil
}

// sigCaught reads SigCgt from a /proc/PID/status.
func sigCaught(status []byte, sig syscall.Signal) bool {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// checkManyContainers: each container has exactly one episode, naming it
// (ID and name) in its pid namespace, with the outcome and status its
// script implies; no episode names a container of the run that is not
// one of them. It returns how many were wrong.
func checkManyContainers(t *testing.T, eps map[uint64]manyEpisode, ctrs []manyContainer, prefix string) int {
	t.Helper()
	byID := map[string][]manyEpisode{}
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	known := map[string]bool{}
	for _, c := range ctrs {
		known[c.id] = true
	}
	for _, ep := range eps {
		if known[ep.Container.ID] {
			byID[ep.Container.ID] = append(byID[ep.Container.ID], ep)
		} else if strings.HasPrefix(ep.Container.Name, prefix) {
			fail("%s: a container of this run that the test did not stop", &ep)
		}
	}
	for _, c := range ctrs {
		got := byID[c.id]
		if len(got) != 1 {
			fail("container %s (%.12s): %d episodes, want 1: %v", c.name, c.id, len(got), got)
			continue
		}
		ep := got[0]
		st := -1
		if ep.ExitStatus != nil {
			st = *ep.ExitStatus
		}
		if ep.Container.Name != c.name || ep.Container.PidNS != c.pidns || ep.Outcome != c.outcome || st != c.status || !ep.MainIsInit {
			fail("container %s (%.12s, pidns %d): %s: want %s, status %d", c.name, c.id, c.pidns, &ep, c.outcome, c.status)
		}
	}
	t.Logf("many: containers=%d wrong=%d", len(ctrs), bad)
	return bad
}
