package sigvocab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// EventJSON, ProcessJSON and AncestorJSON are the event's JSON object as
// it is read: the one reading type, which [Event.UnmarshalJSON] decodes a
// recording's line into. Their keys, order and omissions are the schema of
// docs/events.md (keep the two in step), and what [Encoder.AppendEvent]
// writes: tracer's json_test.go holds the writer to encoding/json's
// encoding of these types, byte for byte.
type EventJSON struct {
	Time        string           `json:"time"`
	Event       string           `json:"event"`
	Signal      string           `json:"signal,omitempty"`
	Signo       int32            `json:"signo,omitempty"`
	Result      string           `json:"result,omitempty"`
	Flags       []string         `json:"flags"`
	Fate        string           `json:"fate,omitempty"`
	Code        string           `json:"code,omitempty"`
	SiCode      *int32           `json:"si_code,omitempty"`
	Group       *bool            `json:"group,omitempty"`
	Handler     string           `json:"handler,omitempty"`
	Sender      *ProcessJSON     `json:"sender,omitempty"`
	Target      ProcessJSON      `json:"target"`
	ExitCode    *int             `json:"exit_code,omitempty"`
	CoreDumped  *bool            `json:"core_dumped,omitempty"`
	NetNS       uint32           `json:"netns,omitempty"`
	Task        *TaskJSON        `json:"task,omitempty"`
	Connections *ConnectionsJSON `json:"connections,omitempty"`
}

// TaskJSON is a blocked event's TaskReading; syscall_name is derived
// (SyscallName) and not read back.
type TaskJSON struct {
	Role         string `json:"role"`
	Process      uint32 `json:"process"`
	Syscall      int32  `json:"syscall"`
	SyscallName  string `json:"syscall_name,omitempty"`
	Arg          uint64 `json:"arg"`
	Fd           string `json:"fd,omitempty"`
	CPUNs        uint64 `json:"cpu_ns"`
	OnCPU        bool   `json:"on_cpu"`
	Dispositions uint8  `json:"dispositions"`
	Threads      uint8  `json:"threads"`
	MoreThreads  bool   `json:"more_threads"`
	MoreChildren bool   `json:"more_children"`
	Slot         uint8  `json:"slot,omitempty"` // an exec's, and its child's (RoleExec, RoleExecChild)
}

// TaskToJSON is t as a blocked event's "task" object reads.
func TaskToJSON(t *TaskReading) *TaskJSON {
	return &TaskJSON{Role: t.Role.String(), Process: t.Process, Syscall: t.Syscall, SyscallName: SyscallName(t.Syscall), Arg: t.Arg,
		Fd: t.FdKind.String(), CPUNs: t.CPUNs, OnCPU: t.OnCPU, Dispositions: t.Dispositions, Threads: t.Threads,
		MoreThreads: t.MoreThreads, MoreChildren: t.MoreChildren, Slot: t.Slot}
}

func taskFromJSON(j *TaskJSON) (TaskReading, error) {
	t := TaskReading{Process: j.Process, Syscall: j.Syscall, Arg: j.Arg, CPUNs: j.CPUNs, OnCPU: j.OnCPU, Dispositions: j.Dispositions,
		Threads: j.Threads, MoreThreads: j.MoreThreads, MoreChildren: j.MoreChildren, Slot: j.Slot}
	// A role this tracer has no name for writes "unknown", which reads
	// back (parseName): FuzzDecode found a record that could not.
	role, err := parseName[TaskRole](j.Role, roleNames[:], "task role")
	if err != nil {
		return t, err
	}
	t.Role = role
	for k := FdKind(0); k < 16; k++ {
		if k.String() == j.Fd {
			t.FdKind = k
			break
		}
	}
	return t, nil
}

