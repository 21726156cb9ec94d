package timeline

import "github.com/sigscope/sigscope/tracer/sigvocab"

// Applying: an episode takes an event that route placed in it, changes its
// state, records the step's facts (no prose: the words write it at
// completion), and says what the engine must do next. It knows nothing of
// the engine, its indexes or its clock.

// effect is what applying an event asks of the engine, which alone keeps
// the deadlines.
type effect uint8

const (
	noEffect    effect = iota
	settleAfter        // complete Settle after the event, or at a later deadline it has
	awaitMain          // no deadline: only the main process's end (or Flush) completes it
	completeNow        // nothing of it can come later
)

// apply records ev, whose role in the episode is r. A new stop pattern is
// a case here, and its sentence in the words (words.go).
func (ep *episode) apply(ev *sigvocab.Event, r role) effect {
	if ev.Kind != sigvocab.KindNet && ev.Kind != sigvocab.KindBlocked && ev.Time.After(ep.lastAt) {
		ep.lastAt = ev.Time
	}
	switch ev.Kind {
	case sigvocab.KindGenerate:
		if r.as == member {
			ep.watchNet(ev)
		}
		switch {
		case r.as == cascadeSent:
			ep.cascadeKill(ev)
		case r.as == cascadeReceived:
			ep.cascadeVictim(ev)
		case r.as == sandboxEnd:
			ep.sandbox(ev)
		case r.stop && !ep.killed && !ep.exited:
			ep.stopSignal(ev)
		case ev.Signal == sigvocab.SIGKILL:
			ep.sigkill(ev, r.main)
		case r.main && ep.isReraise(ev):
			ep.reraise(ev)
		case ep.mainKnown && ev.Sender.PID == ep.Main.PID && !r.main:
			ep.forward(ev)
		default:
			ep.signal(ev)
		}
		if (r.stop || r.kill) && !ep.exited {
			return awaitMain // an OOM episode now waits for the main process's end
		}
	case sigvocab.KindDeliver:
		ep.deliver(ev, r.main, r.stop)
	case sigvocab.KindExit:
		switch {
		case r.as == sandboxEnd:
			ep.sandbox(ev)
		case r.main:
			ep.mainExit(ev)
			return settleAfter
		default:
			ep.execEnded(ev)
			ep.processExit(ev)
			if ep.isVictim(ev.Target.PID) && !ep.waitsForMain() {
				return settleAfter // an OOM victim's death ends an episode whose main process lives on
			}
		}
	case sigvocab.KindOOM:
		ep.oomKill(ev, r.main)
		switch {
		case ep.exited:
		case ep.waitsForMain():
			return awaitMain
		default:
			// Another process was the victim and the main process lives
			// on: the episode ends with the victim's death (its exit
			// extends this deadline), or with the main process's if that
			// comes first.
			return settleAfter
		}
	case sigvocab.KindExec:
		ep.exec(sessionOf(ev))
	case sigvocab.KindNSEmpty:
		// A namespace init notifies its parent only after
		// zap_pid_ns_processes() has killed every other process of the
		// namespace and waited for each to be reaped, so every exit of
		// the namespace is already in the ring ahead of this record (the
		// ring keeps the order of reservation): the episode needs no
		// settle time. Without this record (a main process that is no
		// init, a lost record, an init with no exit signal) the settle
		// applies. So it does to a pod's container: what can still come
		// is the API server's word on why it stopped (the kubelet's
		// Killing event for a failed probe or an eviction), which the
		// annotation at completion reads and which can arrive after the
		// exit.
		if r.main && ep.exited && ep.Container.Pod == "" {
			return completeNow
		}
	case sigvocab.KindNet:
		if ep.connections(ev) {
			return completeNow
		}
	case sigvocab.KindBlocked:
		ep.taskReading(ev)
	}
	return noEffect
}

