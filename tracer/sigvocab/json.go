package sigvocab

import (
	"bytes"
	"strconv"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
)

// TimeFormat is RFC 3339 with nanoseconds, always nine digits.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

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

// Encoder is the event writer ([Encoder.AppendEvent]) with a cache, for a
// stream of events: what repeats from one event to the next is encoded
// once and copied after. A signal storm repeats everything but the time:
// the same sender with the same ancestors, the same target, the same
// verdict. Each part is cached under every field it is written from, so a
// cached part is the part the writer would write again (tracer's
// jsoncache_test.go holds a stream's lines to [Event.AppendJSON]'s). The
// caches are direct-mapped tables of fixed size: memory stays bounded
// whatever the stream, and a part whose slot another took is encoded
// again. The zero Encoder is ready to use; it is not safe for concurrent
// use.
type Encoder struct {
	sec      secondCache
	verdicts [verdictSlots]struct {
		ok   bool
		key  verdictKey
		frag []byte
	}
	senders [procSlots]struct {
		ok   bool
		key  senderKey
		frag []byte
	}
	targets [procSlots]struct {
		ok   bool
		key  Process
		frag []byte
	}
}

// Slots of the tables: a node's busy senders and targets at once (a
// storm has one of each; a stop has runc, the shim and a few processes).
const (
	verdictSlots = 16
	procSlots    = 64
)

// verdictKey is every field appendVerdict reads.
type verdictKey struct {
	kind    Kind
	signal  Signal
	result  Result
	group   bool
	handler Disposition
	code    CodeClass
	fate    Fate
	flags   Flags
	siCode  int32
}

// senderKey is every field appendSender reads.
type senderKey struct {
	p         Process
	exiting   bool
	count     int
	ancestors [MaxAncestors]Ancestor
}

// AppendEvent appends e's JSON object, without a newline. It is the one
// writer of an event's JSON: the keys of [EventJSON], in its order, with
// its omissions, each part written by its function below. Comms are
// made valid UTF-8 with invalid bytes kept as \xNN, then escaped as
// encoding/json escapes them (textsafe.AppendJSON). It is written by hand
// because `trace -o json` writes one per signal: it allocates nothing and
// takes a fraction of encoding/json's time. A nil Encoder writes every
// part ([Event.AppendJSON]); an Encoder copies a part it wrote for an
// earlier event from the same fields. The lookups are written inline, not
// as a function per part: a line of cached parts is a few copies, and a
// call per part would add to each.
func (c *Encoder) AppendEvent(b []byte, e *Event) []byte {
	b = append(b, `{"time":"`...)
	if c == nil {
		b = appendTime(b, e.Time)
	} else {
		b = c.sec.appendTime(b, e.Time)
	}

	if c == nil {
		b = appendVerdict(b, e)
	} else {
		vk := verdictKey{kind: e.Kind, signal: e.Signal, result: e.Result, group: e.Group, handler: e.Handler,
			code: e.Code, fate: e.Fate, flags: e.Flags, siCode: e.SiCode}
		v := &c.verdicts[(uint(e.Kind)*31+uint(e.Signal)*7+uint(e.Flags))%verdictSlots]
		if !v.ok || v.key != vk {
			v.ok, v.key, v.frag = true, vk, appendVerdict(v.frag[:0], e)
		}
		b = append(b, v.frag...)
	}

	if hasSender(e.Kind) {
		if c == nil {
			b = appendSender(b, e)
		} else {
			sk := senderKey{p: e.Sender, exiting: e.SenderExiting, count: e.AncestorsCount, ancestors: e.Ancestors}
			s := &c.senders[procSlot(&e.Sender)]
			if !s.ok || s.key != sk {
				s.ok, s.key, s.frag = true, sk, appendSender(s.frag[:0], e)
			}
			b = append(b, s.frag...)
		}
	}

	if c == nil {
		b = appendTarget(b, &e.Target)
	} else {
		t := &c.targets[procSlot(&e.Target)]
		if !t.ok || t.key != e.Target {
			t.ok, t.key, t.frag = true, e.Target, appendTarget(t.frag[:0], &e.Target)
		}
		b = append(b, t.frag...)
	}
	return appendExit(append(b, '}'), e)
}

// procSlot is where a process's parts go: its pid and thread id mixed, so
// that a process's threads do not share one slot.
func procSlot(p *Process) uint {
	return uint(p.PID*0x9e3779b1^p.TID) % procSlots
}

// secondCache holds the time's text up to the nanoseconds, and its zone,
// for one second of one location: a storm's events share their second by
// the million. Zones change offset at whole seconds only (the time
// package's transitions are Unix seconds), so a second's zone text is
// the same for each of its nanoseconds.
type secondCache struct {
	ok     bool
	sec    int64
	loc    *time.Location
	prefix [20]byte // "2006-01-02T15:04:05."
	zone   [6]byte  // "Z" or "-07:00"
	nZone  int
}

