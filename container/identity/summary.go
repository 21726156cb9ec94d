package identity

import (
	"strconv"

	"github.com/sigscope/sigscope/internal/langrt"

	"github.com/sigscope/sigscope/internal/sigvocab"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// Summary is a container's identity as sigscope's JSON outputs show it: the
// "container" object of trace lines (docs/events.md), audit results and the
// agent's API. The stop settings let a recording be judged offline.
type Summary struct {
	Identity
	StopSignal  string `json:"stop_signal,omitempty"`
	StopTimeout int    `json:"stop_timeout_s,omitempty"`
	GracePeriod int    `json:"grace_period_s,omitempty"`
	// MainPID and Sandbox let a recording be judged offline: which
	// process is the container's main one when it is no namespace init,
	// and whether it is a pod's sandbox.
	MainPID     int            `json:"main_pid,omitempty"`
	MainRuntime langrt.Runtime `json:"main_runtime,omitempty"`
	Sandbox     bool           `json:"sandbox,omitempty"`
	PreStop     *Hook          `json:"prestop,omitempty"`
}

// Summary returns i's JSON identity. Untrusted strings (names, images,
// labels) are made valid UTF-8, invalid bytes kept as \xNN.
func (i *Info) Summary() Summary {
	return Summary{Identity: i.Identity.UTF8(),
		StopSignal: stopSignalName(i.StopSignal), StopTimeout: i.StopTimeout, GracePeriod: i.GracePeriod,
		MainPID: i.MainPID, MainRuntime: langrt.Runtime(textsafe.UTF8(string(i.MainRuntime))), Sandbox: i.Sandbox, PreStop: safeHook(i.PreStop)}
}

// Info returns the identity a Summary carries (labels are not part of it).
func (s Summary) Info() *Info {
	return &Info{Identity: s.Identity, StopSignal: ParseStopSignal(s.StopSignal), StopTimeout: s.StopTimeout, GracePeriod: s.GracePeriod,
		MainPID: s.MainPID, MainRuntime: s.MainRuntime, Sandbox: s.Sandbox, PreStop: s.PreStop}
}

func stopSignalName(s sigvocab.Signal) string {
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

// AppendJSON appends what encoding/json writes for i.Summary(), without
// building it: `trace -o json` writes one with every event about a
// container. Untrusted strings are made valid UTF-8 as Summary makes them
// (textsafe.AppendJSON); summary_json_test.go holds the two to each other.
func (i *Info) AppendJSON(b []byte) []byte {
	// Every field is written with a leading comma and is left out when
	// empty; the first comma is then taken back.
	start := len(b)
	b = append(b, '{')
	b = appendJSONField(b, `,"id":`, i.ID)
	b = appendJSONField(b, `,"name":`, i.Name)
	b = appendJSONField(b, `,"image":`, i.Image)
	b = appendJSONField(b, `,"runtime":`, i.Runtime)
	b = appendJSONField(b, `,"pod":`, i.Pod)
	b = appendJSONField(b, `,"namespace":`, i.Namespace)
	b = appendJSONField(b, `,"pod_uid":`, i.PodUID)
	if i.StopSignal != 0 {
		b = append(b, `,"stop_signal":"`...)
		b = i.StopSignal.AppendName(b)
		b = append(b, '"')
	}
	b = appendJSONInt(b, `,"stop_timeout_s":`, i.StopTimeout)
	b = appendJSONInt(b, `,"grace_period_s":`, i.GracePeriod)
	b = appendJSONInt(b, `,"main_pid":`, i.MainPID)
	b = appendJSONField(b, `,"main_runtime":`, string(i.MainRuntime))
	if i.Sandbox {
		b = append(b, `,"sandbox":true`...)
	}
	if h := i.PreStop; h != nil {
		b = append(b, `,"prestop":{"kind":`...)
		b = textsafe.AppendJSONString(b, h.Kind)
		if len(h.Command) > 0 {
			b = append(b, `,"command":[`...)
			for n, a := range h.Command {
				if n > 0 {
					b = append(b, ',')
				}
				b = textsafe.AppendJSON(b, a)
			}
			b = append(b, ']')
		}
		b = appendJSONField(b, `,"url":`, h.URL)
		b = appendJSONInt(b, `,"seconds":`, h.Seconds)
		b = append(b, '}')
	}
	if len(b) > start+1 {
		b = append(b[:start+1], b[start+2:]...) // the first field's comma
	}
	return append(b, '}')
}

// appendJSONField appends an untrusted string's key and value, or nothing
// for "" (omitempty).
func appendJSONField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return textsafe.AppendJSON(append(b, key...), s)
}

// appendJSONInt appends an int's key and value, or nothing for 0
// (omitempty).
func appendJSONInt(b []byte, key string, n int) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(n), 10)
}

// ParseStopSignal reads a stop signal as runtimes configure it and Summary
// writes it ("TERM", "15", "SIGTERM"); 0 (the runtime default, SIGTERM) for
// "" or a name it cannot read.
func ParseStopSignal(s string) sigvocab.Signal {
	if s == "" {
		return 0
	}
	sig, err := sigvocab.ParseSignal(s)
	if err != nil {
		return 0
	}
	return sig
}
