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

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
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
	Container  identity.Summary `json:"container"`
	PID1       PID1             `json:"pid1"`
	StopSignal string           `json:"stop_signal"`
	Source     string           `json:"source,omitempty"` // SourceKernel or SourceProc; empty when nothing was read
	NSInit     bool             `json:"ns_init"`          // the main process is the init of its pid namespace
	Catches    bool             `json:"catches"`          // a handler for the stop signal
	Ignores    bool             `json:"ignores"`          // SIG_IGN for it
	Blocks     bool             `json:"blocks"`           // blocked (not counting a sigtimedwait() in progress)
	Signalfd   bool             `json:"signalfd"`         // a signalfd of the process watches it
	Fate       string           `json:"fate"`             // sigvocab.Fate: what the kernel will do with it
	Prediction string           `json:"prediction"`
	Hint       string           `json:"hint,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// PID1 is the container's main process as the host sees it: the process the
// runtime sends the stop signal to. It is the namespace init unless the
// container shares another's pid namespace (NSInit false then); the JSON
// name stays "pid1" for compatibility.
type PID1 struct {
	PID     int      `json:"pid"`
	NSPID   int      `json:"ns_pid,omitempty"` // its pid in its own pid namespace
	Cmdline []string `json:"cmdline"`
	// Runtime is its language runtime (langrt.Detect): what it does with
	// the stop signal beyond what its handler table shows, and the fix a
	// hint names. Empty when not recognised.
	Runtime langrt.Runtime `json:"runtime,omitempty"`
}

// Lister is what RunWith needs from a container.Resolver.
type Lister interface {
	ListRunning(ctx context.Context) ([]identity.Running, error)
}

// Options say where the audit reads processes.
type Options struct {
	ProcRoot string // default /proc
	// Source forces one source: SourceProc never loads the iterator,
	// SourceKernel never falls back. "" tries the kernel, then /proc.
	Source string
	// ReadTaskStates reads the kernel's state: tracer.ReadTaskStates, or
	// a test's. The package links no BPF loader (kubectl-sigscope imports
	// it for Result), so the caller that may load one passes it; nil
	// reads /proc only, and fails every container under SourceKernel.
	ReadTaskStates func(pids []int) (map[int]sigvocab.TaskSnapshot, error)
	Logger         *slog.Logger // nil: slog.Default()
	// FallbackWarned is the caller's memory, across audits, that a
	// fallback to /proc was already logged as a warning: the next ones are
	// debug lines (the agent audits every 30 s). nil: every fallback is a
	// warning (a one-shot audit has one).
	FallbackWarned *atomic.Bool
}

// errNoKernelReader is the kernel's error when Options has no reader.
var errNoKernelReader = errors.New("audit: no reader of the kernel's task state (Options.ReadTaskStates)")

// RunWith audits every running container the reachable runtimes report,
// from the kernel when opts.ReadTaskStates can read it, else from /proc.
func RunWith(ctx context.Context, l Lister, opts Options) ([]Result, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	running, err := l.ListRunning(ctx)
	if err != nil && len(running) == 0 {
		return nil, err
	}
	var (
		snaps     map[int]sigvocab.TaskSnapshot
		kerr      error
		useKernel = opts.Source != SourceProc && opts.ReadTaskStates != nil
	)
	if opts.Source == SourceKernel && opts.ReadTaskStates == nil {
		kerr = errNoKernelReader
	}
	if useKernel {
		pids := make([]int, 0, len(running))
		for _, r := range running {
			pids = append(pids, r.PID)
		}
		if snaps, kerr = opts.ReadTaskStates(pids); kerr != nil {
			lvl := slog.LevelDebug
			if opts.Source != SourceKernel && (opts.FallbackWarned == nil || opts.FallbackWarned.CompareAndSwap(false, true)) {
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
			res.Prediction, res.Fate, res.Error = Unknown, sigvocab.FateUnknown.String(), "the runtime did not report the container's main process"
		case ok:
			res.fromKernel(r, &s, opts.ProcRoot)
		case opts.Source == SourceKernel && kerr != nil:
			res.Prediction, res.Fate, res.Error = Unknown, sigvocab.FateUnknown.String(), kerr.Error()
		default:
			// Not seen by the iterator (it failed, or the process is gone).
			res.fromProc(r, opts.ProcRoot)
		}
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Container.Compare(out[j].Container.Identity) < 0
	})
	return out, err
}

func (res *Result) fromKernel(r identity.Running, s *sigvocab.TaskSnapshot, procRoot string) {
	sig := r.Info.StopSignalOrDefault()
	// The command line is only for the hint and the table: a process that
	// is gone by now still has its prediction.
	cmdline, _ := procsig.Cmdline(procRoot, r.PID)
	comm := s.Comm.String()
	res.finish(r, procRoot, SourceKernel, Facts{
		Signal: sig, State: s.State(sig), Cmdline: cmdline, Comm: comm, Runtime: runtimeOf(r, procRoot, comm),
	}, s.NSPID)
}

func (res *Result) fromProc(r identity.Running, procRoot string) {
	sig := r.Info.StopSignalOrDefault()
	p, err := procsig.ReadProcSignals(procRoot, r.PID)
	if err != nil {
		res.Prediction, res.Fate, res.Error = Unknown, sigvocab.FateUnknown.String(), err.Error()
		return
	}
	res.finish(r, procRoot, SourceProc, Facts{
		Signal: sig, State: p.State(sig), Cmdline: p.Cmdline, Comm: p.Comm, Runtime: runtimeOf(r, procRoot, p.Comm),
	}, p.NSPID)
}

// runtimeOf recognises the main process's language runtime: from /proc
// (its executable, which alone tells a Go binary), else from what the
// resolver learnt, else from the command name the kernel gave.
func runtimeOf(r identity.Running, procRoot, comm string) langrt.Runtime {
	if rt := langrt.Detect(procRoot, r.PID); rt != langrt.Unknown {
		return rt
	}
	if langrt.Known(r.Info.MainRuntime) {
		return r.Info.MainRuntime
	}
	return langrt.FromName(comm)
}

func (res *Result) finish(r identity.Running, procRoot, source string, f Facts, nsPID int) {
	var fdErr error
	if f.State.Blocked {
		// Only a blocked signal can be read from a signalfd.
		var set sigvocab.SignalSet
		set, fdErr = procsig.SignalfdMask(procRoot, r.PID)
		f.Signalfd = set.Has(f.Signal)
	}
	f.Source = source
	res.Source = source
	res.StopSignal = f.Signal.String()
	res.PID1.NSPID = nsPID
	res.PID1.Cmdline = utf8All(f.Cmdline)
	res.PID1.Runtime = f.Runtime
	res.NSInit = f.State.NSInit
	res.Catches = f.State.Handler == sigvocab.DispHandler
	res.Ignores = f.State.Handler == sigvocab.DispIgnore
	res.Blocks = f.State.Blocked
	res.Signalfd = f.Signalfd
	var fate sigvocab.Fate
	res.Prediction, fate, res.Hint = Predict(f)
	res.Fate = fate.String()
	if errors.Is(fdErr, fs.ErrPermission) && fate == sigvocab.FateBlocked && f.State.Handler == sigvocab.DispDefault {
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
	Signal   sigvocab.Signal
	State    sigvocab.TaskState // for Signal
	Signalfd bool               // a signalfd of the process watches Signal
	Cmdline  []string
	Comm     string
	// Runtime is the process's language runtime: whether a handler that
	// re-raises the signal ends it, and the fix a hint names.
	Runtime langrt.Runtime
	// Source is where State came from (SourceKernel when empty).
	// SourceProc shows no sa_flags: State.OneShot is unknown then.
	Source string
}

// Predict says what the runtime's stop signal will do. The kernel's part,
// the signal's fate, is sigvocab.PredictFate's (with force: the runtime sends
// from the host), and the hint says it in the fate's own words
// (sigvocab.Fate.Reason, the timeline's too); this adds what the process
// does with a queued signal.
func Predict(f Facts) (prediction string, fate sigvocab.Fate, hint string) {
	sig, st := f.Signal, f.State
	fate = sigvocab.PredictFate(sig, st, true)
	name := processName(f)
	// why is the kernel's reason, about the process by name or as "it".
	why := func(who string) string { return fate.Reason(sig, st.Handler, who) }
	if sig == sigvocab.SIGKILL {
		return Killed, fate, fmt.Sprintf("The stop signal is SIGKILL: %s gets no chance to shut down. %s", name, timeline.StopSignalFix(sig, fate, role(st)))
	}
	switch fate {
	case sigvocab.FateDroppedExiting:
		return Unknown, fate, fmt.Sprintf("%s: the kernel drops every signal sent to it now.", why(name))
	case sigvocab.FateHandler:
		p, hint := handled(f, name)
		return p, fate, hint
	case sigvocab.FateSigwait:
		if fwd := forwarder(f); fwd != "" {
			return Graceful, fate, fmt.Sprintf("%s is %s: %s and forwards it.", role(st), fwd, why("it"))
		}
		return Graceful, fate, fmt.Sprintf("%s: the kernel queues it for the wait (sigtimedwait or sigwaitinfo).", why(name))
	case sigvocab.FateBlocked:
		switch {
		case st.Handler == sigvocab.DispHandler:
			// Once unblocked it goes to the handler: what the handler
			// does decides, as for one that is not blocked.
			if p, hint := handled(f, name); p != Graceful {
				return p, fate, hint
			}
			return Graceful, fate, fmt.Sprintf("%s right now; it is delivered when %s unblocks it.", why(name), role(st))
		case f.Signalfd && st.Handler == sigvocab.DispDefault:
			if fwd := forwarder(f); fwd != "" {
				return Graceful, fate, fmt.Sprintf("%s is %s: it reads %s from a signalfd and forwards it.", role(st), fwd, sig)
			}
			return Graceful, fate, fmt.Sprintf("%s and reads it from a signalfd.", why(name))
		case st.Handler == sigvocab.DispIgnore:
			return ignoredSigIgn(name, sig, st, fate)
		}
		if st.NSInit {
			return IgnoredByInit, fate, fmt.Sprintf("%s and no signalfd for it: it stays pending, and a namespace init discards it even when unblocked, so the stop will wait the whole timeout and end in SIGKILL (exit 137). %s", why(name), handleFix(f))
		}
		return Ignored, fate, fmt.Sprintf("%s and no signalfd for it: it stays pending until unblocked, so the stop may wait the whole timeout and end in SIGKILL (exit 137).", why(name))
	case sigvocab.FateDefault:
		if fate.Kills(sig) {
			return Graceful, fate, fmt.Sprintf("%s is not a namespace init and has no %s handler: %s at once, with no cleanup.", name, sig, why("it"))
		}
		p := Ignored
		if st.NSInit {
			p = IgnoredByInit
		}
		return p, fate, fmt.Sprintf("%s has no %s handler and %s: the stop will wait the whole timeout and end in SIGKILL (exit 137). %s", name, sig, why("it"), timeline.StopSignalFix(sig, fate, role(st)))
	case sigvocab.FateDroppedInit:
		shell := ""
		if isShell(f) {
			shell = " It is a shell: shell-form ENTRYPOINT/CMD (`/bin/sh -c app`) makes the shell PID 1 and it does not forward signals."
		}
		return IgnoredByInit, fate, fmt.Sprintf("%s: the kernel drops signals to a namespace init that has none, so the stop will wait the whole timeout and end in SIGKILL (exit 137).%s %s", why(name), shell, handleFix(f))
	case sigvocab.FateDroppedSigIgn:
		return ignoredSigIgn(name, sig, st, fate)
	case sigvocab.FateDroppedDefault:
		p := Ignored
		if st.NSInit {
			p = IgnoredByInit
		}
		return p, fate, fmt.Sprintf("%s has no %s handler and %s: the stop will wait the whole timeout and end in SIGKILL (exit 137). %s", name, sig, why(name), timeline.StopSignalFix(sig, fate, role(st)))
	}
	return Unknown, fate, ""
}

// handled predicts the stop of a process whose handler will get the stop
// signal. A process that is no init is ended by whatever its handler does,
// a re-raise included (the default action kills it). A namespace init is
// not: the kernel drops a signal it sends itself with the default action.
func handled(f Facts, name string) (prediction, hint string) {
	sig, st, rt := f.Signal, f.State, f.Runtime
	if !st.NSInit {
		return Graceful, ""
	}
	switch {
	case st.OneShot && !exitsInHandler(rt):
		// SA_RESETHAND, read from the kernel: the handler runs once with
		// the disposition already back to SIG_DFL, and one that re-raises
		// (Node.js's) sends itself a signal an init drops.
		return IgnoredByInit, fmt.Sprintf("%s: its %s handler is one-shot (SA_RESETHAND): it re-raises the signal with the default action, and the kernel drops that for PID 1, so the stop will wait the whole timeout and end in SIGKILL (exit 137). %s",
			name, sig, handleFix(f))
	case f.Source == SourceProc && reraisesForGood(rt, sig):
		// /proc has no sa_flags: a handler is all it shows, and the
		// runtime's own handler (one-shot, re-raising) cannot be told
		// from one the application registered.
		return IgnoredByInit, fmt.Sprintf("%s is %s and has a %s handler; /proc does not show whether it is %s's own one-shot handler (SA_RESETHAND), which re-raises the signal with the default action for the kernel to drop at PID 1, or one the application registered. Inferred from the runtime: unless the application handles %s itself, the stop will wait the whole timeout and end in SIGKILL (exit 137). %s",
			name, rt.Name(), sig, rt.Name(), sig, handleFix(f))
	case rt.ExitAfterReraise() != 0 && reraised(sig):
		// The Go runtime: its handler is there whether or not the
		// application called signal.Notify, which no handler table shows.
		return Graceful, fmt.Sprintf("%s runs on %s: unless the application handles %s itself, %s re-raises it, the kernel drops that for PID 1, and %s then exits at once with status %d: a stop without cleanup, with exit status %d rather than %d. %s",
			name, rt.Name(), sig, rt.Name(), rt.Name(), rt.ExitAfterReraise(), rt.ExitAfterReraise(), 128+int(sig), timeline.CleanExitFix(rt))
	}
	return Graceful, ""
}

// reraised reports whether sig is one a runtime's own handler re-raises
// (langrt.Runtime.Reraises): SIGTERM and SIGINT.
func reraised(sig sigvocab.Signal) bool { return sig == sigvocab.SIGTERM || sig == sigvocab.SIGINT }

// reraisesForGood reports whether rt's own handler for sig re-raises it
// and rt does not exit when an init survives that (Node.js).
func reraisesForGood(rt langrt.Runtime, sig sigvocab.Signal) bool {
	return reraised(sig) && rt.Reraises() && rt.ExitAfterReraise() == 0
}

// exitsInHandler reports whether a one-shot handler of rt ends the process
// even at a namespace init: rt exits when its re-raise does not kill it
// (the Go runtime), or rt is known and does not re-raise at all.
func exitsInHandler(rt langrt.Runtime) bool {
	return rt.ExitAfterReraise() != 0 || langrt.Known(rt) && !rt.Reraises()
}

// handleFix is how a hint ends when the process must act on the stop
// signal itself: the timeline's fix for its runtime (a program run by a
// shell, by its argv[0], is the shell's), as a prediction says it.
func handleFix(f Facts) string {
	rt := f.Runtime
	if rt == langrt.Unknown && isShell(f) {
		rt = langrt.Shell
	}
	return timeline.HandleFix(rt, f.State.NSInit, timeline.FixForPrediction)
}

func ignoredSigIgn(name string, sig sigvocab.Signal, st sigvocab.TaskState, fate sigvocab.Fate) (string, sigvocab.Fate, string) {
	p := Ignored
	if st.NSInit {
		p = IgnoredByInit
	}
	return p, fate, fmt.Sprintf("%s: the stop will wait the whole timeout and end in SIGKILL (exit 137). %s",
		sigvocab.FateDroppedSigIgn.Reason(sig, st.Handler, name), timeline.StopSignalFix(sig, sigvocab.FateDroppedSigIgn, role(st)))
}

// role is how hints call the main process.
func role(st sigvocab.TaskState) string { return timeline.MainRole(st.NSInit) }

// processName is role with the command, for the start of a sentence.
func processName(f Facts) string {
	name := role(f.State)
	name = strings.ToUpper(name[:1]) + name[1:] // the start of a sentence
	switch {
	case len(f.Cmdline) > 0:
		return fmt.Sprintf("%s (%s)", name, filepath.Base(f.Cmdline[0]))
	case f.Comm != "":
		return fmt.Sprintf("%s (%s)", name, f.Comm)
	}
	return name
}

// forwarder names a known init that waits for signals and forwards them to
// its child, from argv[0] or the command name (langrt's one list).
func forwarder(f Facts) string {
	names := []string{f.Comm}
	if len(f.Cmdline) > 0 {
		names = append([]string{filepath.Base(f.Cmdline[0])}, names...)
	}
	for _, n := range names {
		if langrt.ForwardingInit(n) {
			return n
		}
	}
	return ""
}

// isShell reports whether the process is a shell, by its runtime or its
// argv[0] (langrt's one list).
func isShell(f Facts) bool {
	return f.Runtime == langrt.Shell || len(f.Cmdline) > 0 && langrt.IsShell(f.Cmdline[0])
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
