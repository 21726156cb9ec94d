package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dropsResult is one long storm through the real JSON path at the default
// ring: does the reader lose anything when it falls behind?
type dropsResult struct {
	storm storm
	read  uint64
	lost  uint64
	cpu   time.Duration // the trace process's CPU from the storm's start to its exit
}

func runDrops(ctx context.Context, env stormEnv, d time.Duration) (dropsResult, error) {
	o := env.o
	var r dropsResult
	a, err := startTraceJSON(ctx, o.bin, o.ringSize)
	if err != nil {
		return r, err
	}
	var p phase
	if err := sleepCtx(ctx, o.childSettle); err != nil {
		_, _ = a.stop(&p)
		return r, err
	}
	before, err := a.cpu()
	if err != nil {
		_, _ = a.stop(&p)
		return r, err
	}
	s, serr := runSender(ctx, env.target, d, o.senderCPU)
	after, aerr := a.stop(&p)
	r.storm, r.read, r.lost, r.cpu = s, p.read, p.dropped, after-before
	return r, errors.Join(serr, aerr)
}

// serveChild is `sigscope serve` on a free loopback port.
type serveChild struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
	stderr bytes.Buffer  // read only after exited
	base   string        // http://127.0.0.1:PORT
	client *http.Client
}

// startServe starts the agent as deployed (default signals, ring and
// runtimes; a runtime that is not there is only warned about) plus extra,
// and returns once /readyz answers 200: its programs are attached.
func startServe(ctx context.Context, bin string, extra []string) (*serveChild, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &serveChild{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--web.listen-address", addr}, extra...)...)
	s.cmd.Stderr = &s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := s.client.Get(s.base + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("sigscope serve exited before it was ready: %s", strings.TrimSpace(s.stderr.String()))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("sigscope serve not ready after 60 s: %s", strings.TrimSpace(s.stderr.String()))
		}
	}
}

func (s *serveChild) pid() int { return s.cmd.Process.Pid }

// stop ends the agent as its DaemonSet would (SIGTERM), then by force.
func (s *serveChild) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// freePort asks the kernel for a loopback port nothing listens on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// idleResult is what an agent with nothing to do costs.
type idleResult struct {
	dur      time.Duration
	cpu      time.Duration
	mem      procMem
	binBytes int64
}

func (r idleResult) cpuPct() float64 { return 100 * r.cpu.Seconds() / r.dur.Seconds() }

// measureIdle watches the agent for d without asking it anything.
func measureIdle(ctx context.Context, s *serveChild, d time.Duration, bin string) (idleResult, error) {
	var r idleResult
	st, err := os.Stat(bin)
	if err != nil {
		return r, err
	}
	r.binBytes = st.Size()
	cpu0, err := procCPU(s.pid())
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, d); err != nil {
		return r, err
	}
	cpu1, err := procCPU(s.pid())
	if err != nil {
		return r, err
	}
	r.dur, r.cpu = time.Since(t0), cpu1-cpu0
	r.mem, err = readProcMem(s.pid())
	return r, err
}

// procMem is a process's memory and threads from /proc.
type procMem struct {
	rss, hwm   int64 // VmRSS, VmHWM (status)
	anon, file int64 // smaps_rollup: Anonymous, and Rss minus it (file pages, shared memory, the ring's pages)
	threads    int
}

func readProcMem(pid int) (procMem, error) {
	var m procMem
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	return parseProcMem(string(status), string(rollup))
}

// parseProcMem reads /proc/PID/status and /proc/PID/smaps_rollup.
func parseProcMem(status, rollup string) (procMem, error) {
	var m procMem
	kb := func(text, key string) (int64, bool) {
		for line := range strings.Lines(text) {
			if v, ok := strings.CutPrefix(line, key+":"); ok {
				n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return n * 1024, err == nil
			}
		}
		return 0, false
	}
	var ok [5]bool
	m.rss, ok[0] = kb(status, "VmRSS")
	m.hwm, ok[1] = kb(status, "VmHWM")
	rollupRSS, ok2 := kb(rollup, "Rss")
	m.anon, ok[3] = kb(rollup, "Anonymous")
	m.file = rollupRSS - m.anon
	ok[2] = ok2
	for line := range strings.Lines(status) {
		if v, found := strings.CutPrefix(line, "Threads:"); found {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			m.threads, ok[4] = n, err == nil
		}
	}
	for i, k := range []string{"VmRSS", "VmHWM", "Rss", "Anonymous", "Threads"} {
		if !ok[i] {
			return m, fmt.Errorf("no %s in /proc/PID/status or smaps_rollup", k)
		}
	}
	return m, nil
}