// watchNet records the network namespace of the container from the first
// signal to one of its processes that the kernel watched: a stop signal
// (or SIGKILL) sent from another namespace, from which on the kernel counts
// the namespace's connections. The episode then waits for the counts
// before it completes (Engine.end).
//
// A stop signal flagged net_shared came from the runtime in the
// container's own network namespace: the container shares it (the node's,
// with --network host or hostNetwork), its connections are not its own,
// and the kernel counted none of them; the traffic says so.
func (ep *episode) watchNet(ev *sigvocab.Event) {
	switch {
	case ev.NetNS == 0:
	case ev.Flags.Has(sigvocab.FlagNetShared):
		if ep.netShared == 0 {
			ep.netShared = ev.NetNS
		}
	case ep.netns == 0:
		ep.netns = ev.NetNS
	}
}

// connections takes the kernel's counts of the episode's network
// namespace, read at ev.Time; the latest read stands. They complete an
// episode that waits for them and was due to be read by then; one whose
// stop goes on keeps them in case the trace ends first (Flush).
func (ep *episode) connections(ev *sigvocab.Event) bool {
	ep.conns, ep.connsAt, ep.netAsked = *ev.Conns, ev.Time, false
	return ep.counted()
}

// stopSignal records a stop signal sent to the main process, and the
// kernel's verdict on it; the first is the stop's.
func (ep *episode) stopSignal(ev *sigvocab.Event) {
	first := ep.StopSignal == 0
	if first {
		ep.StopSignal, ep.StopAt, ep.StopSender = ev.Signal, ev.Time, sender(ev)
		ep.stopHandler, ep.stopBlocked = ev.Handler, ev.Flags.Has(sigvocab.FlagBlocked)
		ep.StopVerdict = ev.Fate
	}
	ep.add(ep.sentStep(ev, StepStopSignal), first)
	ep.add(ep.verdictStep(ev), first)
}

// deliver records what became of a signal a process dequeued: its handler
// ran (the main process acting on the stop signal), or the kernel dropped
// one that was blocked when it was sent.
func (ep *episode) deliver(ev *sigvocab.Event, main, stop bool) {
	switch {
	case ev.Fate == sigvocab.FateHandler:
		first := stop && !ep.handled
		if stop {
			ep.handled = true
			if ev.Signal == ep.StopSignal && (ep.StopVerdict == sigvocab.FateBlocked || ep.StopVerdict == sigvocab.FateAlreadyPending) {
				ep.StopVerdict = sigvocab.FateHandler // unblocked, then handled
			}
		}
		ep.add(ep.stepOf(ev, StepDeliver), first)
	case main && (ev.Fate == sigvocab.FateDroppedInit || ev.Fate == sigvocab.FateDroppedSigIgn):
		// The drop of a signal that was blocked at generation: the kernel
		// discards it when the init dequeues it (docs/kernel.md).
		s := ep.verdictStep(ev)
		first := stop && ev.Signal == ep.StopSignal && (ep.StopVerdict == sigvocab.FateBlocked || ep.StopVerdict == sigvocab.FateAlreadyPending)
		switch {
		case first:
			ep.StopVerdict = ev.Fate
		case ep.reraised && ev.Signal == ep.StopSignal && (ep.ReraiseVerdict == sigvocab.FateBlocked || ep.ReraiseVerdict == sigvocab.FateAlreadyPending):
			// A handler raises its own signal while the kernel keeps
			// it blocked (no SA_NODEFER): the re-raise is queued, and
			// dropped when the handler returns and unblocks it.
			ep.ReraiseVerdict = ev.Fate
			first, s.facts.reraise = true, true
		}
		ep.add(s, first)
	}
}

// sigkill records a SIGKILL; the first delivered to the main process is
// the one the outcome is read against.
func (ep *episode) sigkill(ev *sigvocab.Event, main bool) {
	delivered := ev.Result == sigvocab.ResultDelivered
	first := main && delivered && !ep.killed
	if first {
		ep.killed, ep.KillAt, ep.KillSender = true, ev.Time, sender(ev)
		ep.killKernel = ev.Code == sigvocab.CodeKernel
	}
	ep.add(ep.sentStep(ev, StepSIGKILL), first)
}

