package tracer

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
)

// TimeFormat is RFC 3339 with nanoseconds, always nine digits.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// The JSON schema is documented in docs/events.md; keep the two in step.
type jsonAncestor struct {
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
}

type jsonProc struct {
	PID        uint32         `json:"pid"`
	TID        uint32         `json:"tid"`
	Comm       string         `json:"comm"`
	NsPID      uint32         `json:"ns_pid"`
	PidNS      uint32         `json:"pidns"`
	CgroupID   uint64         `json:"cgroup_id"`
	CgroupV1ID uint64         `json:"cgroup_v1_id"`
	Exiting    bool           `json:"exiting,omitempty"`
	Ancestors  []jsonAncestor `json:"ancestors,omitempty"`
}

type jsonEvent struct {
	Time       string    `json:"time"`
	Event      string    `json:"event"`
	Signal     string    `json:"signal,omitempty"`
	Signo      int32     `json:"signo,omitempty"`
	Result     string    `json:"result,omitempty"`
	Flags      []string  `json:"flags"`
	Fate       string    `json:"fate,omitempty"`
	Code       string    `json:"code,omitempty"`
	SiCode     *int32    `json:"si_code,omitempty"`
	Group      *bool     `json:"group,omitempty"`
	Handler    string    `json:"handler,omitempty"`
	Sender     *jsonProc `json:"sender,omitempty"`
	Target     jsonProc  `json:"target"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	CoreDumped *bool     `json:"core_dumped,omitempty"`
}

func procJSON(p *Process) jsonProc {
	return jsonProc{PID: p.PID, TID: p.TID, Comm: textsafe.UTF8(p.Comm.String()), NsPID: p.NsPID,
		PidNS: p.PidNS, CgroupID: p.CgroupID, CgroupV1ID: p.CgroupV1ID}
}

// senderJSON is a generate event's sender, or the parent that started an
// exec, with its ancestors.
func senderJSON(e *Event) *jsonProc {
	s := procJSON(&e.Sender)
	s.Exiting = e.SenderExiting
	for _, a := range e.SenderAncestors() {
		s.Ancestors = append(s.Ancestors, jsonAncestor{PID: a.PID, Comm: textsafe.UTF8(a.Comm.String())})
	}
	return &s
}

// MarshalJSON writes the documented event object. Comms are made valid UTF-8
// with invalid bytes kept as \xNN; encoding/json escapes control characters.
func (e *Event) MarshalJSON() ([]byte, error) {
	j := jsonEvent{
		Time:   e.Time.Format(TimeFormat),
		Event:  e.Kind.String(),
		Flags:  e.Flags.Words(),
		Target: procJSON(&e.Target),
	}
	if e.Signal != 0 {
		j.Signal, j.Signo = e.Signal.String(), int32(e.Signal)
	}
	switch e.Kind {
	case KindExec:
		j.Sender = senderJSON(e)
	case KindNSEmpty:
		s := procJSON(&e.Sender)
		j.Sender = &s
	case KindGenerate:
		j.Sender = senderJSON(e)
		j.Result = e.Result.String()
		j.Group = &e.Group
		fallthrough
	case KindDeliver:
		j.Fate = e.Fate.String()
		j.Code = e.Code.String()
		j.SiCode = &e.SiCode
		j.Handler = e.Handler.String()
	case KindExit:
		if e.Signal != 0 {
			j.CoreDumped = &e.CoreDumped
		} else {
			j.ExitCode = &e.ExitCode
		}
	}
	return json.Marshal(&j)
}

// UnmarshalJSON reads an event written by MarshalJSON, for offline analysis
// of a recording. Raw facts are not part of the JSON form: Flags are taken
// as recorded, not recomputed.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j jsonEvent
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("event time: %w", err)
	}
	*e = Event{Time: t, Target: procFromJSON(&j.Target)}
	if e.Kind, err = parseKind(j.Event); err != nil {
		return err
	}
	e.Signal = Signal(j.Signo)
	for _, w := range j.Flags {
		f, ok := ParseFlag(w)
		if !ok {
			return fmt.Errorf("unknown flag %q", w)
		}
		e.Flags |= f
	}
	if j.Result != "" {
		if e.Result, err = parseName[Result](j.Result, resultNames[:], "result"); err != nil {
			return err
		}
	}
	if j.Handler != "" {
		d, err := parseName[Disposition](j.Handler, []string{"default", "ignore", "handler"}, "handler")
		if err != nil {
			return err
		}
		e.Handler = d
	}
	if j.SiCode != nil {
		e.SiCode = *j.SiCode
		e.Code = codeClass(e.SiCode)
	}
	if j.Group != nil {
		e.Group = *j.Group
	}
	if j.Sender != nil {
		e.Sender = procFromJSON(j.Sender)
		e.SenderExiting = j.Sender.Exiting
		for i, a := range j.Sender.Ancestors {
			if i == MaxAncestors {
				break
			}
			e.Ancestors[i] = Ancestor{PID: a.PID}
			copy(e.Ancestors[i].Comm[:15], a.Comm)
			e.AncestorsCount = i + 1
		}
	}
	if j.Fate != "" {
		if e.Fate, err = ParseFate(j.Fate); err != nil {
			return err
		}
	} else {
		e.Fate = fateFromFlags(e)
	}
	if j.ExitCode != nil {
		e.ExitCode = *j.ExitCode
	} else if e.Kind == KindExit {
		e.ExitCode = -1
	}
	if j.CoreDumped != nil {
		e.CoreDumped = *j.CoreDumped
	}
	return nil
}

func procFromJSON(j *jsonProc) Process {
	p := Process{PID: j.PID, TID: j.TID, NsPID: j.NsPID, PidNS: j.PidNS, CgroupID: j.CgroupID, CgroupV1ID: j.CgroupV1ID}
	copy(p.Comm[:15], j.Comm)
	return p
}

func parseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown event %q", s)
}

func parseName[T ~uint8](s string, names []string, what string) (T, error) {
	for i, n := range names {
		if n == s {
			return T(i), nil
		}
	}
	// What String() writes for a value that has no name (a record with a
	// result or disposition this tracer does not know): the first value past
	// the named ones, which writes "unknown" again. Refusing it would make
	// the recording of such an event unreadable.
	if s == "unknown" {
		return T(len(names)), nil
	}
	return 0, fmt.Errorf("unknown %s %q", what, s)
}