// ConnectionsJSON is a net event's counts, a key for each [NetKind] in its
// order.
type ConnectionsJSON struct {
	Since           string       `json:"since"`
	SeesRefused     bool         `json:"sees_refused"`
	SeesLastSpeaker bool         `json:"sees_last_speaker,omitempty"`
	Accepted        NetCountJSON `json:"accepted"`
	Closed          NetCountJSON `json:"closed"`
	ResetSent       NetCountJSON `json:"reset_sent"`
	ResetReceived   NetCountJSON `json:"reset_received"`
	Cut             NetCountJSON `json:"cut"`
	Refused         NetCountJSON `json:"refused"`
	ListenerClosed  NetCountJSON `json:"listener_closed"`
	// The kinds that tell who spoke last: absent from recordings made
	// before them (SeesLastSpeaker false).
	Unanswered *NetCountJSON `json:"unanswered,omitempty"`
	AfterClose *NetCountJSON `json:"after_close,omitempty"`
	IdleAtExit *NetCountJSON `json:"idle_at_exit,omitempty"`
	Undecided  *NetCountJSON `json:"undecided,omitempty"`
	// The namespace's own calls, with the kinds above.
	OutRefused  *NetCountJSON `json:"out_refused,omitempty"`
	OutReset    *NetCountJSON `json:"out_reset,omitempty"`
	SelfRefused *NetCountJSON `json:"self_refused,omitempty"`
	// Probes is present when the probers' connections are counted apart
	// (Connections.SeesProbes): n in NetKind order.
	Probes *[]uint64 `json:"probes,omitempty"`
	// SeesData and LastData: Connections' (LastData absent when zero).
	SeesData bool   `json:"sees_data,omitempty"`
	LastData string `json:"last_data,omitempty"`
	// Peers is present (a list, maybe empty) when the kernel kept who lost
	// requests (Connections.SeesPeers).
	Peers *[]PeerCountsJSON `json:"peers,omitempty"`
	// ByCgroup is present (a list, maybe empty) when the kernel records
	// sockets' cgroups (Connections.SeesCgroups).
	ByCgroup *[]CgroupCountsJSON `json:"by_cgroup,omitempty"`
}

// CgroupCountsJSON is one cgroup's part of the counts: n in NetKind order,
// as many as the counts have (Connections.SeesLastSpeaker).
type CgroupCountsJSON struct {
	CgroupID uint64   `json:"cgroup_id"`
	N        []uint64 `json:"n"`
}

// counts are c's kinds in NetKind order; nil for a kind it does not have.
func (c *ConnectionsJSON) counts() [NumNetKinds]*NetCountJSON {
	return [NumNetKinds]*NetCountJSON{&c.Accepted, &c.Closed, &c.ResetSent, &c.ResetReceived, &c.Cut, &c.Refused, &c.ListenerClosed,
		c.Unanswered, c.AfterClose, c.IdleAtExit, c.Undecided, c.OutRefused, c.OutReset, c.SelfRefused}
}

// ConnectionsToJSON is c as ConnectionsJSON: what AppendJSON writes.
func ConnectionsToJSON(c *Connections) *ConnectionsJSON {
	cj := &ConnectionsJSON{Since: c.Since.Format(TimeFormat), SeesRefused: c.SeesRefused, SeesLastSpeaker: c.SeesLastSpeaker}
	if c.SeesLastSpeaker {
		cj.Unanswered, cj.AfterClose, cj.IdleAtExit, cj.Undecided = &NetCountJSON{}, &NetCountJSON{}, &NetCountJSON{}, &NetCountJSON{}
		cj.OutRefused, cj.OutReset, cj.SelfRefused = &NetCountJSON{}, &NetCountJSON{}, &NetCountJSON{}
	}
	for k, n := range cj.counts() {
		if n == nil {
			continue
		}
		got := c.Counts[k]
		n.N = got.N
		if !got.First.IsZero() {
			n.First = got.First.Format(TimeFormat)
		}
		if !got.Last.IsZero() {
			n.Last = got.Last.Format(TimeFormat)
		}
	}
	if c.SeesProbes {
		p := append([]uint64(nil), c.Probes[:c.numKinds()]...)
		cj.Probes = &p
	}
	cj.SeesData = c.SeesData
	if !c.LastData.IsZero() {
		cj.LastData = c.LastData.Format(TimeFormat)
	}
	if c.SeesPeers {
		ps := []PeerCountsJSON{}
		for _, p := range c.Peers {
			ps = append(ps, PeerCountsJSON{Addr: p.Addr.String(), N: p.N[:c.numKinds()]})
		}
		cj.Peers = &ps
	}
	if c.SeesCgroups {
		by := []CgroupCountsJSON{}
		for _, g := range c.ByCgroup {
			by = append(by, CgroupCountsJSON{CgroupID: g.CgroupID, N: g.N[:c.numKinds()]})
		}
		cj.ByCgroup = &by
	}
	return cj
}

