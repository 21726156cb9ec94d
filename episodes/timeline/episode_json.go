package timeline

import (
	"encoding/json"
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// An episode's JSON: the types MarshalJSON (here) and UnmarshalJSON
// (episode_json_read.go) share, and the writing. The JSON form is
// documented in docs/timelines.md; keep the two in step.

// jsonStep is a Step.
type jsonStep struct {
	At      float64  `json:"at"`
	Time    string   `json:"time"`
	Kind    StepKind `json:"kind"`
	Signal  string   `json:"signal,omitempty"`
	Sender  *Proc    `json:"sender,omitempty"`
	Target  Proc     `json:"target"`
	Flags   []string `json:"flags,omitempty"`
	Verdict string   `json:"verdict,omitempty"`
	Exit    *int     `json:"exit_status,omitempty"`
	Text    string   `json:"text"`
}

type jsonPreStop struct {
	Kind       string      `json:"kind"`
	Command    []string    `json:"command,omitempty"`
	StartAt    string      `json:"start_at,omitempty"`
	EndAt      string      `json:"end_at,omitempty"`
	Duration   *float64    `json:"duration_s,omitempty"`
	ExitStatus *int        `json:"exit_code,omitempty"`
	Estimated  bool        `json:"estimated,omitempty"`
	FromAPI    bool        `json:"start_from_api,omitempty"`
	AtKill     *jsonHookAt `json:"at_kill,omitempty"`
}

// jsonHookAt is PreStop.AtKill.
type jsonHookAt struct {
	Process jsonTaskAt  `json:"process"`
	Child   *jsonTaskAt `json:"child,omitempty"`
	Verdict string      `json:"verdict"`
}

type jsonEpisode struct {
	ID             uint64       `json:"id,omitempty"`
	Node           string       `json:"node,omitempty"`
	Container      Container    `json:"container"`
	Owner          *Owner       `json:"owner,omitempty"`
	Revision       *Revision    `json:"revision,omitempty"`
	Main           Proc         `json:"main"`
	MainIsInit     bool         `json:"main_is_init"`
	ForwardingInit string       `json:"forwarding_init,omitempty"`
	Outcome        Outcome      `json:"outcome"`
	Start          string       `json:"start"`
	StopSignal     string       `json:"stop_signal,omitempty"`
	StopSender     *Sender      `json:"stop_sender,omitempty"`
	StopVerdict    string       `json:"stop_verdict,omitempty"`
	StopAt         string       `json:"stop_at,omitempty"`
	ReraiseVerdict string       `json:"reraise_verdict,omitempty"`
	KillSender     *Sender      `json:"kill_sender,omitempty"`
	KillAt         string       `json:"kill_at,omitempty"`
	ExitAt         string       `json:"exit_at,omitempty"`
	PreStop        *jsonPreStop `json:"prestop,omitempty"`
	StopReason     string       `json:"stop_reason,omitempty"`
	NotLearnt      []string     `json:"not_learnt,omitempty"`
	GracePeriod    *float64     `json:"grace_period_s,omitempty"`
	GraceFrom      string       `json:"grace_from,omitempty"`
	StopTimeout    *float64     `json:"stop_timeout_s,omitempty"`
	KillAfter      *float64     `json:"kill_after_s,omitempty"`
	ExitAfter      *float64     `json:"exit_after_s,omitempty"`
	StopDuration   *float64     `json:"stop_duration_s,omitempty"`
	ExitStatus     *int         `json:"exit_status,omitempty"`
	ExitSignal     string       `json:"exit_signal,omitempty"`
	CascadeKills   []Proc       `json:"cascade_kills"`
	CascadeOmitted int          `json:"cascade_kills_omitted,omitempty"`
	EventsDropped  uint64       `json:"events_dropped,omitempty"`
	StartUnseen    bool         `json:"start_unseen,omitempty"`
	TracedSince    string       `json:"traced_since,omitempty"`
	OOMVictims     []Proc       `json:"oom_victims,omitempty"`
	Steps          []jsonStep   `json:"steps"`
	StepsOmitted   int          `json:"steps_omitted,omitempty"`
	Hint           string       `json:"hint,omitempty"`
	Traffic        *jsonTraffic `json:"traffic,omitempty"`
	AtKill         *jsonAtKill  `json:"at_kill,omitempty"`

	// The pod's endpoints, from the API server (endpoints.go).
	Endpoints []jsonEndpointChange `json:"endpoints,omitempty"`
	// EndpointRace is derived (Episode.EndpointRace), not read back.
	EndpointRace string `json:"endpoint_race,omitempty"`
}

// jsonAtKill is Episode.AtKill; since_s is null when the stop signal's
// reading is missing, and each task's cpu_s when its own is.
type jsonAtKill struct {
	Main         jsonTaskAt   `json:"main"`
	Threads      []jsonTaskAt `json:"threads,omitempty"`
	Children     []jsonTaskAt `json:"children,omitempty"`
	ThreadCount  int          `json:"thread_count"`
	MoreThreads  bool         `json:"more_threads,omitempty"`
	MoreChildren bool         `json:"more_children,omitempty"`
	SinceS       *float64     `json:"since_s"`
	Verdict      string       `json:"verdict"`
}

type jsonTaskAt struct {
	PID     uint32   `json:"pid"`
	NsPID   uint32   `json:"ns_pid"`
	TID     uint32   `json:"tid"`
	Comm    string   `json:"comm"`
	Syscall string   `json:"syscall,omitempty"`
	Arg     int64    `json:"arg"`
	Fd      string   `json:"fd,omitempty"`
	CPUS    *float64 `json:"cpu_s"`
	Ignores bool     `json:"ignores_stop_signal,omitempty"`
	Handles bool     `json:"handles_stop_signal,omitempty"`
	Unread  bool     `json:"syscall_unread,omitempty"`
}

func taskAtJSON(t *TaskAt) jsonTaskAt {
	j := jsonTaskAt{PID: t.PID, NsPID: t.NsPID, TID: t.TID, Comm: textsafe.UTF8(t.Comm), Syscall: t.Syscall, Arg: t.Arg, Fd: t.Fd,
		Ignores: t.Ignores, Handles: t.Handles, Unread: t.Unread}
	if t.CPU != nil {
		v := t.CPU.Seconds()
		j.CPUS = &v
	}
	return j
}

func atKillJSON(a *AtKill) *jsonAtKill {
	j := &jsonAtKill{Main: taskAtJSON(&a.Main), ThreadCount: a.ThreadCount, MoreThreads: a.MoreThreads, MoreChildren: a.MoreChildren,
		Verdict: textsafe.UTF8(a.Verdict)}
	for i := range a.Threads {
		j.Threads = append(j.Threads, taskAtJSON(&a.Threads[i]))
	}
	for i := range a.Children {
		j.Children = append(j.Children, taskAtJSON(&a.Children[i]))
	}
	if a.Since > 0 {
		v := a.Since.Seconds()
		j.SinceS = &v
	}
	return j
}

// jsonTraffic is Episode.Traffic. Every kind's count is an object (the
// event's form, sigvocab.NetCountJSON) or null when it is not known: all of
// them when the counts were not read (unread says why), refused when the
// kernel does not report refused attempts. lost is derived (Traffic.Lost),
// null when unread, and not read back.
type jsonTraffic struct {
	NetNS          uint32                 `json:"netns"`
	Since          string                 `json:"since,omitempty"`
	Until          string                 `json:"until,omitempty"`
	Accepted       *sigvocab.NetCountJSON `json:"accepted"`
	Closed         *sigvocab.NetCountJSON `json:"closed"`
	ResetSent      *sigvocab.NetCountJSON `json:"reset_sent"`
	ResetReceived  *sigvocab.NetCountJSON `json:"reset_received"`
	Cut            *sigvocab.NetCountJSON `json:"cut"`
	Refused        *sigvocab.NetCountJSON `json:"refused"`
	ListenerClosed *sigvocab.NetCountJSON `json:"listener_closed"`
	// The kinds that tell who spoke last: null where the counts do not
	// (Traffic.SeesLastSpeaker), as in a journal line written before them.
	Unanswered *sigvocab.NetCountJSON `json:"unanswered"`
	AfterClose *sigvocab.NetCountJSON `json:"after_close"`
	IdleAtExit *sigvocab.NetCountJSON `json:"idle_at_exit"`
	Undecided  *sigvocab.NetCountJSON `json:"undecided"`
	// The namespace's own calls (Traffic.Outbound says whose): null as
	// the kinds above.
	OutRefused  *sigvocab.NetCountJSON `json:"out_refused"`
	OutReset    *sigvocab.NetCountJSON `json:"out_reset"`
	SelfRefused *sigvocab.NetCountJSON `json:"self_refused"`
	Lost        *uint64                `json:"lost"`
	// MaybeLost is derived (Traffic.MaybeLost) like lost; omitted when 0.
	MaybeLost uint64 `json:"maybe_lost,omitempty"`
	// Probes are the kubelet's probes' connections by kind, the kinds
	// that are not 0 (Traffic.Probes); omitted when they were not told
	// apart, {} when there were none.
	Probes *map[string]uint64 `json:"probes,omitempty"`
	// SeesData and LastData are Traffic's (last_data omitted when zero).
	SeesData bool   `json:"sees_data,omitempty"`
	LastData string `json:"last_data,omitempty"`
	// LastRequest is derived (Episode.Lag), not read back; omitted when
	// no client request was counted.
	LastRequest *jsonLag `json:"last_request,omitempty"`
	// Peers is who was hurt (Traffic.Peers); omitted when the kernel kept
	// none.
	Peers   *jsonPeers `json:"peers,omitempty"`
	Verdict string     `json:"verdict"`
	Hint    string     `json:"hint,omitempty"`
	Unread  string     `json:"unread,omitempty"`
	// Scope is derived (the episode's container is a pod's), not read
	// back: "pod" when the counts are the pod's network namespace's,
	// shared by its containers (a sidecar's connections among them);
	// "node" when the container shares the node's namespace and nothing
	// was counted (unread says so).
	Scope string `json:"scope,omitempty"`
	// Own and Others split the counts by socket cgroup (Traffic.Own);
	// omitted when unknown, and own_unknown says why.
	Own        *jsonSplit `json:"own,omitempty"`
	Others     *jsonSplit `json:"others,omitempty"`
	OwnUnknown string     `json:"own_unknown,omitempty"`
}

// jsonSplit is one side of Traffic's split: each kind a socket can have
// (refused attempts have none).
type jsonSplit struct {
	Accepted       uint64 `json:"accepted"`
	Closed         uint64 `json:"closed"`
	ResetSent      uint64 `json:"reset_sent"`
	ResetReceived  uint64 `json:"reset_received"`
	Cut            uint64 `json:"cut"`
	ListenerClosed uint64 `json:"listener_closed"`
	// Where the counts tell who spoke last; omitted where they do not.
	Unanswered  *uint64 `json:"unanswered,omitempty"`
	AfterClose  *uint64 `json:"after_close,omitempty"`
	IdleAtExit  *uint64 `json:"idle_at_exit,omitempty"`
	Undecided   *uint64 `json:"undecided,omitempty"`
	OutRefused  *uint64 `json:"out_refused,omitempty"`
	OutReset    *uint64 `json:"out_reset,omitempty"`
	SelfRefused *uint64 `json:"self_refused,omitempty"`
}

func (j *jsonSplit) kinds() map[sigvocab.NetKind]*uint64 {
	return map[sigvocab.NetKind]*uint64{sigvocab.NetAccepted: &j.Accepted, sigvocab.NetClosed: &j.Closed, sigvocab.NetResetSent: &j.ResetSent,
		sigvocab.NetResetReceived: &j.ResetReceived, sigvocab.NetCut: &j.Cut, sigvocab.NetListenerClosed: &j.ListenerClosed}
}

func (j *jsonSplit) lastSpeakerKinds() map[sigvocab.NetKind]**uint64 {
	return map[sigvocab.NetKind]**uint64{sigvocab.NetUnanswered: &j.Unanswered, sigvocab.NetAfterClose: &j.AfterClose,
		sigvocab.NetIdleAtExit: &j.IdleAtExit, sigvocab.NetUndecided: &j.Undecided, sigvocab.NetOutRefused: &j.OutRefused,
		sigvocab.NetOutReset: &j.OutReset, sigvocab.NetSelfRefused: &j.SelfRefused}
}

func splitJSON(n *[sigvocab.NumNetKinds]uint64, lastSpeaker bool) *jsonSplit {
	if n == nil {
		return nil
	}
	j := &jsonSplit{}
	for k, dst := range j.kinds() {
		*dst = n[k]
	}
	if lastSpeaker {
		for k, dst := range j.lastSpeakerKinds() {
			*dst = &n[k]
		}
	}
	return j
}

// counts are j's kinds in NetKind order.
func (j *jsonTraffic) counts() [sigvocab.NumNetKinds]**sigvocab.NetCountJSON {
	return [sigvocab.NumNetKinds]**sigvocab.NetCountJSON{&j.Accepted, &j.Closed, &j.ResetSent, &j.ResetReceived, &j.Cut, &j.Refused, &j.ListenerClosed,
		&j.Unanswered, &j.AfterClose, &j.IdleAtExit, &j.Undecided, &j.OutRefused, &j.OutReset, &j.SelfRefused}
}

func trafficJSON(t *Traffic) *jsonTraffic {
	j := &jsonTraffic{NetNS: t.NetNS, Since: jsonTime(t.Since), Until: jsonTime(t.Until), Verdict: textsafe.UTF8(t.Verdict),
		Hint: textsafe.UTF8(t.Hint), Unread: textsafe.UTF8(t.Unread)}
	if t.Unread != "" {
		return j
	}
	j.Own, j.Others, j.OwnUnknown = splitJSON(t.Own, t.SeesLastSpeaker), splitJSON(t.Others, t.SeesLastSpeaker), textsafe.UTF8(t.OwnUnknown)
	for k, dst := range j.counts() {
		if !t.Known(sigvocab.NetKind(k)) {
			continue
		}
		c := &t.Counts[k]
		*dst = &sigvocab.NetCountJSON{N: c.N, First: jsonTime(c.First), Last: jsonTime(c.Last)}
	}
	lost := t.Lost()
	j.Lost, j.MaybeLost = &lost, t.MaybeLost()
	if t.Probes != nil {
		m := map[string]uint64{}
		for k, n := range t.Probes {
			if n > 0 {
				m[sigvocab.NetKind(k).String()] = n
			}
		}
		j.Probes = &m
	}
	j.SeesData, j.LastData = t.SeesData, jsonTime(t.LastData)
	j.Peers = peersJSON(t.Peers)
	return j
}

// jsonLag is Episode.Lag with the preStop sleep that would have covered
// it (Episode.CoveringPreStopSleep).
type jsonLag struct {
	At               string   `json:"at"`
	Kind             string   `json:"kind"`  // ArrivalKind
	Whole            bool     `json:"whole"` // every way a request comes was seen
	AfterBeginS      float64  `json:"after_begin_s"`
	AfterStopS       *float64 `json:"after_stop_s,omitempty"`
	AfterEndpointS   *float64 `json:"after_endpoint_left_s,omitempty"`
	Service          string   `json:"service,omitempty"`
	StillComing      bool     `json:"still_coming,omitempty"`
	CoveringPreStopS int      `json:"covering_prestop_sleep_s"`
	KubeletDelayS    *float64 `json:"kubelet_delay_s,omitempty"`
}

func lagJSON(ep *Episode) *jsonLag {
	l, ok := ep.Lag()
	if !ok {
		return nil
	}
	secs, _ := ep.CoveringPreStopSleep()
	j := &jsonLag{At: jsonTime(l.At), Kind: l.Kind.String(), Whole: l.Whole, AfterBeginS: l.AfterBegin.Seconds(),
		Service: textsafe.UTF8(l.Service), StillComing: l.StillComing, CoveringPreStopS: secs}
	if l.AfterStop != nil {
		j.AfterStopS = seconds(*l.AfterStop)
	}
	if l.AfterLeft != nil {
		j.AfterEndpointS = seconds(*l.AfterLeft)
	}
	if l.KubeletDelay > 0 {
		j.KubeletDelayS = seconds(l.KubeletDelay)
	}
	return j
}

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(sigvocab.TimeFormat)
}

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

