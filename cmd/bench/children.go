package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// childAttach is (j) or (p): a tracer in another process, writing each
// signal to /dev/null. Its CPU time is the reader's cost.
type childAttach struct {
	cfg    config
	cmd    *exec.Cmd
	stderr bytes.Buffer
	null   *os.File
}

// startTraceJSON starts sigscope's real JSON path: `sigscope trace -o json`
// tracing the storm's signal, container resolution on as by default, stdout
// to /dev/null. It returns once its signal_generate program is attached.
func startTraceJSON(ctx context.Context, bin string, ringSize int) (*childAttach, error) {
	args := []string{"trace", "-o", "json", "--signals", "USR1", "--ring-size", strconv.Itoa(ringSize)}
	return startChild(ctx, jsonOut, bin, args, isSigscopeGenerate)
}

// bpftraceProgram is the peer: a bpftrace one-liner that prints the main
// fields of every signal_generate (sender pid and comm, signal, target pid
// and comm, si_code, result), as someone would to watch signals.
const bpftraceProgram = `tracepoint:signal:signal_generate { printf("%d %s sig=%d -> %d %s code=%d result=%d\n", pid, comm, args->sig, args->pid, args->comm, args->code, args->result); }`

// startBpftrace starts the peer with its output to /dev/null and returns
// once its program is attached.
func startBpftrace(ctx context.Context, path string) (*childAttach, error) {
	return startChild(ctx, bpftrace, path, []string{"-e", bpftraceProgram}, isTracepointProg)
}

func startChild(ctx context.Context, c config, bin string, args []string, match func(ebpf.ProgramType, string) bool) (*childAttach, error) {
	mark, err := lastProgramID()
	if err != nil {
		return nil, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	a := &childAttach{cfg: c, null: null}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = null, &a.stderr
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		null.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	// Notice an early exit (a zombie) while waiting for the attach; stop
	// waits for the process itself.
	exited, attached := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			if s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid)); err != nil || zombie(s) {
				return
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-attached:
				return
			}
		}
	}()
	err = waitAttached(ctx, mark, match, exited, 60*time.Second)
	close(attached)
	if err != nil {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
		null.Close()
		return nil, fmt.Errorf("%s %s: %w: %s", bin, args[0], err, strings.TrimSpace(a.stderr.String()))
	}
	return a, nil
}

// zombie says whether a /proc/PID/stat line is a process that has exited.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func (a *childAttach) cpu() (time.Duration, error) { return procCPU(a.cmd.Process.Pid) }

// stop interrupts the child as Ctrl-C would: sigscope drains its ring and
// prints its counters; bpftrace detaches. Its CPU time is then exact
// (rusage), and includes the drain.
func (a *childAttach) stop(p *phase) (time.Duration, error) {
	defer a.null.Close()
	_ = a.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		err = errors.Join(errors.New("did not exit 30 s after SIGINT"), <-done)
	}
	st := a.cmd.ProcessState
	end := st.UserTime() + st.SystemTime()
	if err != nil {
		return end, fmt.Errorf("%s: %w: %s", a.cfg, err, strings.TrimSpace(a.stderr.String()))
	}
	// bpftrace reports lost events on stdout, /dev/null here.
	if a.cfg == jsonOut {
		tot, ok := parseTraceTotals(a.stderr.String())
		if !ok {
			return end, fmt.Errorf("sigscope trace printed no counters: %q", a.stderr.String())
		}
		p.read, p.dropped = tot.read, tot.dropped
	}
	return end, nil
}

// traceTotals is the "total" part of sigscope trace's last stderr line.
type traceTotals struct{ seen, emitted, dropped, read uint64 }

var traceTotalsRE = regexp.MustCompile(`total seen=(\d+) emitted=(\d+) dropped=(\d+) read=(\d+)`)

func parseTraceTotals(stderr string) (traceTotals, bool) {
	m := traceTotalsRE.FindAllStringSubmatch(stderr, -1)
	if m == nil {
		return traceTotals{}, false
	}
	last := m[len(m)-1]
	var v [4]uint64
	for i := range v {
		v[i], _ = strconv.ParseUint(last[i+1], 10, 64)
	}
	return traceTotals{seen: v[0], emitted: v[1], dropped: v[2], read: v[3]}, true
}

// procCPU is a live process's user+sys time from /proc/PID/stat, all its
// threads, in clock ticks of 10 ms (USER_HZ is 100 on every Linux ABI).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

const userHZ = 100

// parseStatCPU reads utime and stime (fields 14 and 15) from a stat line;
// the command name, field 2, may hold spaces and parentheses, so fields
// are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no ')' in /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/PID/stat: %q", b)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / userHZ, nil
}

// lastProgramID is the newest BPF program's ID: programs loaded later have
// higher ones (the kernel allocates them cyclically from 1 to INT_MAX).
func lastProgramID() (ebpf.ProgramID, error) {
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return id, nil
		}
		if err != nil {
			return 0, fmt.Errorf("listing BPF programs: %w", err)
		}
		id = next
	}
}

func isSigscopeGenerate(_ ebpf.ProgramType, name string) bool { return name == genProgName }

// isTracepointProg matches bpftrace's program for a tracepoint probe.
func isTracepointProg(t ebpf.ProgramType, _ string) bool { return t == ebpf.TracePoint }

// waitAttached waits until a program loaded after mark that match accepts
// is attached: through a BPF link when it has one (sigscope's tp_btf
// programs), else, for programs attached the older way (bpftrace's
// tracepoint probes, through a perf event), loaded for a while: feature
// probes are unloaded at once, probes are attached right after loading.
func waitAttached(ctx context.Context, mark ebpf.ProgramID, match func(ebpf.ProgramType, string) bool, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	seen := map[ebpf.ProgramID]time.Time{}
	for {
		linked, err := linkedPrograms(mark)
		if err != nil {
			return err
		}
		for id := mark; ; {
			next, err := ebpf.ProgramGetNextID(id)
			if err != nil {
				break
			}
			id = next
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue
			}
			info, err := p.Info()
			p.Close()
			if err != nil || !match(info.Type, info.Name) {
				continue
			}
			if linked[id] {
				return nil
			}
			if first, ok := seen[id]; !ok {
				seen[id] = time.Now()
			} else if info.Type == ebpf.TracePoint && time.Since(first) > 500*time.Millisecond {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its program was not attached after %v", timeout)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-exited:
			return errors.New("exited before attaching")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// linkedPrograms are the programs after mark that a BPF link attaches.
func linkedPrograms(mark ebpf.ProgramID) (map[ebpf.ProgramID]bool, error) {
	ids := map[ebpf.ProgramID]bool{}
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err == nil && info.Program > mark {
			ids[info.Program] = true
		}
	}
	return ids, it.Err()
}
