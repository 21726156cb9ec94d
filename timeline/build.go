package timeline

import (
	"container/list"
	"fmt"
	"slices"
	"time"

	"github.com/sigscope/sigscope/container/identity"
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

	hook  *identity.Hook // the container's preStop hook, nil: none
	execs []execSession  // exec sessions in the container during the stop

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
func (ep *episode) noteInfo(c *identity.Info, aboutMain bool) {
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

// generateStep is the common part of a step made from a generate event.
func generateStep(ev *sigvocab.Event, kind StepKind, text string) Step {
	snd := proc(&ev.Sender)
	return Step{Time: ev.Time, Kind: kind, Signal: ev.Signal, Sender: &snd, Target: proc(&ev.Target), Flags: ev.Flags, Text: text}
}

func (ep *episode) stopSignal(ev *sigvocab.Event, limit int) {
	first := ep.StopSignal == 0
	if first {
		ep.StopSignal, ep.StopAt, ep.StopSender = ev.Signal, ev.Time, sender(ev)
		ep.stopHandler, ep.stopBlocked = ev.Handler, ev.Flags.Has(sigvocab.FlagBlocked)
	}
	ep.add(generateStep(ev, StepStopSignal, fmt.Sprintf("%s sends %s to %s", senderText(ev), ev.Signal, targetText(ev))), first, limit)
	v := ev.Fate
	if first {
		ep.StopVerdict = v
	}
	ep.add(Step{Time: ev.Time, Kind: StepKernelVerdict, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Verdict: v, Text: "kernel: " + v.Explain(ev.Signal, ev.Handler, ep.mainName())}, first, limit)
}

func (ep *episode) deliver(ev *sigvocab.Event, main, stop bool, limit int) {
	who := targetText(ev)
	switch {
	case ev.Fate == sigvocab.FateHandler:
		first := stop && !ep.handled
		if stop {
			ep.handled = true
			if ev.Signal == ep.StopSignal && (ep.StopVerdict == sigvocab.FateBlocked || ep.StopVerdict == sigvocab.FateAlreadyPending) {
				ep.StopVerdict = sigvocab.FateHandler // unblocked, then handled
			}
		}
		ep.add(Step{Time: ev.Time, Kind: StepDeliver, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
			Text: fmt.Sprintf("%s runs its %s handler", who, ev.Signal)}, first, limit)
	case main && (ev.Fate == sigvocab.FateDroppedInit || ev.Fate == sigvocab.FateDroppedSigIgn):
		// The drop of a signal that was blocked at generation: the kernel
		// discards it when the init dequeues it (docs/kernel.md).
		why := "it has no handler"
		if ev.Fate == sigvocab.FateDroppedSigIgn {
			why = "it has set it to SIG_IGN"
		}
		first := stop && ev.Signal == ep.StopSignal && (ep.StopVerdict == sigvocab.FateBlocked || ep.StopVerdict == sigvocab.FateAlreadyPending)
		what := ev.Signal.String()
		switch {
		case first:
			ep.StopVerdict = ev.Fate
		case ep.reraised && ev.Signal == ep.StopSignal && (ep.ReraiseVerdict == sigvocab.FateBlocked || ep.ReraiseVerdict == sigvocab.FateAlreadyPending):
			// A handler raises its own signal while the kernel keeps
			// it blocked (no SA_NODEFER): the re-raise is queued, and
			// dropped when the handler returns and unblocks it.
			ep.ReraiseVerdict = ev.Fate
			first, what = true, "the re-raised "+what
		}
		ep.add(Step{Time: ev.Time, Kind: StepKernelVerdict, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
			Verdict: ev.Fate, Text: fmt.Sprintf("kernel: dropped — %s unblocked %s and %s", ep.mainName(), what, why)}, first, limit)
	}
}

func (ep *episode) sigkill(ev *sigvocab.Event, main bool, limit int) {
	delivered := ev.Result == sigvocab.ResultDelivered
	first := main && delivered && !ep.killed
	if first {
		ep.killed, ep.KillAt, ep.KillSender = true, ev.Time, sender(ev)
		ep.killKernel = ev.Code == sigvocab.CodeKernel
	}
	how := "sends SIGKILL to"
	if ev.Flags.Has(sigvocab.FlagCgroupKill) {
		how = "kills through cgroup.kill:"
	}
	ep.add(generateStep(ev, StepSIGKILL, fmt.Sprintf("%s %s %s%s", senderText(ev), how, targetText(ev), resultSuffix(ev))), first, limit)
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
	ep.add(generateStep(ev, StepReraise, fmt.Sprintf("%s re-raises %s with the default action (its handler ran)", targetText(ev), ev.Signal)), first, limit)
	text := "kernel: " + ev.Fate.Explain(ev.Signal, ev.Handler, ep.mainName())
	if ev.Fate == sigvocab.FateDroppedInit {
		text = fmt.Sprintf("kernel: ignored — %s cannot be ended by a signal it has no handler for, its own included", ep.mainName())
	}
	ep.add(Step{Time: ev.Time, Kind: StepKernelVerdict, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Verdict: ev.Fate, Text: text}, first, limit)
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
	ep.add(generateStep(ev, StepForward, fmt.Sprintf("%s forwards %s to %s%s", senderText(ev), ev.Signal, targetText(ev), resultSuffix(ev))), first, limit)
}

// signal records any other signal to a process of the namespace: a repeated
// stop signal, a reload, an init forwarding the stop signal to its children.
func (ep *episode) signal(ev *sigvocab.Event, limit int) {
	ep.add(generateStep(ev, StepSignal, fmt.Sprintf("%s sends %s to %s%s", senderText(ev), ev.Signal, targetText(ev), resultSuffix(ev))), false, limit)
}

func resultSuffix(ev *sigvocab.Event) string {
	switch {
	case ev.Result == sigvocab.ResultDelivered:
		return ""
	case ev.Flags.Has(sigvocab.FlagPID1Ignored):
		if ev.Signal == sigvocab.SIGKILL {
			return " — ignored: PID 1 cannot be killed from inside its namespace"
		}
		return " — ignored: PID 1 has no handler"
	case ev.Flags.Has(sigvocab.FlagSigIgn):
		return " — ignored: SIG_IGN"
	case ev.Flags.Has(sigvocab.FlagTargetExiting):
		return " — ignored: already exiting"
	}
	return " — " + ev.Result.String()
}

func (ep *episode) cascadeKill(ev *sigvocab.Event, limit int) {
	p := proc(&ev.Target)
	if len(ep.CascadeKills) < limit {
		ep.CascadeKills = append(ep.CascadeKills, p)
	} else {
		ep.CascadeOmitted++
	}
	ep.add(generateStep(ev, StepCascadeKill, "kernel: namespace cascade — SIGKILL to "+procText(p)), false, limit)
}

// cascadeVictim shows, in the episode of a process's own container, the
// cascade SIGKILL that another container's init sent it.
func (ep *episode) cascadeVictim(ev *sigvocab.Event, limit int) {
	ep.add(generateStep(ev, StepCascadeKill, fmt.Sprintf("kernel: namespace cascade — PID 1 %s (host %d) exited, SIGKILL to %s",
		ev.Sender.Comm.String(), ev.Sender.PID, targetText(ev))), false, limit)
}

// sandbox shows the end of the pod's sandbox (pause) container.
func (ep *episode) sandbox(ev *sigvocab.Event, limit int) {
	text := "the pod's sandbox is torn down: " + exitText(ev, fmt.Sprintf("%s (host %d)", ev.Target.Comm.String(), ev.Target.PID))
	if ev.Kind == sigvocab.KindGenerate {
		text = fmt.Sprintf("%s sends SIGKILL to the pod's sandbox (%s, host %d): the pod's teardown", senderText(ev), ev.Target.Comm.String(), ev.Target.PID)
	}
	ep.add(Step{Time: ev.Time, Kind: StepSandbox, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags, Text: text}, false, limit)
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
	p := proc(&ev.Target)
	if len(ep.OOMVictims) < limit || firstInit {
		ep.OOMVictims = append(ep.OOMVictims, p)
	}
	ep.add(Step{Time: ev.Time, Kind: StepOOMKill, Target: p, Flags: ev.Flags,
		Text: "kernel: the OOM killer picks " + targetText(ev)}, first || firstInit, limit)
}

// exitStatus is the status a container runtime reports: the exit code, or
// 128 + the signal that killed the process.
func exitStatus(ev *sigvocab.Event) int {
	if ev.Signaled() {
		return 128 + int(ev.Signal)
	}
	return ev.ExitCode
}

func exitText(ev *sigvocab.Event, who string) string {
	st := exitStatus(ev)
	switch {
	case ev.Signaled() && ev.CoreDumped:
		return fmt.Sprintf("%s killed by %s, core dumped (exit status %d)", who, ev.Signal, st)
	case ev.Signaled():
		return fmt.Sprintf("%s killed by %s (exit status %d)", who, ev.Signal, st)
	}
	return fmt.Sprintf("%s exits with code %d", who, st)
}

func (ep *episode) processExit(ev *sigvocab.Event, limit int) {
	st := exitStatus(ev)
	ep.add(Step{Time: ev.Time, Kind: StepProcessExit, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
		Exit: &st, Text: exitText(ev, targetText(ev))}, false, limit)
}

func (ep *episode) mainExit(ev *sigvocab.Event) {
	st := exitStatus(ev)
	ep.exited, ep.ExitAt, ep.ExitStatus = true, ev.Time, st
	if ev.Signaled() {
		ep.ExitSignal = ev.Signal
	}
	ep.add(Step{Time: ev.Time, Kind: StepMainExit, Signal: ev.Signal, Target: proc(&ev.Target), Flags: ev.Flags,
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

func targetText(ev *sigvocab.Event) string {
	p := proc(&ev.Target)
	if ev.Flags.Has(sigvocab.FlagNSInit) {
		p.NsPID = 1
	}
	return procText(p)
}

// mainName is how texts call the episode's main process: "PID 1" for a
// namespace init, "the main process" for one that shares a namespace.
func (ep *episode) mainName() string {
	return MainRole(!ep.mainKnown || ep.MainIsInit)
}

// senderText names a sender: a process of the target's namespace by its
// place there, one outside (runc, kubelet, a shell on the host) by its host
// pid, and a kernel-raised signal as the kernel's, running in that task.
func senderText(ev *sigvocab.Event) string {
	s := &ev.Sender
	switch {
	case ev.Code == sigvocab.CodeKernel:
		return fmt.Sprintf("the kernel (in %s, host %d)", s.Comm.String(), s.PID)
	case s.PidNS == ev.Target.PidNS && s.PidNS != hostPidNS && !ev.Flags.Has(sigvocab.FlagCrossNS):
		return procText(proc(s))
	}
	return fmt.Sprintf("%s (%d)", s.Comm.String(), s.PID)
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
	ep.Hint = capitalize(hint(ep))
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

// capitalize starts a sentence that may begin with "the main process".
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
