package identity

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/sigscope/sigscope/containers/langrt"

	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Summary is a container's identity as sigscope's JSON outputs show it: the
// "container" object of trace lines (docs/events.md), audit results and the
// agent's API. The stop settings let a recording be judged offline. Its
// json tags are how it is read back (a recording, an agent's audit); it is
// written by one writer (appendSummary), for [Info.AppendJSON] and
// [Summary.MarshalJSON], which summary_json_test.go holds to
// encoding/json's encoding of those tags.
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

// MarshalJSON writes s as encoding/json would from its json tags (and
// Identity's and Hook's): through the one writer of a container's object,
// with the strings as encoding/json writes them. They are written without
// HTML escaping: encoding/json adds it to a Marshaler's output when it
// escapes HTML (json.Marshal) and leaves the output as it is when it does
// not (an Encoder with SetEscapeHTML(false): audit -o json, the agent's
// API), so that either writes the bytes it wrote from the tags.
func (s Summary) MarshalJSON() ([]byte, error) {
	return appendSummary(make([]byte, 0, 256), &s, marshalStrings), nil
}

// AppendJSON appends what encoding/json writes for i.Summary(), without
// building it: `trace -o json` writes one with every event about a
// container. Untrusted strings are made valid UTF-8 as Summary makes them
// (textsafe.AppendJSON). It allocates nothing.
func (i *Info) AppendJSON(b []byte) []byte {
	s := Summary{Identity: i.Identity, StopSignal: stopSignalName(i.StopSignal), StopTimeout: i.StopTimeout,
		GracePeriod: i.GracePeriod, MainPID: i.MainPID, MainRuntime: i.MainRuntime, Sandbox: i.Sandbox, PreStop: i.PreStop}
	return appendSummary(b, &s, lineStrings)
}

// jsonStrings says how appendSummary writes strings.
type jsonStrings uint8

const (
	// lineStrings are a trace line's, which no encoder escapes after:
	// untrusted strings made valid UTF-8 as Summary makes them, invalid
	// bytes kept as \xNN, and HTML-escaped as json.Marshal escapes them.
	lineStrings jsonStrings = iota
	// marshalStrings are encoding/json's, without HTML escaping (see
	// MarshalJSON).
	marshalStrings
)

// appendString appends s as a JSON string. untrusted says that s is
// anyone's (a name, a label, a command) rather than a word a runtime or
// sigscope chose (a hook's kind, a signal's name), which a trace line
// keeps invalid bytes of.
func (how jsonStrings) appendString(b []byte, s string, untrusted bool) []byte {
	switch {
	case how == marshalStrings:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s) // a string always encodes
		return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
	case untrusted:
		return textsafe.AppendJSON(b, s)
	default:
		return textsafe.AppendJSONString(b, s)
	}
}

// appendSummary is the one writer of a container's object: the keys of
// Summary's json tags, in their order, each left out when empty.
func appendSummary(b []byte, s *Summary, how jsonStrings) []byte {
	// Every field is written with a leading comma and is left out when
	// empty; the first comma is then taken back.
	start := len(b)
	b = append(b, '{')
	b = how.appendField(b, `,"id":`, s.ID)
	b = how.appendField(b, `,"name":`, s.Name)
	b = how.appendField(b, `,"image":`, s.Image)
	b = how.appendField(b, `,"runtime":`, s.Runtime)
	b = how.appendField(b, `,"pod":`, s.Pod)
	b = how.appendField(b, `,"namespace":`, s.Namespace)
	b = how.appendField(b, `,"pod_uid":`, s.PodUID)
	switch {
	case s.StopSignal == "":
	case how == lineStrings: // Signal.String's: nothing to escape
		b = append(append(append(b, `,"stop_signal":"`...), s.StopSignal...), '"')
	default:
		b = how.appendString(append(b, `,"stop_signal":`...), s.StopSignal, false)
	}
	b = appendInt(b, `,"stop_timeout_s":`, s.StopTimeout)
	b = appendInt(b, `,"grace_period_s":`, s.GracePeriod)
	b = appendInt(b, `,"main_pid":`, s.MainPID)
	b = how.appendField(b, `,"main_runtime":`, string(s.MainRuntime))
	if s.Sandbox {
		b = append(b, `,"sandbox":true`...)
	}
	if h := s.PreStop; h != nil {
		b = how.appendString(append(b, `,"prestop":{"kind":`...), h.Kind, false)
		if len(h.Command) > 0 {
			b = append(b, `,"command":[`...)
			for n, a := range h.Command {
				if n > 0 {
					b = append(b, ',')
				}
				b = how.appendString(b, a, true)
			}
			b = append(b, ']')
		}
		b = how.appendField(b, `,"url":`, h.URL)
		b = appendInt(b, `,"seconds":`, h.Seconds)
		b = append(b, '}')
	}
	if len(b) > start+1 {
		b = append(b[:start+1], b[start+2:]...) // the first field's comma
	}
	return append(b, '}')
}

// appendField appends an untrusted string's key and value, or nothing for
// "" (omitempty).
func (how jsonStrings) appendField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return how.appendString(append(b, key...), s, true)
}

// appendInt appends an int's key and value, or nothing for 0 (omitempty).
func appendInt(b []byte, key string, n int) []byte {
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
