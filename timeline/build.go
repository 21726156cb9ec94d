package timeline

import (
	"container/list"
	"fmt"
	"slices"
	"time"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// episode is an Episode in progress, with the facts its outcome is decided on.
type episode struct {
	Episode

	elem     *list.Element // in Engine.order
	heapIdx  int           // in Engine.settling; -1 when it has no deadline
	deadline time.Time

	hasInfo        bool
	infoFromInit   bool
	configuredStop tracer.Signal // the container's StopSignal, 0 when not configured
	graceSource    string        // "kubernetes", "docker" or "": which knob sets GracePeriod

	initKnown   bool
	stopHandler tracer.Disposition // PID 1's disposition for the first stop signal when it was sent
	stopBlocked bool               // PID 1 had the first stop signal blocked when it was sent
	handled     bool               // a stop signal reached a handler in PID 1
	killed      bool               // a SIGKILL was delivered to PID 1
	killKernel  bool               // that SIGKILL was raised by the kernel (SI_KERNEL), e.g. the OOM killer
	exited      bool               // PID 1's exit was seen
	oomFirst    bool               // an OOM kill came before any stop signal, SIGKILL or exit
	oomInit     bool               // the OOM killer picked PID 1
}

// stopped reports whether a stop signal counts: one dropped because PID 1
// was already exiting asked nothing of it.
func (ep *episode) stopped() bool {
	return ep.StopSignal != 0 && ep.StopVerdict != VerdictTargetExiting
}

// waitsForInit reports whether the episode can only end with PID 1's exit
// (or Flush): something was asked of PID 1 or done to it.
func (ep *episode) waitsForInit() bool {
	return !ep.exited && (ep.stopped() || ep.killed || ep.oomInit)
}

func (ep *episode) isVictim(pid uint32) bool {
	for _, v := range ep.OOMVictims {
		if v.PID == pid {
			return true
		}
	}
	return false
}

// noteInfo names the episode. Info from an event about PID 1 wins: in a pod
// sharing one pid namespace, other processes belong to other containers.
func (ep *episode) noteInfo(c *container.Info, aboutInit bool) {
	if c == nil || ep.infoFromInit || ep.hasInfo && !aboutInit {
		return
	}
	ep.hasInfo, ep.infoFromInit = true, aboutInit
	ns := ep.Container.PidNS
	ep.Container = Container{ID: c.ID, Name: c.Name, Image: c.Image, Runtime: c.Runtime, Pod: c.Pod, Namespace: c.Namespace, PidNS: ns}
	ep.configuredStop = c.StopSignal
	switch {
	case c.GracePeriod > 0:
		ep.GracePeriod, ep.graceSource = time.Duration(c.GracePeriod)*time.Second, "kubernetes"
	case c.StopTimeout > 0:
		ep.GracePeriod, ep.graceSource = time.Duration(c.StopTimeout)*time.Second, "docker"
	case c.Pod != "":
		ep.GracePeriod, ep.graceSource = 0, "kubernetes"
	case c.Runtime == "docker":
		ep.GracePeriod, ep.graceSource = 0, "docker"
	default:
		ep.GracePeriod, ep.graceSource = 0, ""
	}
}

func (ep *episode) noteInit(t *tracer.Process) {
	if !ep.initKnown {
		ep.Init, ep.initKnown = proc(t), true
	}
}

func proc(p *tracer.Process) Proc {
	return Proc{PID: p.PID, NsPID: p.NsPID, Comm: p.Comm.String()}
}

func sender(ev *tracer.Event) *Sender {
	s := &Sender{PID: ev.Sender.PID, Comm: ev.Sender.Comm.String(), Kernel: ev.Code == tracer.CodeKernel}
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

// generateStep is the common part of a step made from a generate event.
func generateStep(ev *tracer.Event, kind StepKind, text string) Step {
	snd := proc(&ev.Sender)
	return Step{Time: ev.Time, Kind: kind, Signal: ev.Signal, Sender: &snd, Target: proc(&ev.Target), Flags: ev.Flags, Text: text}
}

// generateVerdict reads the kernel's decision on a signal sent to PID 1
// from the flags tracer.Classify derived (docs/kernel.md).
func generateVerdict(ev *tracer.Event) string {
	switch {
	case ev.Flags.Has(tracer.FlagPID1Ignored):
		return VerdictPID1Ignored
	case ev.Flags.Has(tracer.FlagSigIgn):
		return VerdictSigIgn
	case ev.Flags.Has(tracer.FlagTargetExiting):
		return VerdictTargetExiting
	case ev.Result == tracer.ResultIgnored:
		return VerdictDefaultIgnored
	case ev.Result == tracer.ResultAlreadyPending:
		return VerdictAlreadyPending
	case ev.Flags.Has(tracer.FlagBlocked):
		return VerdictBlocked
	case ev.Handler == tracer.DispHandler:
		return VerdictHandler
	}
	return VerdictDelivered
}

func (ep *episode) stopSignal(ev *tracer.Event, limit int) {
	first := ep.StopSignal == 0
	if first {
		ep.StopSignal, ep.StopAt, ep.StopSender = ev.Signal, ev.Time, sender(ev)
		ep.stopHandler, ep.stopBlocked = ev.Handler, ev.Flags.Has(tracer.FlagBlocked)
	}
	ep.add(generateStep(ev, StepStopSignal, fmt.Sprintf("%s sends %s to %s", senderText(ev), ev.Signal, targetText(ev))), first, limit)
	v := generateVerdict(ev)
	if first {
		ep.StopVerdict = v
	}
	if v == VerdictHandler {
		ep.handled = true
	}
	ep.add(Step{Time: ev.Time, Kind: StepKernelVerdict, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Verdict: v, Text: "kernel: " + verdictText(v, ev.Signal, ev.Handler)}, first, limit)
}

func verdictText(v string, sig tracer.Signal, h tracer.Disposition) string {
	switch v {
	case VerdictPID1Ignored:
		return fmt.Sprintf("ignored — PID 1 has no %s handler", sig)
	case VerdictSigIgn:
		return fmt.Sprintf("ignored — PID 1 has set %s to SIG_IGN", sig)
	case VerdictDefaultIgnored:
		return fmt.Sprintf("ignored — the default action of %s is to do nothing", sig)
	case VerdictTargetExiting:
		return "ignored — PID 1 is already exiting"
	case VerdictHandler:
		return fmt.Sprintf("delivered — PID 1 has a %s handler", sig)
	case VerdictBlocked:
		if h == tracer.DispHandler {
			return fmt.Sprintf("queued — PID 1 has %s blocked (it has a handler)", sig)
		}
		return fmt.Sprintf("queued — PID 1 has %s blocked (and no handler)", sig)
	case VerdictAlreadyPending:
		return fmt.Sprintf("merged — %s is already pending at PID 1, blocked", sig)
	}
	return "delivered"
}

func (ep *episode) deliver(ev *tracer.Event, init, stop bool, limit int) {
	who := targetText(ev)
	switch {
	case ev.Handler == tracer.DispHandler:
		first := stop && !ep.handled
		if stop {
			ep.handled = true
			if ev.Signal == ep.StopSignal && (ep.StopVerdict == VerdictBlocked || ep.StopVerdict == VerdictAlreadyPending) {
				ep.StopVerdict = VerdictHandler // unblocked, then handled
			}
		}
		ep.add(Step{Time: ev.Time, Kind: StepDeliver, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
			Text: fmt.Sprintf("%s runs its %s handler", who, ev.Signal)}, first, limit)
	case init && (ev.Flags.Has(tracer.FlagPID1Ignored) || ev.Flags.Has(tracer.FlagSigIgn)):
		// The drop of a signal that was blocked at generation: the kernel
		// discards it when PID 1 dequeues it (docs/kernel.md).
		v, why := VerdictPID1Ignored, "it has no handler"
		if ev.Flags.Has(tracer.FlagSigIgn) {
			v, why = VerdictSigIgn, "it has set it to SIG_IGN"
		}
		first := stop && ev.Signal == ep.StopSignal && (ep.StopVerdict == VerdictBlocked || ep.StopVerdict == VerdictAlreadyPending)
		if first {
			ep.StopVerdict = v
		}
		ep.add(Step{Time: ev.Time, Kind: StepKernelVerdict, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
			Verdict: v, Text: fmt.Sprintf("kernel: dropped — PID 1 unblocked %s and %s", ev.Signal, why)}, first, limit)
	}
}

func (ep *episode) sigkill(ev *tracer.Event, init bool, limit int) {
	delivered := ev.Result == tracer.ResultDelivered
	first := init && delivered && !ep.killed
	if first {
		ep.killed, ep.KillAt, ep.KillSender = true, ev.Time, sender(ev)
		ep.killKernel = ev.Code == tracer.CodeKernel
	}
	ep.add(generateStep(ev, StepSIGKILL, fmt.Sprintf("%s sends SIGKILL to %s%s", senderText(ev), targetText(ev), resultSuffix(ev))), first, limit)
}

// signal records any other signal to a process of the namespace: a repeated
// stop signal, a reload, an init forwarding the stop signal to its children.
func (ep *episode) signal(ev *tracer.Event, limit int) {
	ep.add(generateStep(ev, StepSignal, fmt.Sprintf("%s sends %s to %s%s", senderText(ev), ev.Signal, targetText(ev), resultSuffix(ev))), false, limit)
}

func resultSuffix(ev *tracer.Event) string {
	switch {
	case ev.Result == tracer.ResultDelivered:
		return ""
	case ev.Flags.Has(tracer.FlagPID1Ignored):
		if ev.Signal == tracer.SIGKILL {
			return " — ignored: PID 1 cannot be killed from inside its namespace"
		}
		return " — ignored: PID 1 has no handler"
	case ev.Flags.Has(tracer.FlagSigIgn):
		return " — ignored: SIG_IGN"
	case ev.Flags.Has(tracer.FlagTargetExiting):
		return " — ignored: already exiting"
	}
	return " — " + ev.Result.String()
}

func (ep *episode) cascadeKill(ev *tracer.Event, limit int) {
	p := proc(&ev.Target)
	if len(ep.CascadeKills) < limit {
		ep.CascadeKills = append(ep.CascadeKills, p)
	} else {
		ep.CascadeOmitted++
	}
	ep.add(generateStep(ev, StepCascadeKill, "kernel: namespace cascade — SIGKILL to "+procText(p)), false, limit)
}

func (ep *episode) oomKill(ev *tracer.Event, init bool, limit int) {
	first := len(ep.OOMVictims) == 0
	if first && !ep.stopped() && !ep.killed && !ep.exited {
		ep.oomFirst = true
	}
	firstInit := init && !ep.oomInit
	if init {
		ep.oomInit = true
	}
	p := proc(&ev.Target)
	if len(ep.OOMVictims) < limit || firstInit {
		ep.OOMVictims = append(ep.OOMVictims, p)
	}
	ep.add(Step{Time: ev.Time, Kind: StepOOMKill, Target: p, Flags: ev.Flags,
		Text: "kernel: the OOM killer picks " + targetText(ev)}, first || firstInit, limit)
}

// exitStatus is the status a container runtime reports: the exit code, or
// 128 + the signal that killed the process.
func exitStatus(ev *tracer.Event) int {
	if ev.Signaled() {
		return 128 + int(ev.Signal)
	}
	return ev.ExitCode
}

func exitText(ev *tracer.Event, who string) string {
	st := exitStatus(ev)
	switch {
	case ev.Signaled() && ev.CoreDumped:
		return fmt.Sprintf("%s killed by %s, core dumped (exit status %d)", who, ev.Signal, st)
	case ev.Signaled():
		return fmt.Sprintf("%s killed by %s (exit status %d)", who, ev.Signal, st)
	}
	return fmt.Sprintf("%s exits with code %d", who, st)
}

func (ep *episode) processExit(ev *tracer.Event, limit int) {
	st := exitStatus(ev)
	ep.add(Step{Time: ev.Time, Kind: StepProcessExit, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Exit: &st, Text: exitText(ev, targetText(ev))}, false, limit)
}

func (ep *episode) initExit(ev *tracer.Event) {
	st := exitStatus(ev)
	ep.exited, ep.ExitAt, ep.ExitStatus = true, ev.Time, st
	if ev.Signaled() {
		ep.ExitSignal = ev.Signal
	}
	ep.add(Step{Time: ev.Time, Kind: StepInitExit, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Exit: &st, Text: exitText(ev, targetText(ev))}, true, 0)
}

// procText names a process of the namespace: "PID 1 sh (host 5151)",
// "sleep (ns pid 2, host 5152)". Comms stay raw here: MarshalJSON makes
// them valid UTF-8 and WriteText escapes them, each once.
func procText(p Proc) string {
	if p.NsPID == 1 {
		return fmt.Sprintf("PID 1 %s (host %d)", p.Comm, p.PID)
	}
	return fmt.Sprintf("%s (ns pid %d, host %d)", p.Comm, p.NsPID, p.PID)
}

func targetText(ev *tracer.Event) string {
	p := proc(&ev.Target)
	if aboutInit(ev) {
		p.NsPID = 1
	}
	return procText(p)
}

// senderText names a sender: a process of the target's namespace by its
// place there, one outside (runc, kubelet, a shell on the host) by its host
// pid, and a kernel-raised signal as the kernel's, running in that task.
func senderText(ev *tracer.Event) string {
	s := &ev.Sender
	switch {
	case ev.Code == tracer.CodeKernel:
		return fmt.Sprintf("the kernel (in %s, host %d)", s.Comm.String(), s.PID)
	case s.PidNS == ev.Target.PidNS && !ev.Flags.Has(tracer.FlagCrossNS):
		return procText(proc(s))
	}
	return fmt.Sprintf("%s (%d)", s.Comm.String(), s.PID)
}

// finish puts the steps in time order and decides the outcome and the hint.
// Events reach the ring buffer from several CPUs and can arrive a few
// microseconds out of order (a SIGKILL's generate after the exit it caused);
// the steps are told in the order they happened.
func (ep *episode) finish() {
	slices.SortStableFunc(ep.Steps, func(a, b Step) int { return a.Time.Compare(b.Time) })
	if len(ep.Steps) > 0 && ep.Steps[0].Time.Before(ep.Start) {
		ep.Start = ep.Steps[0].Time
	}
	for i := range ep.Steps {
		ep.Steps[i].At = ep.Steps[i].Time.Sub(ep.Start)
	}
	ep.Outcome = decide(ep.facts())
	ep.Hint = hint(ep)
}
