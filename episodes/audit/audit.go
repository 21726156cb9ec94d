package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"sync/atomic"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Predictions (Result.Prediction), in the words of the stop timelines'
// outcomes where one fits (Prediction.Outcome).
const (
	Graceful      = string(timeline.OutcomeGraceful)      // the stop signal is handled, waited for, or kills a non-init
	IgnoredByInit = string(timeline.OutcomeIgnoredByInit) // a namespace init will drop it (or keep it blocked): SIGKILL after the timeout
	Ignored       = string(timeline.OutcomeIgnored)       // a process that is no init drops it (SIG_IGN, default-ignored) or keeps it blocked
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
	p := Predict(f)
	res.Prediction, res.Fate, res.Hint = string(p.Outcome), p.Fate.String(), p.Hint()
	if errors.Is(fdErr, fs.ErrPermission) && p.Fate == sigvocab.FateBlocked && f.State.Handler == sigvocab.DispDefault {
		// Blocked with no handler: a signalfd decides between a graceful
		// stop and a SIGKILL after the timeout. Guessing "none" calls
		// catatonit a shell; say what could not be read instead.
		res.Prediction, res.Hint = Unknown, ""
		res.Error = fmt.Sprintf("cannot tell whether %s reads %s from a signalfd: %v", role(f.State), f.Signal, fdErr)
	}
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
