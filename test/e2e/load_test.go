package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// loadSignal is the only signal the load test's agent traces. Nothing else
// on the node sends it, so every generate event the agent counts is one of
// the sender's kills, and the books can balance exactly.
const loadSignal = sigvocab.Signal(47) // SIGRTMIN+13

// The load test's figures (docs/benchmarks.md, "Load").
const (
	loadClients = 50
	// loadMaxRSS bounds the agent's peak RSS (VmHWM) under the load. At
	// rest it is about 65 MiB: the binary's pages, the 8 MiB ring and a
	// 6 MiB heap. 50 clients reading the whole ring of 1000 episodes
	// (740 kB of JSON) at once added 70-86 MiB (peaks 130-150 MiB) while
	// each answer was encoded per request; written from each episode's
	// JSON, encoded once as it entered the ring, through a 32 KiB buffer
	// per answer, they add little (docs/benchmarks.md has the runs).
	loadMaxRSS = 96 << 20
)

// The environment of the re-executed test binary that sends the storm.
const (
	loadRoleEnv     = "SIGSCOPE_LOAD_ROLE" // "sender"
	loadDurationEnv = "SIGSCOPE_LOAD_SENDER_DURATION"
)

// loadDuration is how long the storm and the clients run:
// SIGSCOPE_LOAD_SECONDS, default 60 (what CI runs).
func loadDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("SIGSCOPE_LOAD_SECONDS")
	if v == "" {
		return 60 * time.Second
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 {
		t.Fatalf("SIGSCOPE_LOAD_SECONDS=%q: want a positive number of seconds", v)
	}
	return time.Duration(n * float64(time.Second))
}

// `sigscope serve` under a signal storm, with 50 clients reading /metrics,
// /api/v1/episodes and /api/v1/info over loopback for the whole storm: no
// request fails and every body is what it should be; once the reader has
// drained the ring, the kills sent equal the signals counted plus the
// events the kernel dropped or missed, exactly; the agent's peak RSS stays
// under loadMaxRSS. Prints per-endpoint latency percentiles and peak RSS.
func TestLoad(t *testing.T) {
	testutil.RequirePrivileged(t)
	d := loadDuration(t)
	port, agentErr := startServe(t, "--signals", loadSignal.String())
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	agentPID := servePID(t, port)

	// A full ring of episodes, so that /api/v1/episodes answers its
	// largest page: namespaces whose init exits (the only episodes an agent
	// tracing only loadSignal can see are PID 1 exits).
	ns := manyNamespaces(t, 1000, 0)
	if err := ns.Wait(); err != nil {
		t.Fatalf("namespaces: %v", err)
	}
	info := waitEpisodes(t, base, 1000)
	t.Logf("load: episodes kept before the storm: %d of %d", info.Episodes.Kept, info.Episodes.Capacity)
	rss0 := procStatusKB(t, agentPID, "VmRSS")
	fams, err := scrapeMetrics(http.DefaultClient, base)
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := sumMetric(fams, "process_cpu_seconds_total", nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := startLoadClients(ctx, base, loadClients)
	var sent uint64
	var elapsed time.Duration
	sent, elapsed, err = runLoadSender(d)
	cancel()
	results := clients.wait()
	if err != nil {
		t.Fatalf("sender: %v", err)
	}

	// Let the reader drain: every event written has been counted once
	// sigscope_signals_total for the signal equals the generate events
	// emitted (the agent traces nothing else).
	var read, emitted, dropped, missed, cpu float64
	deadline := time.Now().Add(testutil.Bound)
	for {
		fams, err := scrapeMetrics(http.DefaultClient, base)
		if err != nil {
			t.Fatal(err)
		}
		read = sumMetric(fams, "sigscope_signals_total", map[string]string{"signal": loadSignal.String()})
		emitted = sumMetric(fams, "sigscope_events_total", map[string]string{"event": "generate"})
		dropped = sumMetric(fams, "sigscope_events_dropped_total", map[string]string{"event": "generate"})
		missed = sumMetric(fams, "sigscope_events_missed_total", nil)
		cpu = sumMetric(fams, "process_cpu_seconds_total", nil) - cpu0
		if other := sumMetric(fams, "sigscope_signals_total", nil) - read; other != 0 {
			t.Errorf("sigscope_signals_total counts %v signals other than %v: the agent traces only that one", other, loadSignal)
		}
		if ignored := sumMetric(fams, "sigscope_signals_total", map[string]string{"signal": loadSignal.String(), "result": "ignored"}); ignored != read {
			t.Errorf("%v of %v signals are not ignored: the target ignores %v", read-ignored, read, loadSignal)
		}
		if read == emitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader never caught up: %v generate events emitted, %v counted", emitted, read)
		}
		time.Sleep(200 * time.Millisecond)
	}
	hwm := procStatusKB(t, agentPID, "VmHWM")

	t.Logf("load: duration=%v clients=%d sent=%d rate=%.0f/s read=%.0f dropped=%.0f missed=%.0f agent_cpu=%.2f",
		elapsed.Round(time.Millisecond), loadClients, sent, float64(sent)/elapsed.Seconds(), read, dropped, missed, cpu/elapsed.Seconds())
	var failed int
	for _, ep := range loadEndpoints {
		r := results[ep]
		failed += len(r.errs)
		p50, p99, pmax := percentiles(r.latencies)
		t.Logf("load: endpoint=%s requests=%d failed=%d p50=%s p99=%s max=%s", ep, len(r.latencies), len(r.errs),
			ms(p50), ms(p99), ms(pmax))
		for i, err := range r.errs {
			if i == 5 {
				t.Errorf("%s: %d more failures", ep, len(r.errs)-5)
				break
			}
			t.Errorf("%s: %v", ep, err)
		}
		if len(r.latencies) == 0 {
			t.Errorf("%s: no request completed", ep)
		}
	}
	t.Logf("load: agent rss_before=%.1fMiB peak_rss=%.1fMiB (VmHWM) bound=%dMiB", float64(rss0)/1024, float64(hwm)/1024, loadMaxRSS>>20)

	// The books: every kill the sender made reached signal_generate (the
	// target ignores the signal; the tracepoint fires for ignored signals
	// too) and was written and counted, dropped (ring full) or missed
	// (recursion protection, counted for every program and signal).
	if got := uint64(read + dropped); got > sent || uint64(read+dropped+missed) < sent {
		t.Errorf("books do not balance: sent %d, counted %.0f + dropped %.0f + missed %.0f = %.0f\nagent:\n%s",
			sent, read, dropped, missed, read+dropped+missed, tail(agentErr.String()))
	} else if missed == 0 && got != sent {
		t.Errorf("books do not balance: sent %d, counted %.0f + dropped %.0f", sent, read, dropped)
	}
	if failed > 0 {
		t.Errorf("%d requests failed", failed)
	}
	if hwm*1024 > loadMaxRSS {
		t.Errorf("the agent's peak RSS %d KiB is over the %d MiB bound", hwm, loadMaxRSS>>20)
	}
}

