package timeline

import (
	"github.com/sigscope/sigscope/container/identity"
	"github.com/sigscope/sigscope/internal/sigvocab"
)

// The engine's handling of each kind of event (Engine.Add dispatches here),
// and the queue of episodes waiting for their settle deadline.

// isStopSignal reports whether sig, sent to a main process from outside,
// is a request to stop: the container's configured stop signal when the
// runtime said, else SIGTERM (the runtimes' default), SIGINT or SIGQUIT
// (the usual STOPSIGNAL choices). Other signals (SIGHUP, SIGUSR1: reloads;
// SIGWINCH from a terminal resize) begin no episode.
func isStopSignal(sig sigvocab.Signal, c *identity.Info, ep *episode) bool {
	switch sig {
	case 0, sigvocab.SIGKILL, sigvocab.SIGSTOP:
		return false
	}
	if c != nil && c.StopSignal != 0 && c.StopSignal == sig || ep != nil && ep.configuredStop == sig {
		return true
	}
	return sig == sigvocab.SIGTERM || sig == sigvocab.SIGINT || sig == sigvocab.SIGQUIT
}

func (e *Engine) addGenerate(ev *sigvocab.Event, c *identity.Info, out *[]Episode) {
	if ev.Signal == sigvocab.SIGCHLD {
		return // every exit sends one to its parent: noise in a stop story
	}
	if ev.Flags.Has(sigvocab.FlagNSCascade) {
		e.addCascade(ev, c)
		return
	}
	t := &ev.Target
	if !tracked(t, c) {
		return
	}
	main := isMain(t, c)
	if c != nil && c.Sandbox {
		if main && ev.Signal == sigvocab.SIGKILL && ev.Result == sigvocab.ResultDelivered {
			e.sandboxStep(ev, c)
		}
		return
	}
	ep := e.episodeOf(t, c, main, out)
	// A stop comes from outside: for an init, from outside its namespace
	// (the kernel's own test, cross_ns). A main process that is no init
	// shares its namespace with other containers or the host; runc on the
	// host is still cross_ns there, except in the host's namespace, where
	// any other sender counts.
	stop := main && isStopSignal(ev.Signal, c, ep) &&
		(ev.Flags.Has(sigvocab.FlagCrossNS) || t.NsPID != 1 && ev.Sender.PID != t.PID)
	kill := main && ev.Signal == sigvocab.SIGKILL && ev.Result == sigvocab.ResultDelivered
	if ep == nil {
		// A signal to a process already gone (a zombie not yet reaped: a
		// runtime's late stop or kill) begins nothing: its end was seen,
		// and its episode may have completed at once (addNSEmpty).
		if !stop && !kill || ev.Flags.Has(sigvocab.FlagTargetGone) {
			return
		}
		ep = e.begin(t, c, ev.Time)
	}
	ep.noteInfo(c, main)
	if main {
		e.noteMain(ep, t)
	}
	switch {
	case stop && !ep.killed && !ep.exited:
		ep.stopSignal(ev, e.opts.MaxSteps)
	case ev.Signal == sigvocab.SIGKILL:
		ep.sigkill(ev, main, e.opts.MaxSteps)
	case main && ep.isReraise(ev):
		ep.reraise(ev, e.opts.MaxSteps)
	case ep.mainKnown && ev.Sender.PID == ep.Main.PID && !main:
		ep.forward(ev, e.opts.MaxSteps)
	default:
		ep.signal(ev, e.opts.MaxSteps)
	}
	if (stop || kill) && !ep.exited {
		e.unsettle(ep) // an OOM episode now waits for the main process's end
	}
}

// addCascade places a SIGKILL of the namespace cascade: it belongs to the
// episode of the init whose exit sent it, and is shown in the victim's
// container's episode too when that is another (a pod sharing one pid
// namespace, whose init is the sandbox's pause).
func (e *Engine) addCascade(ev *sigvocab.Event, c *identity.Info) {
	ep := e.byMain[ev.Sender.PID]
	if ep == nil {
		ep = e.byNS[ev.Sender.PidNS]
	}
	if ep == nil {
		ep = e.open[epKey{ns: ev.Sender.PidNS}]
	}
	if ep != nil {
		ep.cascadeKill(ev, e.opts.MaxSteps)
	}
	if c == nil || c.Sandbox {
		return
	}
	if victim := e.open[keyOf(c, &ev.Target)]; victim != nil && victim != ep {
		victim.cascadeVictim(ev, e.opts.MaxSteps)
	}
}

// sandboxStep shows the end of a pod's sandbox (pause) container in the
// episodes of its pod's containers still open: the last step of the pod's
// teardown, never an episode of its own.
func (e *Engine) sandboxStep(ev *sigvocab.Event, c *identity.Info) {
	e.stats.SandboxStops++
	if c.Pod == "" {
		return
	}
	for el := e.order.Front(); el != nil; el = el.Next() {
		ep := el.Value.(*episode)
		if ep.Container.Pod == c.Pod && ep.Container.Namespace == c.Namespace {
			ep.sandbox(ev, e.opts.MaxSteps)
		}
	}
}

