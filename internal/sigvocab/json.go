package sigvocab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
)

// TimeFormat is RFC 3339 with nanoseconds, always nine digits.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// EventJSON, ProcessJSON and AncestorJSON are the event's JSON object as
// it is read: the one reading type, which [Event.UnmarshalJSON] decodes a
// recording's line into. Their keys, order and omissions are the schema of
// docs/events.md (keep the two in step), and what [Encoder.AppendEvent]
// writes: tracer's json_test.go holds the writer to encoding/json's
// encoding of these types, byte for byte.
type EventJSON struct {
	Time       string       `json:"time"`
	Event      string       `json:"event"`
	Signal     string       `json:"signal,omitempty"`
	Signo      int32        `json:"signo,omitempty"`
	Result     string       `json:"result,omitempty"`
	Flags      []string     `json:"flags"`
	Fate       string       `json:"fate,omitempty"`
	Code       string       `json:"code,omitempty"`
	SiCode     *int32       `json:"si_code,omitempty"`
	Group      *bool        `json:"group,omitempty"`
	Handler    string       `json:"handler,omitempty"`
	Sender     *ProcessJSON `json:"sender,omitempty"`
	Target     ProcessJSON  `json:"target"`
	ExitCode   *int         `json:"exit_code,omitempty"`
	CoreDumped *bool        `json:"core_dumped,omitempty"`
}

// ProcessJSON is a sender's or a target's object; only a sender's has
// Exiting and Ancestors.
type ProcessJSON struct {
	PID        uint32         `json:"pid"`
	TID        uint32         `json:"tid"`
	Comm       string         `json:"comm"`
	NsPID      uint32         `json:"ns_pid"`
	PidNS      uint32         `json:"pidns"`
	CgroupID   uint64         `json:"cgroup_id"`
	CgroupV1ID uint64         `json:"cgroup_v1_id"`
	Exiting    bool           `json:"exiting,omitempty"`
	Ancestors  []AncestorJSON `json:"ancestors,omitempty"`
}

// AncestorJSON is one of a sender's ancestors.
type AncestorJSON struct {
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
}

// MarshalJSON writes the documented event object: [Event.AppendJSON].
func (e *Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, 512)), nil
}

// AppendJSON appends the documented event object (docs/events.md), without
// a newline: what [Encoder.AppendEvent] writes, with no cache. It allocates
// nothing.
func (e *Event) AppendJSON(b []byte) []byte {
	return (*Encoder)(nil).AppendEvent(b, e)
}

// appendVerdict appends what follows the time, up to the sender: the
// kind, signal, result, flags, fate, code and handler. It reads only the
// fields of verdictKey (Encoder caches it by them).
func appendVerdict(b []byte, e *Event) []byte {
	b = append(b, `","event":"`...)
	b = append(b, e.Kind.String()...)
	b = append(b, '"')
	if e.Signal != 0 {
		b = append(b, `,"signal":"`...)
		b = append(b, e.Signal.String()...) // a name needs no escaping
		b = append(b, `","signo":`...)
		b = strconv.AppendInt(b, int64(e.Signal), 10)
	}
	if e.Kind == KindGenerate {
		b = append(b, `,"result":"`...)
		b = append(b, e.Result.String()...)
		b = append(b, '"')
	}
	b = append(b, `,"flags":[`...)
	first := true
	for i, n := range flagNames {
		if e.Flags&(1<<i) != 0 {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, '"')
			b = append(b, n...)
			b = append(b, '"')
		}
	}
	b = append(b, ']')
	if e.Kind == KindGenerate || e.Kind == KindDeliver {
		b = append(b, `,"fate":"`...)
		b = append(b, e.Fate.String()...)
		b = append(b, `","code":"`...)
		b = append(b, e.Code.String()...)
		b = append(b, `","si_code":`...)
		b = strconv.AppendInt(b, int64(e.SiCode), 10)
		if e.Kind == KindGenerate {
			b = append(b, `,"group":`...)
			b = strconv.AppendBool(b, e.Group)
		}
		b = append(b, `,"handler":"`...)
		b = append(b, e.Handler.String()...)
		b = append(b, '"')
	}
	return b
}

// hasSender says which kinds write a "sender": a generate event's sender,
// or the parent that started an exec, with its ancestors; an ns_empty's
// init's parent (none).
func hasSender(k Kind) bool { return k == KindGenerate || k == KindExec || k == KindNSEmpty }