// episodeLatency stops n pid namespaces, one at a time, and times each
// from the SIGKILL of its init to its episode in /api/v1/episodes, polled
// every poll. A sample that never shows is counted in missing and taken as
// the timeout, so that it cannot flatter the percentiles.
func episodeLatency(ctx context.Context, s *serveChild, n int, gap, poll, timeout time.Duration) (samples []time.Duration, missing int, err error) {
	for range n {
		if err := sleepCtx(ctx, gap); err != nil {
			return samples, missing, err
		}
		// `sleep` as PID 1 of a new pid namespace: the shape of a container's
		// init, with no runtime around it.
		cmd := exec.Command("sleep", "3600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return samples, missing, fmt.Errorf("starting a pid namespace: %w", err)
		}
		pid := cmd.Process.Pid
		if err := waitComm(ctx, pid, "sleep", 5*time.Second); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return samples, missing, err
		}
		t0 := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		d, found, err := pollEpisode(ctx, s, uint32(pid), t0, poll, timeout)
		if err != nil {
			return samples, missing, err
		}
		if !found {
			missing++
		}
		samples = append(samples, d)
	}
	return samples, missing, nil
}

// pollEpisode asks for the newest episodes until one has pid as its main
// process and began after start (pids are reused).
func pollEpisode(ctx context.Context, s *serveChild, pid uint32, start time.Time, poll, timeout time.Duration) (time.Duration, bool, error) {
	deadline := start.Add(timeout)
	for {
		eps, err := s.episodes()
		if err != nil {
			return 0, false, err
		}
		now := time.Now()
		for _, ep := range eps {
			if ep.Main.PID == pid && ep.Main.NsPID == 1 && !ep.Start.Before(start.Add(-time.Minute)) {
				return now.Sub(start), true, nil
			}
		}
		if now.After(deadline) {
			return timeout, false, nil
		}
		if err := sleepCtx(ctx, poll); err != nil {
			return 0, false, err
		}
	}
}

// episodeRef is what the bench reads of an episode (docs/timelines.md).
type episodeRef struct {
	Main struct {
		PID   uint32 `json:"pid"`
		NsPID uint32 `json:"ns_pid"`
	} `json:"main"`
	Start time.Time `json:"start"`
}

func (s *serveChild) episodes() ([]episodeRef, error) {
	resp, err := s.client.Get(s.base + "/api/v1/episodes?limit=20")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/api/v1/episodes: %s", resp.Status)
	}
	var eps []episodeRef
	return eps, json.NewDecoder(resp.Body).Decode(&eps)
}

// waitComm waits until a process has exec'd the named program.
func waitComm(ctx context.Context, pid int, comm string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d is not %s after %v", pid, comm, timeout)
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

// traceLatency starts `sigscope trace -o json` on one signal to the target
// alone, so that it is idle between samples, and times n single signals,
// gap apart, from kill(2) to the line on its stdout (a pipe).
func traceLatency(ctx context.Context, bin string, target, n int, gap time.Duration) ([]time.Duration, error) {
	cmd := exec.Command(bin, "trace", "-o", "json", "--signals", "USR1", "--pid", strconv.Itoa(target))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s trace: %w", bin, err)
	}
	lines := make(chan time.Time, 1024)
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
			lines <- time.Now()
		}
	}()
	stop := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		for range lines { // until the pipe closes
		}
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("sigscope trace: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	kill := func() error { return unix.Kill(target, unix.SIGUSR1) }

	// Attached once a signal comes out; then let it go idle.
	ready := false
	for deadline := time.Now().Add(60 * time.Second); !ready; {
		if err := kill(); err != nil {
			return nil, errors.Join(err, stop())
		}
		select {
		case _, ok := <-lines:
			if !ok {
				return nil, errors.Join(errors.New("sigscope trace closed its output"), stop())
			}
			ready = true
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), stop())
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(errors.New("sigscope trace printed nothing in 60 s"), stop())
		}
	}
	var samples []time.Duration
	for range n {
		// Let every line of the warm-up or the previous sample arrive.
		if err := sleepCtx(ctx, gap); err != nil {
			return samples, errors.Join(err, stop())
		}
	drain:
		for {
			select {
			case <-lines:
			default:
				break drain
			}
		}
		t0 := time.Now()
		if err := kill(); err != nil {
			return samples, errors.Join(err, stop())
		}
		select {
		case at, ok := <-lines:
			if !ok {
				return samples, errors.Join(errors.New("sigscope trace closed its output"), stop())
			}
			samples = append(samples, at.Sub(t0))
		case <-time.After(10 * time.Second):
			return samples, errors.Join(errors.New("no line 10 s after a signal"), stop())
		case <-ctx.Done():
			return samples, errors.Join(ctx.Err(), stop())
		}
	}
	return samples, stop()
}