// appendTime appends t as appendTime does.
func (c *secondCache) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	if !c.ok || sec != c.sec || loc != c.loc {
		var buf [64]byte
		text := appendTime(buf[:0], t)
		// Only the fixed-width form is cached: years 0-9999 and zones
		// within 100 hours, 20 + 9 digits + "Z" or "±hh:mm".
		if n := len(text) - 29; text[19] != '.' || (n != 1 && n != 6) {
			c.ok = false
			return append(b, text...)
		}
		c.ok, c.sec, c.loc = true, sec, loc
		copy(c.prefix[:], text[:20])
		c.nZone = copy(c.zone[:], text[29:])
	}
	ns := t.Nanosecond()
	b = append(b, c.prefix[:]...)
	b = append(b, byte('0'+ns/100000000), byte('0'+ns/10000000%10), byte('0'+ns/1000000%10),
		byte('0'+ns/100000%10), byte('0'+ns/10000%10), byte('0'+ns/1000%10),
		byte('0'+ns/100%10), byte('0'+ns/10%10), byte('0'+ns%10))
	return append(b, c.zone[:c.nZone]...)
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

// appendExit appends an exit event's status, the network namespace and a
// net event's counts, then the event's closing brace.
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
	if e.NetNS != 0 {
		b = append(b, `,"netns":`...)
		b = strconv.AppendUint(b, uint64(e.NetNS), 10)
	}
	if e.Kind == KindBlocked {
		b = appendTask(b, &e.Task)
	}
	if c := e.Conns; c != nil {
		b = append(b, `,"connections":{"since":"`...)
		b = appendTime(b, c.Since)
		b = append(b, `","sees_refused":`...)
		b = strconv.AppendBool(b, c.SeesRefused)
		if c.SeesLastSpeaker {
			b = append(b, `,"sees_last_speaker":true`...)
		}
		for k := range c.Counts {
			if !c.SeesLastSpeaker && LastSpeakerKind(NetKind(k)) {
				continue // a recording's, read back: not counted then
			}
			n := &c.Counts[k]
			b = append(b, `,"`...)
			b = append(b, NetKind(k).String()...)
			b = append(b, `":{"n":`...)
			b = strconv.AppendUint(b, n.N, 10)
			if !n.First.IsZero() {
				b = appendTime(append(b, `,"first":"`...), n.First)
				b = append(b, '"')
			}
			if !n.Last.IsZero() {
				b = appendTime(append(b, `,"last":"`...), n.Last)
				b = append(b, '"')
			}
			b = append(b, '}')
		}
		if c.SeesProbes {
			b = append(b, `,"probes":[`...)
			for k, n := range c.Probes[:c.numKinds()] {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendUint(b, n, 10)
			}
			b = append(b, ']')
		}
		if c.SeesData {
			b = append(b, `,"sees_data":true`...)
		}
		if !c.LastData.IsZero() {
			b = appendTime(append(b, `,"last_data":"`...), c.LastData)
			b = append(b, '"')
		}
		if c.SeesPeers {
			b = append(b, `,"peers":[`...)
			for i, p := range c.Peers {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"addr":"`...)
				b = p.Addr.AppendTo(b)
				b = append(b, `","n":[`...)
				for k, n := range p.N[:c.numKinds()] {
					if k > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendUint(b, n, 10)
				}
				b = append(b, "]}"...)
			}
			b = append(b, ']')
		}
		if c.SeesCgroups {
			b = append(b, `,"by_cgroup":[`...)
			for i, g := range c.ByCgroup {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"cgroup_id":`...)
				b = strconv.AppendUint(b, g.CgroupID, 10)
				b = append(b, `,"n":[`...)
				for k, n := range g.N[:c.numKinds()] {
					if k > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendUint(b, n, 10)
				}
				b = append(b, "]}"...)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendTask appends a blocked event's "task" object.
func appendTask(b []byte, t *TaskReading) []byte {
	b = append(b, `,"task":{"role":"`...)
	b = append(b, t.Role.String()...)
	b = append(b, `","process":`...)
	b = strconv.AppendUint(b, uint64(t.Process), 10)
	b = append(b, `,"syscall":`...)
	b = strconv.AppendInt(b, int64(t.Syscall), 10)
	if n := SyscallName(t.Syscall); n != "" {
		b = append(b, `,"syscall_name":"`...)
		b = append(b, n...)
		b = append(b, '"')
	}
	b = append(b, `,"arg":`...)
	b = strconv.AppendUint(b, t.Arg, 10)
	if k := t.FdKind.String(); k != "" {
		b = append(b, `,"fd":"`...)
		b = append(b, k...)
		b = append(b, '"')
	}
	b = append(b, `,"cpu_ns":`...)
	b = strconv.AppendUint(b, t.CPUNs, 10)
	b = append(b, `,"on_cpu":`...)
	b = strconv.AppendBool(b, t.OnCPU)
	b = append(b, `,"dispositions":`...)
	b = strconv.AppendUint(b, uint64(t.Dispositions), 10)
	b = append(b, `,"threads":`...)
	b = strconv.AppendUint(b, uint64(t.Threads), 10)
	b = append(b, `,"more_threads":`...)
	b = strconv.AppendBool(b, t.MoreThreads)
	b = append(b, `,"more_children":`...)
	b = strconv.AppendBool(b, t.MoreChildren)
	if t.Slot != 0 {
		b = append(b, `,"slot":`...)
		b = strconv.AppendUint(b, uint64(t.Slot), 10)
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
