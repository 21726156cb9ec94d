package timeline

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Exec sessions are processes that entered a container from outside and
// ran a program there (runc exec): a Kubernetes exec preStop hook, kubectl
// exec, an exec probe. A preStop hook runs before the stop signal, so the
// sessions of a container with no episode yet are kept (a few per
// container, for a bounded number of containers) until a stop begins.
const (
	execsPerContainer = 4
	// execWindow: a session that ended this long before a stop began is
	// still part of it. The kubelet sends StopContainer right after the
	// hook returns; runc's stop signal follows within milliseconds.
	execWindow = time.Second
)

// execSession is one exec into a container.
type execSession struct {
	proc   Proc
	parent Proc
	start  time.Time
	end    time.Time // zero while it runs
	exit   int       // with end: the status as a runtime reports it
	signal sigvocab.Signal
}

// execs keeps the recent sessions of containers with no open episode (at
// most execsPerContainer each, oldest first), least recently used out
// first past Options.MaxOpen containers.
type execs struct {
	logs *simplelru.LRU[epKey, []execSession]
}

func newExecs(max int) execs { return execs{logs: newLRU[epKey, []execSession](max)} }

// note records an exec into key's container (a session begins) or the
// exit of one of its processes (the session it was, if any, ends).
func (x *execs) note(key epKey, ev *sigvocab.Event) {
	if ev.Kind == sigvocab.KindExec {
		x.add(key, sessionOf(ev))
	} else {
		x.ended(key, ev)
	}
}

func (x *execs) add(key epKey, s execSession) {
	l, _ := x.logs.Get(key)
	if len(l) == execsPerContainer {
		l = append(l[:0], l[1:]...)
	}
	x.logs.Add(key, append(l, s))
}

// ended records the end of a session, when ev's process was one of key's.
func (x *execs) ended(key epKey, ev *sigvocab.Event) {
	l, _ := x.logs.Peek(key)
	endSession(l, ev)
}

// endSession records ev, an exit, as the end of the running session of
// its process among l; false when it is none of them.
func endSession(l []execSession, ev *sigvocab.Event) bool {
	for i := range l {
		if s := &l[i]; s.proc.PID == ev.Target.PID && s.end.IsZero() {
			s.end, s.exit, s.signal = ev.Time, exitStatus(ev), ev.Signal
			return true
		}
	}
	return false
}

// take removes key's sessions that belong to a stop beginning at t: still
// running, or ended at most execWindow before.
func (x *execs) take(key epKey, t time.Time) []execSession {
	l, ok := x.logs.Peek(key)
	if !ok {
		return nil
	}
	x.logs.Remove(key)
	var out []execSession
	for _, s := range l {
		if s.end.IsZero() || !s.end.Before(t.Add(-execWindow)) {
			out = append(out, s)
		}
	}
	return out
}

// sessionOf is the session a process that entered its container from
// outside begins.
func sessionOf(ev *sigvocab.Event) execSession {
	return execSession{proc: proc(&ev.Target), parent: proc(&ev.Sender), start: ev.Time}
}

// PreStop is a container's preStop hook as the stop showed it.
type PreStop struct {
	Kind    string   // "exec", "http", "sleep"
	Command []string // exec: the command, from the kubelet's annotation
	// StartAt and EndAt are the hook process's start and end (exec);
	// EndAt is zero when it was still running at the stop signal.
	StartAt, EndAt time.Time
	ExitStatus     *int // exec, when it ended: code, or 128+signal
	// Estimated: for an http or sleep hook the kernel sees nothing; its
	// time is what the grace period left to the stop signal.
	Estimated bool
	// FromAPI: an http or sleep hook's start is the pod's deletion as
	// this process's informer saw it, a watch's delay after the API
	// server's (the kubelet starts the hook on the same update).
	FromAPI bool
	// AtKill is what an exec hook's process was doing when the SIGKILL
	// came, still running (prestop_timeout); nil when it had ended or the
	// kernel read nothing.
	AtKill *HookAt
}

// HookAt is the kernel's reading of an exec preStop hook's process at the
// SIGKILL (a blocked record of role exec), with one of its children.
type HookAt struct {
	Process TaskAt
	Child   *TaskAt // the child it waited for, or its first; nil: none read
	Verdict string  // the words: what it was doing, in a sentence
}

