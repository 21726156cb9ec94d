package timeline

import (
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The fixes, each worded once: the episodes' hints end with them, and so
// do the audit's predictions, so that a stop and its prediction name the
// same fix.

// FixInit is the fix for a PID 1 that does not act on the stop signal.
const FixInit = langrt.FixExecForm

const fixOOM = "Raise the memory limit (docker run --memory, Kubernetes resources.limits.memory) or reduce the application's memory use"

// FixFor says who reads a fix, which decides how it ends: the hint of a
// stop on Docker (or on a runtime not known), of a pod's stop, or the
// audit's prediction before any stop.
type FixFor uint8

const (
	FixForDocker FixFor = iota
	FixForKubernetes
	FixForPrediction
)

// fixFor is who reads the episode's fixes, by the knob that set its grace.
func (ep *episode) fixFor() FixFor {
	if ep.graceSource == knobKubernetes {
		return FixForKubernetes
	}
	return FixForDocker
}

// HandleFix is the fix for a main process on runtime rt that does not act
// on the stop signal: its runtime's way to handle it when the runtime is
// known, with an init that passes signals on as the other way for a
// namespace init; else (a shell, an unknown program) the exec form or an
// init. A main process that is no init is told to handle the signal.
func HandleFix(rt langrt.Runtime, nsInit bool, to FixFor) string {
	f := rt.HandleFix()
	switch {
	case (f == "" || rt == langrt.Shell) && !nsInit:
		return "Handle it in the application, or set the stop signal (STOPSIGNAL, --stop-signal, lifecycle.stopSignal) to one it handles."
	case f == "" || rt == langrt.Shell:
		return initFix(to)
	case !nsInit:
		return capitalize(f) + "."
	case to == FixForKubernetes:
		return capitalize(f) + "; or make an init that passes signals on (tini, dumb-init) the image's ENTRYPOINT."
	case to == FixForPrediction:
		return capitalize(f) + ". Or run an init such as tini (docker run --init), which forwards the signal."
	}
	return capitalize(f) + "; or run it under an init that passes signals on (docker run --init)."
}

// initFix is the fix for a PID 1 that does not act on the stop signal and
// whose runtime has no way of its own: the exec form, or an init.
func initFix(to FixFor) string {
	if to == FixForKubernetes {
		return FixInit + " in the image."
	}
	return FixInit + " (docker run --init)."
}

// StopSignalFix is the fix for a stop signal the main process cannot act
// on by its nature (a prediction's): SIGKILL itself, one it ignores
// (SIG_IGN, which who names), one whose default is to do nothing, or one
// whose default only stops it.
func StopSignalFix(sig sigvocab.Signal, fate sigvocab.Fate, who string) string {
	switch {
	case sig == sigvocab.SIGKILL:
		return "Use SIGTERM (or the signal the app handles) as the stop signal."
	case fate == sigvocab.FateDroppedSigIgn:
		return "Stop ignoring it, or use a stop signal " + who + " handles."
	case fate == sigvocab.FateDroppedDefault:
		return "Use a stop signal the process handles."
	}
	return "Use SIGTERM as the stop signal."
}

// CleanExitFix is the fix for a main process on runtime rt that ends at
// the stop signal without its cleanup (the Go runtime's own handler).
func CleanExitFix(rt langrt.Runtime) string {
	return "To shut down cleanly, " + rt.HandleFix() + "."
}

// graceFix names the knob that sets the grace period on this runtime.
func (ep *episode) graceFix() string {
	switch ep.graceSource {
	case knobKubernetes:
		return "terminationGracePeriodSeconds"
	case knobDocker:
		return "docker stop -t, docker run --stop-timeout, compose stop_grace_period"
	}
	return "docker stop -t or --stop-timeout; Kubernetes terminationGracePeriodSeconds"
}
