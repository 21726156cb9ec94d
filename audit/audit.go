package audit

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/timeline"
	"github.com/sigscope/sigscope/tracer"
)

// Predictions, in the words of the stop timelines' outcomes.
const (
	Graceful      = string(timeline.OutcomeGraceful)      // PID 1 catches the stop signal
	IgnoredByInit = string(timeline.OutcomeIgnoredByInit) // the kernel will drop it: SIGKILL after the timeout
	Killed        = string(timeline.OutcomeKilled)        // the stop signal is SIGKILL itself
	Unknown       = "unknown"                             // PID 1 could not be read
)

// Result is one container's audit line (`sigscope audit -o json`).
type Result struct {
	Container  container.Summary `json:"container"`
	PID1       PID1              `json:"pid1"`
	StopSignal string            `json:"stop_signal"`
	Catches    bool              `json:"catches"`
	Ignores    bool              `json:"ignores"`
	Blocks     bool              `json:"blocks"`
	Prediction string            `json:"prediction"`
	Hint       string            `json:"hint,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// PID1 is the container's init as the host sees it.
type PID1 struct {
	PID     int      `json:"pid"`
	Cmdline []string `json:"cmdline"`
}

// Lister is what Run needs from a container.Resolver.
type Lister interface {
	ListRunning(ctx context.Context) ([]container.Running, error)
}

// Run audits every running container the reachable runtimes report.
func Run(ctx context.Context, l Lister, procRoot string) ([]Result, error) {
	running, err := l.ListRunning(ctx)
	if err != nil && len(running) == 0 {
		return nil, err
	}
	out := make([]Result, 0, len(running))
	for _, r := range running {
		out = append(out, Check(r, procRoot))
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

// Check predicts one container's stop from its PID 1's signal masks.
func Check(r container.Running, procRoot string) Result {
	res := Result{Container: r.Info.Summary(), PID1: PID1{PID: r.PID}}
	sig := r.Info.StopSignalOrDefault()
	res.StopSignal = sig.String()
	if r.PID <= 0 {
		res.Prediction, res.Error = Unknown, "the runtime did not report PID 1"
		return res
	}
	caught, ignored, blocked, cmdline, err := container.PID1Signals(procRoot, r.PID)
	if err != nil {
		res.Prediction, res.Error = Unknown, err.Error()
		return res
	}
	res.PID1.Cmdline = utf8All(cmdline)
	res.Catches, res.Ignores, res.Blocks = caught.Has(sig), ignored.Has(sig), blocked.Has(sig)
	res.Prediction, res.Hint = Predict(sig, res.Catches, res.Ignores, res.Blocks, cmdline)
	return res
}

// Predict applies the kernel's rules for a namespace init (docs/kernel.md):
// SIGKILL from the runtime always lands; any other signal lands only if
// PID 1 installed a handler for it. SIG_IGN and SIG_DFL are both a drop. A
// blocked signal with a handler is delivered when PID 1 unblocks it.
func Predict(sig tracer.Signal, catches, ignores, blocks bool, cmdline []string) (prediction, hint string) {
	name := "PID 1"
	if len(cmdline) > 0 {
		name = fmt.Sprintf("PID 1 (%s)", filepath.Base(cmdline[0]))
	}
	switch {
	case sig == tracer.SIGKILL:
		return Killed, fmt.Sprintf("The stop signal is SIGKILL: %s gets no chance to shut down. Use SIGTERM (or the signal the app handles) as the stop signal.", name)
	case catches:
		h := ""
		if blocks {
			h = fmt.Sprintf("%s blocks %s right now; it is delivered when PID 1 unblocks it.", name, sig)
		}
		return Graceful, h
	case ignores:
		return IgnoredByInit, fmt.Sprintf("%s ignores %s (SIG_IGN): the stop will wait the whole timeout and end in SIGKILL (exit 137). Stop ignoring it, or use a stop signal PID 1 handles.", name, sig)
	}
	shell := ""
	if len(cmdline) > 0 && isShell(cmdline[0]) {
		shell = " It is a shell: shell-form ENTRYPOINT/CMD (`/bin/sh -c app`) makes the shell PID 1 and it does not forward signals."
	}
	return IgnoredByInit, fmt.Sprintf("%s has no %s handler: the kernel drops signals to a namespace init that has none, so the stop will wait the whole timeout and end in SIGKILL (exit 137).%s %s (docker run --init).", name, sig, shell, timeline.FixInit)
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