// reraise records the main process sending its stop signal to itself
// again after its handler ran, with the default action now: what Node.js's
// and the Go runtime's default handlers do to die of the signal. A
// namespace init cannot die so: the kernel drops it (FateDroppedInit), and
// the stop then waits for the SIGKILL unless the process exits by itself
// (the Go runtime exits 2 at once).
func (ep *episode) reraise(ev *sigvocab.Event) {
	first := !ep.reraised
	if first {
		ep.reraised, ep.ReraiseVerdict = true, ev.Fate
	}
	ep.add(ep.sentStep(ev, StepReraise), first)
	s := ep.verdictStep(ev)
	s.facts.reraise = true
	ep.add(s, first)
}

// isReraise reports whether ev is the main process sending its stop signal
// to itself with the default action after the stop signal reached its
// handler (or found one installed): a one-shot handler that restores the
// default and raises again.
func (ep *episode) isReraise(ev *sigvocab.Event) bool {
	return ep.mainKnown && ep.stopped() && !ep.killed && !ep.exited &&
		ev.Sender.PID == ep.Main.PID && ev.Target.PID == ep.Main.PID &&
		ev.Signal == ep.StopSignal && ev.Handler == sigvocab.DispDefault &&
		(ep.handled || ep.stopHandler == sigvocab.DispHandler)
}

// forward records the main process passing a signal on to another process
// after the stop: what an init such as tini, dumb-init or a shell trap
// does. It counts as acting on the stop signal.
func (ep *episode) forward(ev *sigvocab.Event) {
	if !ep.stopped() || ep.killed || ev.Signal == sigvocab.SIGKILL {
		ep.signal(ev)
		return
	}
	first := !ep.forwarded
	ep.forwarded = true
	ep.add(ep.sentStep(ev, StepForward), first)
}

// signal records any other signal to a process of the namespace: a repeated
// stop signal, a reload, an init forwarding the stop signal to its children.
func (ep *episode) signal(ev *sigvocab.Event) {
	ep.add(ep.sentStep(ev, StepSignal), false)
}

// cascadeKill records a SIGKILL that the episode's exiting init sent to
// another process of its namespace.
func (ep *episode) cascadeKill(ev *sigvocab.Event) {
	p := proc(&ev.Target)
	if len(ep.CascadeKills) < ep.limit {
		ep.CascadeKills = append(ep.CascadeKills, p)
	} else {
		ep.CascadeOmitted++
	}
	ep.add(ep.sentStep(ev, StepCascadeKill), false)
}

// cascadeVictim shows, in the episode of a process's own container, the
// cascade SIGKILL that another container's init sent it.
func (ep *episode) cascadeVictim(ev *sigvocab.Event) {
	s := ep.sentStep(ev, StepCascadeKill)
	s.facts.victim = true
	ep.add(s, false)
}

// sandbox shows the end of the pod's sandbox (pause) container: its
// SIGKILL, or its exit.
func (ep *episode) sandbox(ev *sigvocab.Event) {
	s := ep.stepOf(ev, StepSandbox)
	by := proc(&ev.Sender)
	s.facts.by, s.facts.status, s.facts.core = &by, exitStatus(ev), ev.CoreDumped
	ep.add(s, false)
}

// oomKill records the OOM killer's choice of victim: one that comes before
// any stop, or the main process, decides the outcome.
func (ep *episode) oomKill(ev *sigvocab.Event, main bool) {
	first := len(ep.OOMVictims) == 0
	if first && !ep.stopped() && !ep.killed && !ep.exited {
		ep.oomFirst = true
	}
	firstInit := main && !ep.oomMain
	if main {
		ep.oomMain = true
	}
	s := ep.stepOf(ev, StepOOMKill)
	s.Signal = 0 // the victim's SIGKILL is its own event
	if len(ep.OOMVictims) < ep.limit || firstInit {
		ep.OOMVictims = append(ep.OOMVictims, s.Target)
	}
	ep.add(s, first || firstInit)
}

