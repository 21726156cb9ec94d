package timeline

import (
	"container/list"
	"slices"
	"time"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/internal/langrt"
	"github.com/sigscope/sigscope/internal/sigvocab"
)

// episode is an Episode in progress, with the facts its outcome is decided on.
type episode struct {
	Episode

	key      epKey
	elem     *list.Element // in Engine.order
	heapIdx  int           // in Engine.settling; -1 when it has no deadline
	deadline time.Time

	hook  *container.Hook // the container's preStop hook, nil: none
	execs []execSession   // exec sessions in the container during the stop

	hasInfo        bool
	infoFromInit   bool
	configuredStop sigvocab.Signal // the container's StopSignal, 0 when not configured
	graceSource    string          // "kubernetes", "docker" or "": which knob sets StopTimeout
	infoRuntime    langrt.Runtime  // the resolver's reading of the main process's executable

	mainKnown   bool
	mainNS      uint32               // the main process's pid namespace, once known
	stopHandler sigvocab.Disposition // the main process's disposition for the first stop signal when it was sent
	stopBlocked bool                 // the main process had the first stop signal blocked when it was sent
	handled     bool                 // a stop signal reached a handler in the main process
	reraised    bool                 // after its handler ran, the main process sent the stop signal to itself with the default action
	forwarded   bool                 // after the stop signal, the main process signalled another process
	killed      bool                 // a SIGKILL was delivered to the main process
	killKernel  bool                 // that SIGKILL was raised by the kernel (SI_KERNEL), e.g. the OOM killer
	exited      bool                 // the main process's exit was seen
	oomFirst    bool                 // an OOM kill came before any stop signal, SIGKILL or exit
	oomMain     bool                 // the OOM killer picked the main process
}

// stopped reports whether a stop signal counts: one dropped because PID 1
// was already exiting asked nothing of it.
func (ep *episode) stopped() bool {
	return ep.StopSignal != 0 && ep.StopVerdict != sigvocab.FateDroppedExiting
}

// waitsForMain reports whether the episode can only end with the main
// process's exit (or Flush): something was asked of it or done to it.
func (ep *episode) waitsForMain() bool {
	return !ep.exited && (ep.stopped() || ep.killed || ep.oomMain)
}

func (ep *episode) isVictim(pid uint32) bool {
	for _, v := range ep.OOMVictims {
		if v.PID == pid {
			return true
		}
	}
	return false
}

// noteInfo names the episode. Info from an event about the main process
// wins over an earlier one about another process.
func (ep *episode) noteInfo(c *container.Info, aboutMain bool) {
	if c == nil {
		return
	}
	// The runtime named the container since the episode took its bare
	// identity (it was slow then, and was asked again): the named answer
	// replaces it, whichever process it came with.
	named := ep.hasInfo && ep.Container.Name == "" && c.Name != "" && c.ID == ep.Container.ID
	if !named && (ep.infoFromInit || ep.hasInfo && !aboutMain) {
		return
	}
	ep.hasInfo, ep.infoFromInit = true, aboutMain || ep.infoFromInit
	ns := ep.Container.PidNS
	ep.Container = Container{Identity: c.Identity, PidNS: ns}
	ep.configuredStop = c.StopSignal
	ep.hook = c.PreStop
	ep.infoRuntime = c.MainRuntime
	switch {
	case c.GracePeriod > 0:
		ep.StopTimeout, ep.graceSource = time.Duration(c.GracePeriod)*time.Second, "kubernetes"
	case c.StopTimeout > 0:
		ep.StopTimeout, ep.graceSource = time.Duration(c.StopTimeout)*time.Second, "docker"
	case c.Pod != "":
		ep.StopTimeout, ep.graceSource = 0, "kubernetes"
	case c.Runtime == "docker":
		ep.StopTimeout, ep.graceSource = 0, "docker"
	default:
		ep.StopTimeout, ep.graceSource = 0, ""
	}
}

func (ep *episode) noteMain(t *sigvocab.Process) {
	if !ep.mainKnown {
		ep.Main, ep.mainKnown, ep.mainNS = proc(t), true, t.PidNS
		ep.MainIsInit = t.NsPID == 1
		if ep.MainIsInit && langrt.ForwardingInit(ep.Main.Comm) {
			ep.ForwardingInit = ep.Main.Comm
		}
	}
}

// mainRuntime recognises the main process's language runtime: from its
// command name as the kernel gave it at the stop, else from the resolver's
// reading of its executable when that is what no name tells (a Go binary).
// A runtime the resolver read that a name would show (a shell that later
// ran `exec app`) is stale when the command name does not show it.
func (ep *episode) mainRuntime() langrt.Runtime {
	if !ep.mainKnown {
		return langrt.Unknown
	}
	if rt := langrt.FromName(ep.Main.Comm); rt != langrt.Unknown {
		return rt
	}
	if ep.infoRuntime == langrt.Go {
		return langrt.Go
	}
	return langrt.Unknown
}