// appendSender appends the "sender" key and object. It reads only the
// fields of senderKey (Encoder caches it by them).
func appendSender(b []byte, e *Event) []byte {
	b = append(b, `,"sender":`...)
	b = appendProc(b, &e.Sender)
	if e.SenderExiting {
		b = append(b, `,"exiting":true`...)
	}
	if as := e.SenderAncestors(); len(as) > 0 {
		b = append(b, `,"ancestors":[`...)
		for i := range as {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendUint(b, uint64(as[i].PID), 10)
			b = append(b, `,"comm":`...)
			b = textsafe.AppendJSON(b, as[i].Comm.bytes())
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendTarget appends the "target" key and object.
func appendTarget(b []byte, p *Process) []byte {
	return appendProc(append(b, `,"target":`...), p)
}

// appendExit appends an exit event's status, then the event's closing brace.
func appendExit(b []byte, e *Event) []byte {
	if e.Kind == KindExit {
		if e.Signal != 0 {
			b = append(b, `,"core_dumped":`...)
			b = strconv.AppendBool(b, e.CoreDumped)
		} else {
			b = append(b, `,"exit_code":`...)
			b = strconv.AppendInt(b, int64(e.ExitCode), 10)
		}
	}
	return append(b, '}')
}

// appendProc appends a process object without its closing brace: the
// sender's has more keys.
func appendProc(b []byte, p *Process) []byte {
	b = append(b, `{"pid":`...)
	b = strconv.AppendUint(b, uint64(p.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(p.TID), 10)
	b = append(b, `,"comm":`...)
	b = textsafe.AppendJSON(b, p.Comm.bytes())
	b = append(b, `,"ns_pid":`...)
	b = strconv.AppendUint(b, uint64(p.NsPID), 10)
	b = append(b, `,"pidns":`...)
	b = strconv.AppendUint(b, uint64(p.PidNS), 10)
	b = append(b, `,"cgroup_id":`...)
	b = strconv.AppendUint(b, p.CgroupID, 10)
	b = append(b, `,"cgroup_v1_id":`...)
	return strconv.AppendUint(b, p.CgroupV1ID, 10)
}

// bytes is what String returns, without the copy.
func (c *Comm) bytes() []byte {
	if i := bytes.IndexByte(c[:], 0); i >= 0 {
		return c[:i]
	}
	return c[:]
}

// appendTime appends t in TimeFormat, as t.AppendFormat does but without
// parsing the layout each time. Years outside 0-9999 and zones 100 hours
// or more away from UTC (neither a kernel's clock nor a real zone) take
// AppendFormat itself.
func appendTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	_, offset := t.Zone()
	if year < 0 || year > 9999 || offset <= -100*3600 || offset >= 100*3600 {
		return t.AppendFormat(b, TimeFormat)
	}
	hour, minute, sec := t.Clock()
	ns := t.Nanosecond()
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append2(b, int(month), '-')
	b = append2(b, day, 'T')
	b = append2(b, hour, ':')
	b = append2(b, minute, ':')
	b = append2(b, sec, '.')
	b = append(b, byte('0'+ns/100000000), byte('0'+ns/10000000%10), byte('0'+ns/1000000%10),
		byte('0'+ns/100000%10), byte('0'+ns/10000%10), byte('0'+ns/1000%10),
		byte('0'+ns/100%10), byte('0'+ns/10%10), byte('0'+ns%10))
	// Z07:00: Z for UTC, else the offset in whole minutes, truncated
	// toward zero as the time package does.
	if offset == 0 {
		return append(b, 'Z')
	}
	zone, sign := offset/60, byte('+')
	if zone < 0 {
		zone, sign = -zone, '-'
	}
	b = append(b, sign)
	b = append2(b, zone/60, ':')
	return append(b, byte('0'+zone%60/10), byte('0'+zone%10))
}

// append2 appends n (0-99) as two digits, then sep.
func append2(b []byte, n int, sep byte) []byte {
	return append(b, byte('0'+n/10), byte('0'+n%10), sep)
}

// UnmarshalJSON reads an event written by MarshalJSON, for offline analysis
// of a recording, through [EventJSON]. Raw facts are not part of the JSON form: Flags are taken
// as recorded, not recomputed.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j EventJSON
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
		e.Code = CodeOf(e.SiCode)
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

func procFromJSON(j *ProcessJSON) Process {
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