func signalName(s sigvocab.Signal) string {
	if s == 0 {
		return ""
	}
	return s.String()
}

// fateWord writes a verdict; "" for none.
func fateWord(f sigvocab.Fate) string {
	if f == sigvocab.FateUnknown {
		return ""
	}
	return f.String()
}

func safeProc(p Proc) Proc {
	p.Comm = textsafe.UTF8(p.Comm)
	p.Runtime = langrt.Runtime(textsafe.UTF8(string(p.Runtime)))
	return p
}

func safeProcs(ps []Proc) []Proc {
	if ps == nil {
		return nil
	}
	out := make([]Proc, len(ps))
	for i, p := range ps {
		out[i] = safeProc(p)
	}
	return out
}

func safeSender(s *Sender) *Sender {
	if s == nil {
		return nil
	}
	out := *s
	out.Comm = textsafe.UTF8(s.Comm)
	out.Ancestors = nil
	for _, a := range s.Ancestors {
		out.Ancestors = append(out.Ancestors, Ancestor{PID: a.PID, Comm: textsafe.UTF8(a.Comm)})
	}
	return &out
}

// MarshalJSON writes the documented episode object. Untrusted strings are
// made valid UTF-8 with invalid bytes written as \xNN, as in the trace's
// JSON; encoding/json escapes their control characters.
func (ep Episode) MarshalJSON() ([]byte, error) {
	c := ep.Container
	c.Identity, c.NameUnknown = c.Identity.UTF8(), textsafe.UTF8(c.NameUnknown)
	j := jsonEpisode{
		ID:             ep.ID,
		Node:           textsafe.UTF8(ep.Node),
		Container:      c,
		Main:           safeProc(ep.Main),
		MainIsInit:     ep.MainIsInit,
		ForwardingInit: ep.ForwardingInit,
		Outcome:        ep.Outcome,
		Start:          jsonTime(ep.Start),
		StopSignal:     signalName(ep.StopSignal),
		StopSender:     safeSender(ep.StopSender),
		StopVerdict:    fateWord(ep.StopVerdict),
		StopAt:         jsonTime(ep.StopAt),
		ReraiseVerdict: fateWord(ep.ReraiseVerdict),
		KillSender:     safeSender(ep.KillSender),
		KillAt:         jsonTime(ep.KillAt),
		ExitAt:         jsonTime(ep.ExitAt),
		CascadeKills:   safeProcs(ep.CascadeKills),
		CascadeOmitted: ep.CascadeOmitted,
		EventsDropped:  ep.EventsDropped,
		StartUnseen:    ep.StartUnseen,
		TracedSince:    jsonTime(ep.TracedSince),
		OOMVictims:     safeProcs(ep.OOMVictims),
		Steps:          make([]jsonStep, len(ep.Steps)),
		StepsOmitted:   ep.StepsOmitted,
		Hint:           textsafe.UTF8(ep.Hint),
		StopReason:     ep.StopReason,
		NotLearnt:      ep.NotLearnt,
		Endpoints:      endpointsJSON(ep.Endpoints),
		EndpointRace:   textsafe.UTF8(ep.EndpointRace()),
	}
	if o := ep.Owner; o != nil {
		j.Owner = &Owner{Kind: textsafe.UTF8(o.Kind), Name: textsafe.UTF8(o.Name)}
	}
	if r := ep.Revision; r != nil {
		j.Revision = &Revision{Controller: textsafe.UTF8(r.Controller), Hash: textsafe.UTF8(r.Hash), Label: textsafe.UTF8(r.Label)}
	}
	if ep.Traffic != nil {
		j.Traffic = trafficJSON(ep.Traffic)
		j.Traffic.LastRequest = lagJSON(&ep)
		switch {
		case ep.Traffic.Shared():
			j.Traffic.Scope = "node"
		case ep.Container.Pod != "":
			j.Traffic.Scope = "pod"
		}
	}
	if ep.AtKill != nil {
		j.AtKill = atKillJSON(ep.AtKill)
	}
	if j.CascadeKills == nil {
		j.CascadeKills = []Proc{} // always a list, like an event's flags
	}
	if p := ep.PreStop; p != nil {
		j.PreStop = &jsonPreStop{Kind: p.Kind, StartAt: jsonTime(p.StartAt), EndAt: jsonTime(p.EndAt), ExitStatus: p.ExitStatus, Estimated: p.Estimated, FromAPI: p.FromAPI}
		for _, a := range p.Command {
			j.PreStop.Command = append(j.PreStop.Command, textsafe.UTF8(a))
		}
		if h := p.AtKill; h != nil {
			j.PreStop.AtKill = &jsonHookAt{Process: taskAtJSON(&h.Process), Verdict: h.Verdict}
			if h.Child != nil {
				c := taskAtJSON(h.Child)
				j.PreStop.AtKill.Child = &c
			}
		}
		if d, ok := p.Duration(ep.StopAt); ok {
			j.PreStop.Duration = seconds(d)
		}
	}
	if ep.GracePeriod > 0 {
		j.GracePeriod, j.GraceFrom = seconds(ep.GracePeriod), textsafe.UTF8(string(ep.GraceFrom))
	}
	if ep.StopTimeout > 0 {
		j.StopTimeout = seconds(ep.StopTimeout)
	}
	if d, ok := ep.KillAfter(); ok {
		j.KillAfter = seconds(d)
	}
	if d, ok := ep.ExitAfter(); ok {
		j.ExitAfter = seconds(d)
	}
	if d, ok := ep.StopDuration(); ok {
		j.StopDuration = seconds(d)
	}
	if !ep.ExitAt.IsZero() {
		st := ep.ExitStatus
		j.ExitStatus = &st
		j.ExitSignal = signalName(ep.ExitSignal)
	}
	for i := range ep.Steps {
		s := &ep.Steps[i]
		j.Steps[i] = jsonStep{
			At:      s.At.Seconds(),
			Time:    jsonTime(s.Time),
			Kind:    s.Kind,
			Signal:  signalName(s.Signal),
			Target:  safeProc(s.Target),
			Flags:   s.Flags.Words(),
			Verdict: fateWord(s.Verdict),
			Exit:    s.Exit,
			Text:    textsafe.UTF8(s.Text),
		}
		if s.Sender != nil {
			snd := safeProc(*s.Sender)
			j.Steps[i].Sender = &snd
		}
	}
	return json.Marshal(&j)
}