func (e *Engine) addDeliver(ev *sigvocab.Event, c *identity.Info) {
	t := &ev.Target
	if ev.Signal == sigvocab.SIGCHLD || !tracked(t, c) || c != nil && c.Sandbox {
		return
	}
	ep := e.open[keyOf(c, t)]
	if ep == nil && c == nil {
		if ep = e.byMain[t.PID]; ep == nil {
			ep = e.byNS[t.PidNS]
		}
	}
	if ep == nil {
		return
	}
	main := ep.mainKnown && ep.Main.PID == t.PID || !ep.mainKnown && isMain(t, c)
	ep.deliver(ev, main, main && isStopSignal(ev.Signal, c, ep), e.opts.MaxSteps)
}

func (e *Engine) addExit(ev *sigvocab.Event, c *identity.Info, out *[]Episode) {
	t := &ev.Target
	if !tracked(t, c) {
		return
	}
	main := isMain(t, c)
	if c != nil && c.Sandbox {
		if main {
			e.sandboxStep(ev, c)
		}
		return
	}
	ep := e.episodeOf(t, c, main, out)
	if ep != nil && !main && ep.mainKnown && ep.Main.PID == t.PID {
		main = true // its container is no longer resolvable, its episode knows it
	}
	if !main {
		if ep == nil {
			e.execs.ended(keyOf(c, t), ev)
		}
		if ep != nil {
			ep.noteInfo(c, false)
			ep.execEnded(ev)
			ep.processExit(ev, e.opts.MaxSteps)
			if ep.isVictim(t.PID) && !ep.waitsForMain() {
				e.settle(ep, ev.Time.Add(e.opts.Settle))
			}
		}
		return
	}
	if ep == nil {
		ep = e.begin(t, c, ev.Time)
	} else if ep.exited {
		return // the same main process's exit twice: nothing new
	}
	ep.noteInfo(c, true)
	e.noteMain(ep, t)
	ep.mainExit(ev)
	e.settle(ep, ev.Time.Add(e.opts.Settle))
}

// addNSEmpty completes the episode of a namespace init that has exited
// once the kernel says its namespace is empty: the init notifies its parent
// only after zap_pid_ns_processes() has killed every other process of the
// namespace and waited for each to be reaped, so every exit of the
// namespace is already in the ring ahead of this record (the ring keeps the
// order of reservation). Nothing of the namespace can arrive later: the
// episode needs no settle time. Without this record (a main process that is
// no init, a lost record, an init with no exit signal) the settle applies.
// So it does to a pod's container: what can still come is the API server's
// word on why it stopped (the kubelet's Killing event for a failed probe or
// an eviction), which the annotation at completion reads and which can
// arrive after the exit.
func (e *Engine) addNSEmpty(ev *sigvocab.Event, out *[]Episode) {
	t := &ev.Target
	ep := e.byNS[t.PidNS]
	if ep == nil || !ep.exited || !ep.mainKnown || ep.Main.PID != t.PID || ep.Container.Pod != "" {
		return
	}
	e.complete(ep, out)
}

// addOOM takes the oom:mark_victim event, which follows the OOM killer's
// SIGKILL to the victim. A victim whose namespace the tracer could not learn
// (PidNS 0: the tracepoint gave only a thread id and /proc had no entry left)
// and whose container is unknown cannot be placed and is skipped.
func (e *Engine) addOOM(ev *sigvocab.Event, c *identity.Info, out *[]Episode) {
	t := &ev.Target
	if !tracked(t, c) || c != nil && c.Sandbox {
		return
	}
	main := isMain(t, c)
	ep := e.episodeOf(t, c, main, out)
	if ep == nil {
		ep = e.begin(t, c, ev.Time)
	}
	ep.noteInfo(c, main)
	if main {
		e.noteMain(ep, t)
	}
	ep.oomKill(ev, main, e.opts.MaxSteps)
	switch {
	case ep.exited:
	case ep.waitsForMain():
		e.unsettle(ep)
	default:
		// Another process was the victim and the main process lives on:
		// the episode ends with the victim's death (its exit extends this
		// deadline), or with the main process's if that comes first.
		e.settle(ep, ev.Time.Add(e.opts.Settle))
	}
}

// settleQueue is a min-heap of episodes by deadline.
type settleQueue []*episode

func (q settleQueue) Len() int           { return len(q) }
func (q settleQueue) Less(i, j int) bool { return q[i].deadline.Before(q[j].deadline) }
func (q settleQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIdx = i
	q[j].heapIdx = j
}
func (q *settleQueue) Push(x any) {
	ep := x.(*episode)
	ep.heapIdx = len(*q)
	*q = append(*q, ep)
}
func (q *settleQueue) Pop() any {
	old := *q
	ep := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	ep.heapIdx = -1
	return ep
}