// processExit records the end of a process other than the main one.
func (ep *episode) processExit(ev *sigvocab.Event) {
	ep.add(ep.exitStep(ev, StepProcessExit), false)
}

// mainExit records the main process's end: the last thing the episode
// waits for.
func (ep *episode) mainExit(ev *sigvocab.Event) {
	st := exitStatus(ev)
	ep.exited, ep.ExitAt, ep.ExitStatus = true, ev.Time, st
	if ev.Signaled() {
		ep.ExitSignal = ev.Signal
	}
	ep.add(ep.exitStep(ev, StepMainExit), true)
}

// add appends a step. Minor steps past the limit are only counted, so an
// episode stays bounded whatever the container does; the few steps that
// decide the outcome are always kept.
func (ep *episode) add(s Step, important bool) {
	if !important && len(ep.Steps) >= ep.limit {
		ep.StepsOmitted++
		return
	}
	s.At = s.Time.Sub(ep.Start)
	ep.Steps = append(ep.Steps, s)
}

// stepOf is a step with what every step takes from its event: the
// exported fields, and the facts its sentence will need.
func (ep *episode) stepOf(ev *sigvocab.Event, kind StepKind) Step {
	snd := &ev.Sender
	return Step{Time: ev.Time, Kind: kind, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags, facts: stepFacts{
		event: ev.Kind, result: ev.Result, fate: ev.Fate, handler: ev.Handler, kernel: ev.Code == sigvocab.CodeKernel,
		inside:   snd.PidNS == ev.Target.PidNS && snd.PidNS != sigvocab.HostPidNS && !ev.Flags.Has(sigvocab.FlagCrossNS),
		mainInit: ep.initLike(),
	}}
}

// sentStep is the step of a sent signal: with its sender.
func (ep *episode) sentStep(ev *sigvocab.Event, kind StepKind) Step {
	s := ep.stepOf(ev, kind)
	snd := proc(&ev.Sender)
	s.Sender = &snd
	return s
}

// verdictStep is a kernel_verdict step: what the kernel did with ev's signal.
func (ep *episode) verdictStep(ev *sigvocab.Event) Step {
	s := ep.stepOf(ev, StepKernelVerdict)
	s.Verdict = ev.Fate
	return s
}

// exitStep is the step of a process's end, with its status.
func (ep *episode) exitStep(ev *sigvocab.Event, kind StepKind) Step {
	s := ep.stepOf(ev, kind)
	st := exitStatus(ev)
	s.Exit, s.facts.status, s.facts.core = &st, st, ev.CoreDumped
	return s
}

// proc is what an episode keeps of a process an event names.
func proc(p *sigvocab.Process) Proc {
	return Proc{PID: p.PID, NsPID: p.NsPID, Comm: p.Comm.String()}
}

// sender is who sent the signal that counts, with its ancestry: what a
// reader needs to tell runc from the kubelet or a script.
func sender(ev *sigvocab.Event) *Sender {
	s := &Sender{PID: ev.Sender.PID, Comm: ev.Sender.Comm.String(), Kernel: ev.Code == sigvocab.CodeKernel}
	for _, a := range ev.SenderAncestors() {
		s.Ancestors = append(s.Ancestors, Ancestor{PID: a.PID, Comm: a.Comm.String()})
	}
	return s
}

// exitStatus is the status a container runtime reports: the exit code, or
// 128 + the signal that killed the process.
func exitStatus(ev *sigvocab.Event) int {
	if ev.Signaled() {
		return 128 + int(ev.Signal)
	}
	return ev.ExitCode
}