// exec adds a session's start to the episode, and its end when it has
// ended; the session is the preStop hook when the container has an exec
// preStop and it is the session that ran just before the stop.
func (ep *episode) exec(s execSession) {
	ep.execs = append(ep.execs, s)
	parent := s.parent
	f := stepFacts{event: sigvocab.KindExec, hook: ep.isHookSession(s), by: &parent}
	ep.add(Step{Time: s.start, Kind: StepExec, Target: s.proc, facts: f}, false)
	if !s.end.IsZero() {
		st := s.exit
		f.status, f.began = st, s.start
		ep.add(Step{Time: s.end, Kind: StepProcessExit, Signal: s.signal, Target: s.proc, Exit: &st, facts: f}, false)
	}
}

// isHookSession reports whether s looks like the exec preStop hook: its
// program is the hook command's (the kernel keeps 15 bytes of the name).
func (ep *episode) isHookSession(s execSession) bool {
	return ep.hook.RunsAs(s.proc.Comm)
}

// execEnded records the end of one of the episode's exec sessions; false
// when pid is none of them.
func (ep *episode) execEnded(ev *sigvocab.Event) bool { return endSession(ep.execs, ev) }

// hookSeen is the least time between a count's beginning and the stop
// signal that is taken for a sleep or httpGet hook's run: a pod's other
// container's stop signal begins the shared count milliseconds earlier.
const hookSeen = 200 * time.Millisecond

// preStop decides the episode's preStop from its container's hook and the
// exec sessions: for an exec hook, the last matching session that started
// before the stop signal.
func (ep *episode) preStop() *PreStop {
	h := ep.hook
	if h == nil {
		return nil
	}
	p := &PreStop{Kind: h.Kind, Command: h.Command}
	if t := ep.Traffic; h.Kind != "exec" && t != nil && ep.unread == countsRead && !t.Since.IsZero() && !ep.StopAt.IsZero() &&
		ep.StopAt.Sub(t.Since) >= hookSeen {
		// The connection count began at the hook's start as the agent saw
		// it: the pod's deletion, reported by the API server, on which the
		// kubelet starts the hook (pipeline.HookStarted). Observed, within
		// the watch's delay, not estimated.
		p.StartAt, p.EndAt, p.FromAPI = t.Since, ep.StopAt, true
		return p
	}
	if h.Kind != "exec" {
		// Nothing of it reaches the kernel: when the SIGKILL ended the
		// grace period, the hook took what the stop signal did not.
		if d, ok := ep.KillAfter(); ok && ep.StopTimeout > 0 {
			hook := max(ep.StopTimeout-d, 0) // the runtime's own delay can make it a little negative
			p.StartAt, p.EndAt, p.Estimated = ep.StopAt.Add(-hook), ep.StopAt, true
		}
		return p
	}
	if s := ep.hookSession(); s != nil {
		p.StartAt = s.start
		if !s.end.IsZero() && (ep.StopAt.IsZero() || !s.end.After(ep.StopAt)) {
			st := s.exit
			p.EndAt, p.ExitStatus = s.end, &st
		}
		p.AtKill = ep.hookAt
	}
	return p
}

// hookSession is the exec preStop hook's session: the last one running
// the hook's program that started before the stop signal; nil for none.
func (ep *episode) hookSession() *execSession {
	if ep.hook == nil || ep.hook.Kind != "exec" {
		return nil
	}
	for i := len(ep.execs) - 1; i >= 0; i-- {
		s := &ep.execs[i]
		if ep.isHookSession(*s) && (ep.StopAt.IsZero() || !s.start.After(ep.StopAt)) {
			return s
		}
	}
	return nil
}

// Duration is how long the hook ran: to its end, or to the stop signal
// when it was still running then; false when unknown.
func (p *PreStop) Duration(stopAt time.Time) (time.Duration, bool) {
	switch {
	case p == nil || p.StartAt.IsZero():
		return 0, false
	case !p.EndAt.IsZero():
		return p.EndAt.Sub(p.StartAt), true
	case !stopAt.IsZero():
		return stopAt.Sub(p.StartAt), true
	}
	return 0, false
}

// timedOut reports whether the hook used up the grace period: an exec hook
// still running at the stop signal, or (http, sleep) a grace period longer
// than the kubelet's 2 s minimum.
//
// Either way the SIGKILL came within the kubelet's minimum of the stop
// signal: an exec hook whose end was merely not recorded (a lost event)
// with grace left over is not taken for a timeout.
func (p *PreStop) timedOut(ep *Episode) bool {
	d, ok := ep.KillAfter()
	if p == nil || !ok || d >= 2500*time.Millisecond {
		return false
	}
	if p.Kind == "exec" {
		return !p.StartAt.IsZero() && p.EndAt.IsZero()
	}
	return ep.StopTimeout >= 3*time.Second
}
