package container

import (
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer"
)

// Summary is a container's identity as sigscope's JSON outputs show it: the
// "container" object of trace lines (docs/events.md), audit results and the
// agent's API. The stop settings let a recording be judged offline.
type Summary struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	Image       string `json:"image,omitempty"`
	Runtime     string `json:"runtime"`
	Pod         string `json:"pod,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	StopSignal  string `json:"stop_signal,omitempty"`
	StopTimeout int    `json:"stop_timeout_s,omitempty"`
	GracePeriod int    `json:"grace_period_s,omitempty"`
	// MainPID and Sandbox let a recording be judged offline: which
	// process is the container's main one when it is no namespace init,
	// and whether it is a pod's sandbox.
	MainPID int   `json:"main_pid,omitempty"`
	Sandbox bool  `json:"sandbox,omitempty"`
	PreStop *Hook `json:"prestop,omitempty"`
}

// Summary returns i's JSON identity. Untrusted strings (names, images,
// labels) are made valid UTF-8, invalid bytes kept as \xNN.
func (i *Info) Summary() Summary {
	return Summary{ID: i.ID, Name: textsafe.UTF8(i.Name), Image: textsafe.UTF8(i.Image), Runtime: i.Runtime,
		Pod: textsafe.UTF8(i.Pod), Namespace: textsafe.UTF8(i.Namespace),
		StopSignal: stopSignalName(i.StopSignal), StopTimeout: i.StopTimeout, GracePeriod: i.GracePeriod,
		MainPID: i.MainPID, Sandbox: i.Sandbox, PreStop: safeHook(i.PreStop)}
}

// Info returns the identity a Summary carries (labels are not part of it).
func (s Summary) Info() *Info {
	return &Info{ID: s.ID, Name: s.Name, Image: s.Image, Runtime: s.Runtime, Pod: s.Pod,
		Namespace: s.Namespace, StopSignal: parseStopSignal(s.StopSignal), StopTimeout: s.StopTimeout, GracePeriod: s.GracePeriod,
		MainPID: s.MainPID, Sandbox: s.Sandbox, PreStop: s.PreStop}
}

func stopSignalName(s tracer.Signal) string {
	if s == 0 {
		return ""
	}
	return s.String()
}

// safeHook is h with its untrusted strings made valid UTF-8.
func safeHook(h *Hook) *Hook {
	if h == nil {
		return nil
	}
	out := *h
	out.URL = textsafe.UTF8(h.URL)
	out.Command = make([]string, len(h.Command))
	for i, a := range h.Command {
		out.Command[i] = textsafe.UTF8(a)
	}
	return &out
}
