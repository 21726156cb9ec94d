package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/timeline"
	"github.com/sigscope/sigscope/tracer"
)

// Predictions, in the words of the stop timelines' outcomes where one fits.
const (
	Graceful      = string(timeline.OutcomeGraceful)      // the stop signal is handled, waited for, or kills a non-init
	IgnoredByInit = string(timeline.OutcomeIgnoredByInit) // a namespace init will drop it (or keep it blocked): SIGKILL after the timeout
	Ignored       = "ignored"                             // a process that is no init drops it (SIG_IGN, default-ignored) or keeps it blocked
	Killed        = string(timeline.OutcomeKilled)        // the stop signal is SIGKILL itself
	Unknown       = "unknown"                             // the process could not be read, or is already exiting
)

// Sources of a prediction's facts.
const (
	SourceKernel = "kernel" // the BPF task iterator: the kernel's own masks, real_blocked included
	SourceProc   = "proc"   // /proc/PID/status: no real_blocked, so a sigtimedwait() is not seen
)

// Result is one container's audit line (`sigscope audit -o json`).
type Result struct {
	Container  container.Summary `json:"container"`
	PID1       PID1              `json:"pid1"`
	StopSignal string            `json:"stop_signal"`
	Source     string            `json:"source,omitempty"` // SourceKernel or SourceProc; empty when nothing was read
	NSInit     bool              `json:"ns_init"`          // the main process is the init of its pid namespace
	Catches    bool              `json:"catches"`          // a handler for the stop signal
	Ignores    bool              `json:"ignores"`          // SIG_IGN for it
	Blocks     bool              `json:"blocks"`           // blocked (not counting a sigtimedwait() in progress)
	Signalfd   bool              `json:"signalfd"`         // a signalfd of the process watches it
	Fate       string            `json:"fate"`             // tracer.Fate: what the kernel will do with it
	Prediction string            `json:"prediction"`
	Hint       string            `json:"hint,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// PID1 is the container's main process as the host sees it: the process the
// runtime sends the stop signal to. It is the namespace init unless the
// container shares another's pid namespace (NSInit false then); the JSON
// name stays "pid1" for compatibility.
type PID1 struct {
	PID     int      `json:"pid"`
	NSPID   int      `json:"ns_pid,omitempty"` // its pid in its own pid namespace
	Cmdline []string `json:"cmdline"`
}

// Lister is what Run needs from a container.Resolver.
type Lister interface {
	ListRunning(ctx context.Context) ([]container.Running, error)
}

// Options say where the audit reads processes.
type Options struct {
	ProcRoot string // default /proc
	// Source forces one source: SourceProc never loads the iterator,
	// SourceKernel never falls back. "" tries the kernel, then /proc.
	Source string
	// ReadTaskStates reads the kernel's state; nil means
	// tracer.ReadTaskStates. Tests replace it.
	ReadTaskStates func(pids []int) (map[int]tracer.TaskSnapshot, error)
	Logger         *slog.Logger // nil: slog.Default()
}

// Run audits every running container the reachable runtimes report, from
// the kernel when the task iterator loads, else from procRoot.
func Run(ctx context.Context, l Lister, procRoot string) ([]Result, error) {
	return RunWith(ctx, l, Options{ProcRoot: procRoot})
}

// fallbackLogged makes the first fallback to /proc a warning and the next
// ones (the agent audits every 30 s) debug lines.
var fallbackLogged atomic.Bool

// RunWith is Run with options.
func RunWith(ctx context.Context, l Lister, opts Options) ([]Result, error) {
	if opts.ReadTaskStates == nil {
		opts.ReadTaskStates = tracer.ReadTaskStates
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	running, err := l.ListRunning(ctx)
	if err != nil && len(running) == 0 {
		return nil, err
	}
	var (
		snaps     map[int]tracer.TaskSnapshot
		kerr      error
		useKernel = opts.Source != SourceProc
	)
	if useKernel {
		pids := make([]int, 0, len(running))
		for _, r := range running {
			pids = append(pids, r.PID)
		}
		if snaps, kerr = opts.ReadTaskStates(pids); kerr != nil {
			lvl := slog.LevelDebug
			if opts.Source != SourceKernel && fallbackLogged.CompareAndSwap(false, true) {
				lvl = slog.LevelWarn
			}
			opts.Logger.Log(ctx, lvl, "audit: the kernel's task state cannot be read; predicting from /proc, which does not show signals waited for with sigtimedwait (tini, docker-init)", "error", kerr)
		}
	}
	out := make([]Result, 0, len(running))
	for _, r := range running {
		res := Result{Container: r.Info.Summary(), PID1: PID1{PID: r.PID}, StopSignal: r.Info.StopSignalOrDefault().String()}
		switch s, ok := snaps[r.PID]; {
		case r.PID <= 0:
			res.Prediction, res.Fate, res.Error = Unknown, tracer.FateUnknown.String(), "the runtime did not report the container's main process"
		case ok:
			res.fromKernel(r, &s, opts.ProcRoot)
		case opts.Source == SourceKernel && kerr != nil:
			res.Prediction, res.Fate, res.Error = Unknown, tracer.FateUnknown.String(), kerr.Error()
		default:
			// Not seen by the iterator (it failed, or the process is gone).
			res.fromProc(r, opts.ProcRoot)
		}
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Container, out[j].Container
		if a.Namespace+a.Pod+a.Name != b.Namespace+b.Pod+b.Name {
			return a.Namespace+a.Pod+a.Name < b.Namespace+b.Pod+b.Name
		}
		return a.ID < b.ID
	})
	return out, err
}

func (res *Result) fromKernel(r container.Running, s *tracer.TaskSnapshot, procRoot string) {
	sig := r.Info.StopSignalOrDefault()
	// The command line is only for the hint and the table: a process that
	// is gone by now still has its prediction.
	cmdline, _ := container.Cmdline(procRoot, r.PID)
	res.finish(r, procRoot, SourceKernel, Facts{
		Signal: sig, State: s.State(sig), Cmdline: cmdline, Comm: s.Comm.String(),
	}, s.NSPID)
}

func (res *Result) fromProc(r container.Running, procRoot string) {
	sig := r.Info.StopSignalOrDefault()
	p, err := container.ReadProcSignals(procRoot, r.PID)
	if err != nil {
		res.Prediction, res.Fate, res.Error = Unknown, tracer.FateUnknown.String(), err.Error()
		return
	}
	res.finish(r, procRoot, SourceProc, Facts{
		Signal: sig, State: p.State(sig), Cmdline: p.Cmdline, Comm: p.Comm,
	}, p.NSPID)
}

func (res *Result) finish(r container.Running, procRoot, source string, f Facts, nsPID int) {
	var fdErr error
	if f.State.Blocked {
		// Only a blocked signal can be read from a signalfd.
		var set tracer.SignalSet
		set, fdErr = container.SignalfdMask(procRoot, r.PID)
		f.Signalfd = set.Has(f.Signal)
	}
	res.Source = source
	res.StopSignal = f.Signal.String()
	res.PID1.NSPID = nsPID
	res.PID1.Cmdline = utf8All(f.Cmdline)
	res.NSInit = f.State.NSInit
	res.Catches = f.State.Handler == tracer.DispHandler
	res.Ignores = f.State.Handler == tracer.DispIgnore
	res.Blocks = f.State.Blocked
	res.Signalfd = f.Signalfd
	var fate tracer.Fate
	res.Prediction, fate, res.Hint = Predict(f)
	res.Fate = fate.String()
	if errors.Is(fdErr, fs.ErrPermission) && fate == tracer.FateBlocked && f.State.Handler == tracer.DispDefault {
		// Blocked with no handler: a signalfd decides between a graceful
		// stop and a SIGKILL after the timeout. Guessing "none" calls
		// catatonit a shell; say what could not be read instead.
		res.Prediction, res.Hint = Unknown, ""
		res.Error = fmt.Sprintf("cannot tell whether %s reads %s from a signalfd: %v", role(f.State), f.Signal, fdErr)
	}
}

// Facts are what a prediction is made from: the stop signal and the main
// process's state for it, as the kernel or /proc showed it.
type Facts struct {
	Signal   tracer.Signal
	State    tracer.TaskState // for Signal
	Signalfd bool             // a signalfd of the process watches Signal
	Cmdline  []string
	Comm     string
}

// Predict says what the runtime's stop signal will do. The kernel's part,
// the signal's fate, is tracer.PredictFate's (with force: the runtime sends
// from the host); this adds what the process does with a queued signal.
func Predict(f Facts) (prediction string, fate tracer.Fate, hint string) {
	sig, st := f.Signal, f.State
	fate = tracer.PredictFate(sig, st, true)
	name := processName(f)
	if sig == tracer.SIGKILL {
		return Killed, fate, fmt.Sprintf("The stop signal is SIGKILL: %s gets no chance to shut down. Use SIGTERM (or the signal the app handles) as the stop signal.", name)
	}
	switch fate {
	case tracer.FateDroppedExiting:
		return Unknown, fate, fmt.Sprintf("%s is already exiting: the kernel drops every signal sent to it now.", name)
	case tracer.FateHandler:
		return Graceful, fate, ""
	case tracer.FateSigwait:
		if fwd := forwarder(f); fwd != "" {
			return Graceful, fate, fmt.Sprintf("%s is %s: it waits for %s with sigtimedwait and forwards it.", role(st), fwd, sig)
		}
		return Graceful, fate, fmt.Sprintf("%s waits for %s with sigtimedwait or sigwaitinfo: the kernel queues it for the wait.", name, sig)
	case tracer.FateBlocked:
		switch {
		case st.Handler == tracer.DispHandler:
			return Graceful, fate, fmt.Sprintf("%s blocks %s right now; it is delivered when %s unblocks it.", name, sig, role(st))
		case f.Signalfd && st.Handler == tracer.DispDefault:
			if fwd := forwarder(f); fwd != "" {
				return Graceful, fate, fmt.Sprintf("%s is %s: it reads %s from a signalfd and forwards it.", role(st), fwd, sig)
			}
			return Graceful, fate, fmt.Sprintf("%s blocks %s and reads it from a signalfd.", name, sig)
		case st.Handler == tracer.DispIgnore:
			return ignoredSigIgn(name, sig, st, fate)
		}
		if st.NSInit {
			return IgnoredByInit, fate, fmt.Sprintf("%s blocks %s and has no handler and no signalfd for it: it stays pending, and a namespace init discards it even when unblocked, so the stop will wait the whole timeout and end in SIGKILL (exit 137). %s (docker run --init).", name, sig, timeline.FixInit)
		}
		return Ignored, fate, fmt.Sprintf("%s blocks %s and has no handler and no signalfd for it: it stays pending until unblocked, so the stop may wait the whole timeout and end in SIGKILL (exit 137).", name, sig)
	case tracer.FateDefault:
		if fate.Kills(sig) {
			return Graceful, fate, fmt.Sprintf("%s is not a namespace init and has no %s handler: the default action ends it at once, with no cleanup.", name, sig)
		}
		p := Ignored
		if st.NSInit {
			p = IgnoredByInit
		}
		return p, fate, fmt.Sprintf("%s is stopped by %s, not ended: the stop will wait the whole timeout and end in SIGKILL (exit 137). Use SIGTERM as the stop signal.", name, sig)
	case tracer.FateDroppedInit:
		shell := ""
		if len(f.Cmdline) > 0 && isShell(f.Cmdline[0]) {
			shell = " It is a shell: shell-form ENTRYPOINT/CMD (`/bin/sh -c app`) makes the shell PID 1 and it does not forward signals."
		}
		return IgnoredByInit, fate, fmt.Sprintf("%s has no %s handler: the kernel drops signals to a namespace init that has none, so the stop will wait the whole timeout and end in SIGKILL (exit 137).%s %s (docker run --init).", name, sig, shell, timeline.FixInit)
	case tracer.FateDroppedSigIgn:
		return ignoredSigIgn(name, sig, st, fate)
	case tracer.FateDroppedDefault:
		p := Ignored
		if st.NSInit {
			p = IgnoredByInit
		}
		return p, fate, fmt.Sprintf("%s has no %s handler and the default action of %s is to ignore it: the stop will wait the whole timeout and end in SIGKILL (exit 137). Use a stop signal the process handles.", name, sig, sig)
	}
	return Unknown, fate, ""
}

func ignoredSigIgn(name string, sig tracer.Signal, st tracer.TaskState, fate tracer.Fate) (string, tracer.Fate, string) {
	p := Ignored
	if st.NSInit {
		p = IgnoredByInit
	}
	return p, fate, fmt.Sprintf("%s ignores %s (SIG_IGN): the stop will wait the whole timeout and end in SIGKILL (exit 137). Stop ignoring it, or use a stop signal %s handles.", name, sig, role(st))
}

// role is how hints call the main process.
func role(st tracer.TaskState) string {
	if st.NSInit {
		return "PID 1"
	}
	return "the main process"
}

// processName is role with the command, for the start of a sentence.
func processName(f Facts) string {
	name := "PID 1"
	if !f.State.NSInit {
		name = "The main process"
	}
	switch {
	case len(f.Cmdline) > 0:
		return fmt.Sprintf("%s (%s)", name, filepath.Base(f.Cmdline[0]))
	case f.Comm != "":
		return fmt.Sprintf("%s (%s)", name, f.Comm)
	}
	return name
}

// forwarder names a known init that waits for signals and forwards them to
// its child, from argv[0] or the command name.
func forwarder(f Facts) string {
	names := []string{f.Comm}
	if len(f.Cmdline) > 0 {
		names = append([]string{filepath.Base(f.Cmdline[0])}, names...)
	}
	for _, n := range names {
		switch n {
		case "tini", "tini-static", "docker-init", "dumb-init", "catatonit", "s6-svscan":
			return n
		}
	}
	return ""
}

func isShell(arg0 string) bool {
	switch filepath.Base(strings.TrimSpace(arg0)) {
	case "sh", "bash", "dash", "ash", "busybox", "zsh", "ksh":
		return true
	}
	return false
}

// utf8All makes command-line arguments valid UTF-8 for JSON: any process can
// put anything in its argv.
func utf8All(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = textsafe.UTF8(s)
	}
	return out
}