// loadEndpoints are what the clients ask, in turn: scrapes as often as
// episode reads, the whole ring and a page of it, and the agent's info.
var loadEndpoints = []string{"/metrics", "/api/v1/episodes", "/api/v1/episodes?limit=50", "/api/v1/info"}

type loadResult struct {
	latencies []time.Duration
	errs      []error
}

type loadClientSet struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	results map[string]*loadResult
}

// startLoadClients starts n clients that ask the endpoints in turn, each
// starting at another, until ctx ends. A request in flight when ctx ends is
// not counted.
func startLoadClients(ctx context.Context, base string, n int) *loadClientSet {
	cs := &loadClientSet{results: map[string]*loadResult{}}
	for _, ep := range loadEndpoints {
		cs.results[ep] = &loadResult{}
	}
	client := &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n},
	}
	for i := range n {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for k := i; ctx.Err() == nil; k++ {
				ep := loadEndpoints[k%len(loadEndpoints)]
				start := time.Now()
				body, err := get(ctx, client, base+ep)
				took := time.Since(start)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					err = checkLoadBody(ep, body)
				}
				cs.mu.Lock()
				r := cs.results[ep]
				if err != nil {
					r.errs = append(r.errs, err)
				} else {
					r.latencies = append(r.latencies, took)
				}
				cs.mu.Unlock()
			}
		}()
	}
	return cs
}

func (cs *loadClientSet) wait() map[string]*loadResult {
	cs.wg.Wait()
	return cs.results
}

// get reads url's body; anything but a 200 is an error.
func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
	}
	return body, nil
}

