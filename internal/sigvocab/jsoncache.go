package sigvocab

import "time"

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
// its omissions, each part written by its function in json.go. Comms are
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
