package timeline

import (
	"slices"
	"strings"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Outcome is how a stop episode ended; docs/timelines.md gives the rules.
type Outcome string

// The outcomes, in the order they are decided (the first that applies wins;
// see [decide]).
const (
	// The kernel's OOM killer picked the container's PID 1, or picked another
	// of its processes before any stop signal or SIGKILL.
	OutcomeOOMKilled Outcome = "oom_killed"
	// SIGKILL with no stop signal before it (docker kill, docker rm -f, kill -9).
	OutcomeKilled Outcome = "killed"
	// The container's preStop hook used up the grace period: it was still
	// running when the grace ran out, the stop signal came with the
	// kubelet's 2 s minimum, and the container was SIGKILLed.
	OutcomePreStopTimeout Outcome = "prestop_timeout"
	// The kernel queued or delivered the stop signal (not dropped) and the
	// main process ended before any SIGKILL, with a code or by that signal:
	// a handler, a forwarding init (sigwait, signalfd) or the default
	// action of a main process that is no init.
	OutcomeGraceful Outcome = "graceful"
	// The main process took the stop signal (a handler, a forwarding init,
	// its default action) but was still alive at the SIGKILL.
	OutcomeHandlerTimeout Outcome = "handler_timeout"
	// PID 1 dropped the stop signal (no handler, SIG_IGN, kept blocked) and was
	// killed later.
	OutcomeIgnoredByInit Outcome = "ignored_by_init"
	// A main process that is no namespace init ignored the stop signal
	// (SIG_IGN, a signal whose default is to do nothing, kept blocked) and
	// was killed later.
	OutcomeIgnored Outcome = "ignored"
	// PID 1 ended on its own: no stop signal, or one it dropped, and no SIGKILL.
	OutcomeExited Outcome = "exited"
	// Seen only in part: a stop signal was sent but the recording ended
	// ([Engine.Flush]) before PID 1 was killed or exited; or the stop may
	// have begun before tracing did (Episode.StartUnseen), so that what
	// was seen (a SIGKILL, an exit) cannot tell how it went.
	OutcomeUnfinished Outcome = "unfinished"

	// Not a stop: the OOM killer killed a process of the container other
	// than its main process, nothing stopped the container, and its main
	// process lived on. Shown and counted as an OOM kill in a running
	// container (IsStop false), never as a stop.
	OutcomeOOMKillSurvived Outcome = "oom_kill_survived"
)

// Outcomes lists every outcome of a stop, in the order they are decided.
var Outcomes = []Outcome{OutcomeOOMKilled, OutcomeKilled, OutcomePreStopTimeout, OutcomeGraceful,
	OutcomeHandlerTimeout, OutcomeIgnoredByInit, OutcomeIgnored, OutcomeExited, OutcomeUnfinished}

// KnownOutcome says whether o is one of [Outcomes] or
// [OutcomeOOMKillSurvived].
func KnownOutcome(o Outcome) bool { return slices.Contains(Outcomes, o) || o == OutcomeOOMKillSurvived }

// IsStop says whether an episode of outcome o is a stop of its container:
// all but an OOM kill the container lived through.
func (o Outcome) IsStop() bool { return o != OutcomeOOMKillSurvived }

// NeedsFix says whether the container itself made the stop go wrong, so
// that its image or spec should change: its main process dropped, ignored or
// outlasted the stop signal, its preStop hook used up the grace period, or
// it ran out of memory. A graceful stop, an exit on its own, a SIGKILL with
// no stop signal (someone chose to kill it) and an unfinished record do not.
func (o Outcome) NeedsFix() bool {
	switch o {
	case OutcomeIgnoredByInit, OutcomeIgnored, OutcomeHandlerTimeout, OutcomePreStopTimeout, OutcomeOOMKilled, OutcomeOOMKillSurvived:
		return true
	}
	return false
}

// StepKind says what a step of an episode is.
type StepKind string

const (
	StepStopSignal    StepKind = "stop_signal"    // a stop signal sent to the main process from outside
	StepKernelVerdict StepKind = "kernel_verdict" // what the kernel did with a stop signal at the main process
	StepDeliver       StepKind = "deliver"        // a process dequeued a signal into its handler
	StepForward       StepKind = "forward"        // the main process passed a signal on after the stop (an init forwarding it)
	StepSignal        StepKind = "signal"         // any other signal to a process of the container
	StepSIGKILL       StepKind = "sigkill"        // a SIGKILL (other than the cascade's)
	StepCascadeKill   StepKind = "cascade_kill"   // an exiting PID 1's SIGKILL to another process of its namespace
	StepOOMKill       StepKind = "oom_kill"       // the OOM killer picked a process
	StepProcessExit   StepKind = "process_exit"   // a process other than the main one ended
	StepMainExit      StepKind = "main_exit"      // the main process ended
	StepSandbox       StepKind = "sandbox"        // the pod's sandbox (pause) container was torn down
	StepExec          StepKind = "exec"           // a process entered the container from outside (runc exec: a preStop hook, kubectl exec, an exec probe)
	StepReraise       StepKind = "reraise"        // the main process's stop-signal handler sent the signal to itself again, with the default action
	StepAtKill        StepKind = "at_kill"        // what the main process was doing when the SIGKILL came (Episode.AtKill)
	StepHookAtKill    StepKind = "hook_at_kill"   // what the exec preStop hook's process, still running, was doing when the SIGKILL came (PreStop.AtKill)

	// Traffic steps: what the kernel counted of the network namespace's
	// connections (Episode.Traffic), at the times it recorded.
	StepListenerClosed StepKind = "listener_closed" // the first listening socket of the namespace closed: the application stopped accepting
	StepRefused        StepKind = "refused"         // the first connection attempt answered with a reset: nothing listened
	StepCut            StepKind = "cut"             // the first connection still open when its process died (with a request in it, where the kernel tells who spoke last)
	StepUnanswered     StepKind = "unanswered"      // the first connection the application closed after its client spoke last: a request read and never answered
	StepAfterClose     StepKind = "after_close"     // the first request that came on a connection after the application had closed it
	StepEndpoint       StepKind = "endpoint"        // the pod's endpoint first changed in a Service's EndpointSlices (not ready, not serving, terminating or removed), as the agent saw it
)

// traffic reports whether k is a traffic step.
func (k StepKind) traffic() bool {
	return k == StepListenerClosed || k == StepRefused || k == StepCut || k == StepUnanswered || k == StepAfterClose
}

// Container names an episode's container. Without a resolved identity.Info
// only PidNS is set.
type Container struct {
	identity.Identity
	PidNS uint32 `json:"pidns,omitempty"` // inode of the container's pid namespace: the episode's key
	// NameUnknown says why a container known by its ID only (from its
	// cgroup path) has no name: what asking its runtime gave, as of the
	// episode's completion ("Docker had removed it before it was asked",
	// a runtime API's error). Empty when it is named or not a container.
	NameUnknown string `json:"name_unknown,omitempty"`
	// IdentityFrom is IdentityFromFiles when the container was named from
	// its runtime's own files (Docker's container record, the OCI bundle
	// containerd or CRI-O hands runc), the runtime's API not having
	// answered by the episode's completion; empty when the API named it.
	IdentityFrom string `json:"identity_from,omitempty"`
	// NotInFiles is what of its name, image, pod and namespace those files
	// did not carry (identity.Info.Lacks, comma-separated), when
	// IdentityFrom is set.
	NotInFiles string `json:"not_in_files,omitempty"`
}

// IdentityFromFiles is Container.IdentityFrom for a container named from
// its runtime's files.
const IdentityFromFiles = "runtime_files"

// ContainerOf is the Container of an episode in pid namespace pidns whose
// container the resolver identified as c: its identity, and where that
// came from.
func ContainerOf(c *identity.Info, pidns uint32) Container {
	out := Container{Identity: c.Identity, PidNS: pidns}
	if c.FromFiles {
		out.IdentityFrom, out.NotInFiles = IdentityFromFiles, strings.Join(c.Lacks(), ", ")
	}
	return out
}

// Untrusted strings (comms, container names and images, and the texts and
// hint that quote them) are kept as the kernel or the runtime gave them, any
// bytes at all: MarshalJSON makes them valid UTF-8 and WriteText escapes them
// for a terminal, so each output escapes once.

// Owner is the workload that controls a pod: a Deployment, StatefulSet,
// DaemonSet, Job, CronJob, or the ReplicaSet, ReplicationController or
// other controller when no such workload owns that in turn.
type Owner struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String is "Kind/name".
func (o Owner) String() string { return o.Kind + "/" + o.Name }

// Proc is a process as an event showed it.
type Proc struct {
	PID   uint32 `json:"pid"`    // host pid
	NsPID uint32 `json:"ns_pid"` // pid in its own namespace (1: PID 1)
	Comm  string `json:"comm"`
	// Runtime is the language runtime of an episode's main process
	// (langrt: from its command name, or the resolver's reading of its
	// executable); "" for other processes and when not recognised.
	Runtime langrt.Runtime `json:"runtime,omitempty"`
}

// Ancestor is one of a sender's parents, nearest first.
type Ancestor struct {
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
}

// Sender is who sent the stop signal or the SIGKILL, with its ancestry
// (runc, containerd-shim-runc-v2, containerd, ...).
type Sender struct {
	PID       uint32     `json:"pid"`
	Comm      string     `json:"comm"`
	Kernel    bool       `json:"kernel,omitempty"` // the kernel raised it (si_code SI_KERNEL...) while Comm was running
	Ancestors []Ancestor `json:"ancestors,omitempty"`
}

// Step is one thing that happened in an episode.
type Step struct {
	At      time.Duration // since the episode's start (its stop signal when it has one)
	Time    time.Time
	Kind    StepKind
	Signal  sigvocab.Signal // 0 for exits without a signal and OOM kills
	Sender  *Proc           // generate steps
	Target  Proc            // the process the step is about
	Flags   sigvocab.Flags  // the event's verdict flags
	Verdict sigvocab.Fate   // kernel_verdict steps: the kernel's decision
	Exit    *int            // exit steps: the status as a runtime reports it (code, or 128+signal)
	// Text tells the step in a sentence, quoting untrusted comms
	// unescaped. The words (words_steps.go) write it when the episode is finished,
	// from the fields above and the facts below.
	Text string

	facts stepFacts // none in a step read back from JSON, whose Text is already written
}

// stepFacts are what a step's sentence needs beyond its exported fields:
// facts of its event, and of the episode when it was recorded. Steps
// record facts only; the words turn them into Text at completion.
type stepFacts struct {
	event    sigvocab.Kind        // the kind of the event recorded; KindExec for an exec session's start and end
	result   sigvocab.Result      // generate: the kernel's result
	fate     sigvocab.Fate        // generate, deliver: what the kernel did (Verdict shows it on kernel_verdict steps only)
	handler  sigvocab.Disposition // generate, deliver: the target's disposition for the signal
	kernel   bool                 // the kernel raised the signal (SI_KERNEL)
	inside   bool                 // the sender is a process of the target's pid namespace (not the host's, not across namespaces)
	mainInit bool                 // the main process was its namespace's init, or not known yet, when the step was recorded
	reraise  bool                 // a kernel verdict on the stop signal the main process raised again
	victim   bool                 // a cascade kill that another container's exiting init sent
	hook     bool                 // an exec session that is the preStop hook
	core     bool                 // an exit that dumped core
	status   int                  // an exit's status, as a runtime reports it
	by       *Proc                // who started an exec session, or sent the sandbox its SIGKILL (steps with no Sender)
	began    time.Time            // an exec session's end: its start
	n        uint64               // a traffic step: how many of its kind the kernel counted
	last     time.Time            // a traffic step: the last of its kind
	died     bool                 // a cut step: the main process's end was seen
	endpoint *EndpointChange      // an endpoint step: the change in the pod's Service
}

// Episode is the story of one container stop. Times are zero when absent.
type Episode struct {
	Container Container
	// Main is the process the episode follows: the one the runtime started
	// and sends the stop signal to. It is PID 1 of the container's pid
	// namespace (MainIsInit) unless the container shares a namespace.
	Main       Proc
	MainIsInit bool
	// ForwardingInit names Main when it is a known init that passes the
	// stop signal on (tini, docker-init, dumb-init, catatonit, s6-svscan).
	ForwardingInit string
	Outcome        Outcome
	Start          time.Time

	StopSignal  sigvocab.Signal // the first stop signal; 0 when there was none
	StopSender  *Sender
	StopVerdict sigvocab.Fate // the kernel's final decision on the first stop signal
	StopAt      time.Time
	// ReraiseVerdict is the kernel's decision on the stop signal the main
	// process's handler sent to itself again with the default action
	// (Node.js's and the Go runtime's default handlers do): dropped for a
	// namespace init (FateDroppedInit), which then lives on; FateUnknown
	// when it did not.
	ReraiseVerdict sigvocab.Fate

	KillSender *Sender // who sent the SIGKILL that counted
	KillAt     time.Time

	ExitAt     time.Time       // the main process's exit
	ExitStatus int             // with ExitAt: the status as a runtime reports it (code, or 128+signal)
	ExitSignal sigvocab.Signal // with ExitAt: the signal that killed PID 1, 0 when it exited

	PreStop *PreStop // the container's preStop hook (Kubernetes), nil: none
	// StopReason is why the kubelet stopped the container (deleted,
	// evicted, preempted, probe_failed, restarted, deadline_exceeded,
	// node_shutdown, poststart_failed, unknown), from the API server; ""
	// when not asked. NotLearnt says what could not be learnt.
	StopReason string
	NotLearnt  []string
	// Owner is the pod's workload, from the API server; nil for a bare pod,
	// a container outside Kubernetes, or when it was not learnt.
	Owner *Owner
	// Revision is the pod template the pod ran (its ReplicaSet, or its
	// StatefulSet's or DaemonSet's ControllerRevision), from its labels;
	// nil for a pod no such controller labelled, and in episodes written
	// before it was recorded (2026-11-29).
	Revision *Revision
	// Endpoints are the pod's endpoint in each Service whose EndpointSlices
	// list it, from the API server (endpoints.go); nil when none does.
	Endpoints []EndpointChange

	// ID and Node are set by the node agent: the episode's number there
	// (rising from 1 since the agent started: a cursor for paging) and the
	// node's name.
	ID   uint64
	Node string

	// GracePeriod is the grace the stopper applied, when it is known: the
	// pod deletion's (from the API server), or the configured one
	// (StopTimeout) when the SIGKILL came as it ran out. 0 when not known:
	// a `docker stop -t 3` of a container whose StopTimeout is 10 was not
	// given 10 s, and a graceful stop never showed its grace.
	GracePeriod time.Duration
	// GraceFrom says where the applied grace came from, when the API
	// server said ("the pod's deletion (deletionGracePeriodSeconds)", "the
	// liveness probe's terminationGracePeriodSeconds", ...); "" otherwise.
	GraceFrom GraceSource
	// StopTimeout is the container's configured wait before SIGKILL: the
	// pod's terminationGracePeriodSeconds, or Docker's StopTimeout; 0 when
	// the runtime did not say. The stopper may apply another.
	StopTimeout time.Duration

	CascadeKills   []Proc // processes the namespace cascade of the exiting main process SIGKILLed
	CascadeOmitted int    // cascade kills beyond Options.MaxSteps, counted only
	// EventsDropped counts the events the kernel could not hand over (the
	// ring buffer was full) while the episode was open: any of them may
	// have been its own, so it may be incomplete. 0: nothing was lost.
	EventsDropped uint64
	OOMVictims    []Proc
	// StartUnseen: the stop may have begun before tracing did
	// (TracedSince). No stop signal was seen and neither was the main
	// process's start, and the first event came within the stop budget
	// after TracedSince ([Episode.StopBudget]): a stop signal sent just
	// before would have left exactly this. The outcome is unfinished,
	// unless the OOM killer picked the main process (that stands whatever
	// came before).
	StartUnseen bool
	TracedSince time.Time // with StartUnseen: when tracing began

	Steps        []Step
	StepsOmitted int // minor steps beyond Options.MaxSteps, counted only

	Hint string // how to fix it, quoting untrusted comms unescaped; "" when nothing to fix

	// Traffic is what the stop cost the clients of the container's network
	// namespace; nil when no stop signal of the container was watched (one
	// sent from the container's own network namespace, or a kernel that
	// does not count).
	Traffic *Traffic
	// AtKill is what the main process was doing when the SIGKILL came
	// (atkill.go); nil when the kernel read nothing.
	AtKill *AtKill

	// settled is the engine's record of the episode, from its settling
	// until Finish finishes it (Options.Settled); nil after.
	settled *episode
	// summary and race are what Finish wrote for Summary and EndpointRace.
	summary, race string
}

// KillAfter is the time from the stop signal to the SIGKILL, the part of
// the grace period used; false without both.
func (ep *Episode) KillAfter() (time.Duration, bool) {
	if ep.StopAt.IsZero() || ep.KillAt.IsZero() {
		return 0, false
	}
	return ep.KillAt.Sub(ep.StopAt), true
}

// StopBudget is the longest the episode's stop can have lasted: its grace
// period (or stop timeout) when known, else [DefaultStopBudget], plus a
// slack for the runtime's own delay before its SIGKILL.
func (ep *Episode) StopBudget() time.Duration {
	if g := max(ep.GracePeriod, ep.StopTimeout); g > 0 {
		return g + stopSlack
	}
	return DefaultStopBudget + stopSlack
}

// StopDuration is how long the stop took, as the user waited for it: from
// the first thing of it, the preStop hook's start (Kubernetes), else the
// stop signal, else the episode's start (a SIGKILL or an OOM kill with no
// stop signal), to the main process's exit. False without the exit, and
// for a stop that may have begun before tracing did (its start is not
// known). This is the one definition: the duration histogram, `kubectl
// sigscope top` and the API's stop_duration_s all use it.
func (ep *Episode) StopDuration() (time.Duration, bool) {
	if ep.ExitAt.IsZero() || ep.StartUnseen {
		return 0, false
	}
	begin := ep.StopAt
	if begin.IsZero() {
		begin = ep.Start
	}
	if p := ep.PreStop; p != nil && !p.StartAt.IsZero() && p.StartAt.Before(begin) {
		begin = p.StartAt
	}
	if begin.IsZero() || ep.ExitAt.Before(begin) {
		return 0, false
	}
	return ep.ExitAt.Sub(begin), true
}

// graceBegin is when the grace period began, as the kernel saw it: the
// start of an exec preStop hook it recorded, else the stop signal (an
// estimated hook start is derived from a grace, so it cannot tell one).
func (ep *Episode) graceBegin() time.Time {
	if p := ep.PreStop; p != nil && !p.StartAt.IsZero() && !p.Estimated {
		return p.StartAt
	}
	return ep.StopAt
}

// ExitAfter is the time from the stop signal to PID 1's exit; false without both.
func (ep *Episode) ExitAfter() (time.Duration, bool) {
	if ep.StopAt.IsZero() || ep.ExitAt.IsZero() {
		return 0, false
	}
	return ep.ExitAt.Sub(ep.StopAt), true
}