// PeerCountsJSON is one client's part of the lost connections: n in
// NetKind order, as many as the counts have.
type PeerCountsJSON struct {
	Addr string   `json:"addr"`
	N    []uint64 `json:"n"`
}

// NetCountJSON is one kind's count; the times only when N is not 0.
type NetCountJSON struct {
	N     uint64 `json:"n"`
	First string `json:"first,omitempty"`
	Last  string `json:"last,omitempty"`
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
	e.NetNS = j.NetNS
	if j.Task != nil {
		if e.Task, err = taskFromJSON(j.Task); err != nil {
			return err
		}
	}
	if j.Connections != nil {
		if e.Conns, err = connsFromJSON(j.Connections); err != nil {
			return err
		}
	}
	return nil
}

func connsFromJSON(j *ConnectionsJSON) (*Connections, error) {
	c := &Connections{SeesRefused: j.SeesRefused, SeesLastSpeaker: j.SeesLastSpeaker}
	var err error
	if c.Since, err = time.Parse(time.RFC3339Nano, j.Since); err != nil {
		return nil, fmt.Errorf("connections since: %w", err)
	}
	for k, n := range j.counts() {
		if n == nil {
			continue
		}
		c.Counts[k].N = n.N
		for _, t := range []struct {
			s   string
			dst *time.Time
		}{{n.First, &c.Counts[k].First}, {n.Last, &c.Counts[k].Last}} {
			if t.s == "" {
				continue
			}
			if *t.dst, err = time.Parse(time.RFC3339Nano, t.s); err != nil {
				return nil, fmt.Errorf("connections %s: %w", NetKind(k), err)
			}
		}
	}
	if j.Probes != nil {
		if len(*j.Probes) > NumNetKinds {
			return nil, fmt.Errorf("probes: %d kinds, this sigscope knows %d", len(*j.Probes), NumNetKinds)
		}
		c.SeesProbes = true
		copy(c.Probes[:], *j.Probes)
	}
	if j.Peers != nil {
		c.SeesPeers = true
		for _, p := range *j.Peers {
			a, err := netip.ParseAddr(p.Addr)
			if err != nil {
				return nil, fmt.Errorf("connections peer: %w", err)
			}
			if len(p.N) > NumNetKinds {
				return nil, fmt.Errorf("peer %s: %d kinds, this sigscope knows %d", p.Addr, len(p.N), NumNetKinds)
			}
			pc := PeerCounts{Addr: a}
			copy(pc.N[:], p.N)
			c.Peers = append(c.Peers, pc)
		}
	}
	c.SeesData = j.SeesData
	if j.LastData != "" {
		if c.LastData, err = time.Parse(time.RFC3339Nano, j.LastData); err != nil {
			return nil, fmt.Errorf("connections last data: %w", err)
		}
	}
	if j.ByCgroup != nil {
		c.SeesCgroups = true
		for _, g := range *j.ByCgroup {
			if len(g.N) > NumNetKinds {
				return nil, fmt.Errorf("connections of cgroup %d: %d kinds, this sigscope knows %d", g.CgroupID, len(g.N), NumNetKinds)
			}
			cc := CgroupCounts{CgroupID: g.CgroupID}
			copy(cc.N[:], g.N)
			c.ByCgroup = append(c.ByCgroup, cc)
		}
	}
	return c, nil
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