func proc(p *sigvocab.Process) Proc {
	return Proc{PID: p.PID, NsPID: p.NsPID, Comm: p.Comm.String()}
}

func sender(ev *sigvocab.Event) *Sender {
	s := &Sender{PID: ev.Sender.PID, Comm: ev.Sender.Comm.String(), Kernel: ev.Code == sigvocab.CodeKernel}
	for _, a := range ev.SenderAncestors() {
		s.Ancestors = append(s.Ancestors, Ancestor{PID: a.PID, Comm: a.Comm.String()})
	}
	return s
}

// add appends a step. Minor steps past the limit are only counted, so an
// episode stays bounded whatever the container does; the few steps that
// decide the outcome are always kept.
func (ep *episode) add(s Step, important bool, limit int) {
	if !important && len(ep.Steps) >= limit {
		ep.StepsOmitted++
		return
	}
	s.At = s.Time.Sub(ep.Start)
	ep.Steps = append(ep.Steps, s)
}

// initLike reports whether the main process counts as its namespace's
// init: it is one, or it has not shown itself yet (a stop's target is
// taken for PID 1 until then).
func (ep *episode) initLike() bool { return !ep.mainKnown || ep.MainIsInit }

// stepOf is a step with what every step takes from its event: the
// exported fields, and the facts its sentence will need.
func (ep *episode) stepOf(ev *sigvocab.Event, kind StepKind) Step {
	snd := &ev.Sender
	return Step{Time: ev.Time, Kind: kind, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags, facts: stepFacts{
		event: ev.Kind, result: ev.Result, fate: ev.Fate, handler: ev.Handler, kernel: ev.Code == sigvocab.CodeKernel,
		inside:   snd.PidNS == ev.Target.PidNS && snd.PidNS != hostPidNS && !ev.Flags.Has(sigvocab.FlagCrossNS),
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

func (ep *episode) stopSignal(ev *sigvocab.Event, limit int) {
	first := ep.StopSignal == 0
	if first {
		ep.StopSignal, ep.StopAt, ep.StopSender = ev.Signal, ev.Time, sender(ev)
		ep.stopHandler, ep.stopBlocked = ev.Handler, ev.Flags.Has(sigvocab.FlagBlocked)
		ep.StopVerdict = ev.Fate
	}
	ep.add(ep.sentStep(ev, StepStopSignal), first, limit)
	ep.add(ep.verdictStep(ev), first, limit)
}

func (ep *episode) deliver(ev *sigvocab.Event, main, stop bool, limit int) {
	switch {
	case ev.Fate == sigvocab.FateHandler:
		first := stop && !ep.handled
		if stop {
			ep.handled = true
			if ev.Signal == ep.StopSignal && (ep.StopVerdict == sigvocab.FateBlocked || ep.StopVerdict == sigvocab.FateAlreadyPending) {
				ep.StopVerdict = sigvocab.FateHandler // unblocked, then handled
			}
		}
		ep.add(ep.stepOf(ev, StepDeliver), first, limit)
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
		ep.add(s, first, limit)
	}
}

func (ep *episode) sigkill(ev *sigvocab.Event, main bool, limit int) {
	delivered := ev.Result == sigvocab.ResultDelivered
	first := main && delivered && !ep.killed
	if first {
		ep.killed, ep.KillAt, ep.KillSender = true, ev.Time, sender(ev)
		ep.killKernel = ev.Code == sigvocab.CodeKernel
	}
	ep.add(ep.sentStep(ev, StepSIGKILL), first, limit)
}

// reraise records the main process sending its stop signal to itself
// again after its handler ran, with the default action now: what Node.js's
// and the Go runtime's default handlers do to die of the signal. A
// namespace init cannot die so: the kernel drops it (FateDroppedInit), and
// the stop then waits for the SIGKILL unless the process exits by itself
// (the Go runtime exits 2 at once).
func (ep *episode) reraise(ev *sigvocab.Event, limit int) {
	first := !ep.reraised
	if first {
		ep.reraised, ep.ReraiseVerdict = true, ev.Fate
	}
	ep.add(ep.sentStep(ev, StepReraise), first, limit)
	s := ep.verdictStep(ev)
	s.facts.reraise = true
	ep.add(s, first, limit)
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
func (ep *episode) forward(ev *sigvocab.Event, limit int) {
	if !ep.stopped() || ep.killed || ev.Signal == sigvocab.SIGKILL {
		ep.signal(ev, limit)
		return
	}
	first := !ep.forwarded
	ep.forwarded = true
	ep.add(ep.sentStep(ev, StepForward), first, limit)
}

// signal records any other signal to a process of the namespace: a repeated
// stop signal, a reload, an init forwarding the stop signal to its children.
func (ep *episode) signal(ev *sigvocab.Event, limit int) {
	ep.add(ep.sentStep(ev, StepSignal), false, limit)
}

func (ep *episode) cascadeKill(ev *sigvocab.Event, limit int) {
	p := proc(&ev.Target)
	if len(ep.CascadeKills) < limit {
		ep.CascadeKills = append(ep.CascadeKills, p)
	} else {
		ep.CascadeOmitted++
	}
	ep.add(ep.sentStep(ev, StepCascadeKill), false, limit)
}

// cascadeVictim shows, in the episode of a process's own container, the
// cascade SIGKILL that another container's init sent it.
func (ep *episode) cascadeVictim(ev *sigvocab.Event, limit int) {
	s := ep.sentStep(ev, StepCascadeKill)
	s.facts.victim = true
	ep.add(s, false, limit)
}

// sandbox shows the end of the pod's sandbox (pause) container: its
// SIGKILL, or its exit.
func (ep *episode) sandbox(ev *sigvocab.Event, limit int) {
	s := ep.stepOf(ev, StepSandbox)
	by := proc(&ev.Sender)
	s.facts.by, s.facts.status, s.facts.core = &by, exitStatus(ev), ev.CoreDumped
	ep.add(s, false, limit)
}

func (ep *episode) oomKill(ev *sigvocab.Event, main bool, limit int) {
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
	if len(ep.OOMVictims) < limit || firstInit {
		ep.OOMVictims = append(ep.OOMVictims, s.Target)
	}
	ep.add(s, first || firstInit, limit)
}

// exitStatus is the status a container runtime reports: the exit code, or
// 128 + the signal that killed the process.
func exitStatus(ev *sigvocab.Event) int {
	if ev.Signaled() {
		return 128 + int(ev.Signal)
	}
	return ev.ExitCode
}

func (ep *episode) processExit(ev *sigvocab.Event, limit int) {
	ep.add(ep.exitStep(ev, StepProcessExit), false, limit)
}

func (ep *episode) mainExit(ev *sigvocab.Event) {
	st := exitStatus(ev)
	ep.exited, ep.ExitAt, ep.ExitStatus = true, ev.Time, st
	if ev.Signaled() {
		ep.ExitSignal = ev.Signal
	}
	ep.add(ep.exitStep(ev, StepMainExit), true, 0)
}

// order puts the steps in time order and starts the episode at the first.
// Events reach the ring buffer from several CPUs and can arrive a few
// microseconds out of order (a SIGKILL's generate after the exit it caused);
// the steps are told in the order they happened.
func (ep *episode) order() {
	slices.SortStableFunc(ep.Steps, func(a, b Step) int { return a.Time.Compare(b.Time) })
	if len(ep.Steps) > 0 && ep.Steps[0].Time.Before(ep.Start) {
		ep.Start = ep.Steps[0].Time
	}
	for i := range ep.Steps {
		ep.Steps[i].At = ep.Steps[i].Time.Sub(ep.Start)
	}
}

// finish decides the outcome and the hint of an ordered episode.
func (ep *episode) finish() {
	ep.Main.Runtime = ep.mainRuntime()
	ep.PreStop = ep.preStop()
	ep.GracePeriod = ep.appliedGrace()
	ep.Outcome = decide(ep.facts())
	ep.words()
}

// graceEarly and graceLate bound when a SIGKILL counts as the end of the
// configured grace period: the runtime's timer starts after its own stop
// signal, so its SIGKILL cannot come much earlier; it can come later by
// the time runc takes to start, and the kubelet rounds the time its preStop
// hook took down to whole seconds.
const (
	graceEarly = 250 * time.Millisecond
	graceLate  = time.Second
)

// appliedGrace is the grace period the stopper applied, when the kernel's
// record shows it: the container's configured one (StopTimeout) when the
// SIGKILL came as it ran out, counted from the preStop hook's start when
// an exec hook was seen, or the kubelet's 2 s minimum after a hook that
// used it up. 0 otherwise: a stop given less (`docker stop -t 3`, a pod
// deleted with --grace-period) or more, or one that ended before any
// SIGKILL, does not show the grace it had. The API server's word (the
// deletion's grace) is set later by the caller and wins.
func (ep *episode) appliedGrace() time.Duration {
	c := ep.StopTimeout
	if _, killed := ep.KillAfter(); c <= 0 || !killed {
		return 0
	}
	if ep.PreStop.timedOut(&ep.Episode) {
		return c
	}
	if d := ep.KillAt.Sub(ep.graceBegin()); d >= c-graceEarly && d <= c+graceLate {
		return c
	}
	return 0
}