// checkLoadBody checks an answer is what its endpoint promises.
func checkLoadBody(ep string, body []byte) error {
	switch {
	case ep == "/metrics":
		fams, err := parseMetrics(body)
		if err != nil {
			return err
		}
		for _, name := range []string{"sigscope_events_total", "sigscope_events_dropped_total", "sigscope_build_info", "sigscope_cache_entries"} {
			if fams[name] == nil {
				return fmt.Errorf("/metrics has no %s", name)
			}
		}
	case strings.HasPrefix(ep, "/api/v1/episodes"):
		var eps []struct {
			ID      uint64 `json:"id"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(body, &eps); err != nil {
			return fmt.Errorf("%s: %v", ep, err)
		}
		if strings.Contains(ep, "limit=50") && len(eps) > 50 {
			return fmt.Errorf("%s: %d episodes", ep, len(eps))
		}
		for i := range eps {
			if eps[i].ID == 0 || eps[i].Outcome == "" || i > 0 && eps[i].ID <= eps[i-1].ID {
				return fmt.Errorf("%s: episode %d of %d: id %d (previous %d), outcome %q", ep, i, len(eps), eps[i].ID, eps[max(i-1, 0)].ID, eps[i].Outcome)
			}
		}
	case ep == "/api/v1/info":
		var in apiv1.Info
		if err := json.Unmarshal(body, &in); err != nil {
			return fmt.Errorf("%s: %v", ep, err)
		}
		if in.APIVersion != apiv1.Version || !in.Ready || in.Episodes.Kept > in.Episodes.Capacity {
			return fmt.Errorf("%s: %s", ep, body)
		}
	}
	return nil
}

// percentiles are the nearest-rank 50th and 99th percentiles and the
// maximum.
func percentiles(d []time.Duration) (p50, p99, pmax time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p float64) time.Duration { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return rank(0.50), rank(0.99), s[len(s)-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// servePID is the pid of the `sigscope serve` this test started on port.
func servePID(t *testing.T, port int) int {
	t.Helper()
	want := fmt.Sprintf("127.0.0.1:%d", port)
	for _, pid := range testutil.Children(t, os.Getpid()) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmdline), "\x00")
		if slices.Contains(args, "serve") && slices.Contains(args, want) {
			return pid
		}
	}
	t.Fatalf("no sigscope serve on %s among this test's children", want)
	return 0
}

// procStatusKB reads a "kB" field of /proc/PID/status (VmRSS, VmHWM).
func procStatusKB(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("pid %d: %q: %v", pid, line, err)
			}
			return n
		}
	}
	t.Fatalf("pid %d: no %s in /proc/PID/status", pid, field)
	return 0
}

// waitEpisodes waits until the agent has completed at least n episodes
// since it started, and returns its info.
func waitEpisodes(t *testing.T, base string, n uint64) apiv1.Info {
	t.Helper()
	var in apiv1.Info
	if !testutil.Poll(100*time.Millisecond, func() bool {
		body, err := get(context.Background(), http.DefaultClient, base+"/api/v1/info")
		if err != nil {
			t.Fatal(err)
		}
		in = apiv1.Info{}
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("/api/v1/info: %v: %s", err, body)
		}
		return in.Episodes.LastID >= n
	}) {
		t.Fatalf("the agent completed %d episodes, want %d", in.Episodes.LastID, n)
	}
	return in
}

// runLoadSender re-executes the test binary as the storm's sender
// (TestLoadSenderProcess) for d and returns how many kills it made.
func runLoadSender(d time.Duration) (sent uint64, elapsed time.Duration, err error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadSenderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), loadRoleEnv+"=sender", loadDurationEnv+"="+d.String(),
		// One P and no preemption signals: the process is one thread in
		// a loop of kill(2).
		"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		var ns int64
		if _, err := fmt.Sscanf(line, "load-sender: sent %d in %d ns", &sent, &ns); err == nil {
			return sent, time.Duration(ns), nil
		}
	}
	return 0, 0, fmt.Errorf("the sender printed no count:\n%s%s", stdout.Bytes(), stderr.Bytes())
}

// TestLoadSenderProcess is the storm's sender, run by TestLoad in a
// process of its own so that it does not share the clients' scheduler: it
// ignores loadSignal, starts a target that inherits that (SIG_IGN survives
// fork and exec), and sends it loadSignal with kill(2) in a tight loop on
// one OS thread for the duration. Every kill ends at signal_generate with
// the result "ignored": kernel work only, nothing queued.
func TestLoadSenderProcess(t *testing.T) {
	if os.Getenv(loadRoleEnv) != "sender" {
		t.Skip("the sender process of TestLoad; it runs it")
	}
	runtime.LockOSThread()
	d, err := time.ParseDuration(os.Getenv(loadDurationEnv))
	if err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.Signal(loadSignal))
	target := exec.Command("sleep", "3600")
	target.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Process.Kill(); _ = target.Wait() }()
	pid := target.Process.Pid
	testutil.WaitSigMask(t, pid, "SigIgn", syscall.Signal(loadSignal))
	// RawSyscall: kill(2) of a target that ignores the signal never
	// blocks, so the scheduler hooks of Syscall are not needed.
	const batch = 256
	var sent uint64
	start := time.Now()
	for deadline := start.Add(d); time.Now().Before(deadline); {
		for range batch {
			if _, _, e := unix.RawSyscall(unix.SYS_KILL, uintptr(pid), uintptr(loadSignal), 0); e != 0 {
				t.Fatalf("kill(%d) after %d: %v", pid, sent, e)
			}
			sent++
		}
	}
	fmt.Printf("load-sender: sent %d in %d ns\n", sent, time.Since(start).Nanoseconds())
}
