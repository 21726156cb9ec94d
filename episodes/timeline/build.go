package timeline

import (
	"container/list"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// episode is an Episode in progress, with the facts its outcome is decided on.
type episode struct {
	Episode

	key      epKey
	elem     *list.Element // in Engine.order
	heapIdx  int           // in Engine.settling; -1 when it has no deadline
	deadline time.Time
	limit    int // Options.MaxSteps

	hook  *identity.Hook // the container's preStop hook, nil: none
	execs []execSession  // exec sessions in the container during the stop

	hasInfo        bool
	infoFromInit   bool
	infoFromFiles  bool            // the Info came from the runtime's files: the API's answer replaces it
	configuredStop sigvocab.Signal // the container's StopSignal, 0 when not configured
	graceSource    graceKnob       // which knob sets StopTimeout: Kubernetes's, Docker's, or not known
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
	lastAt      time.Time            // the latest event applied, net events aside

	// The network namespace whose inbound connections the kernel counts
	// for the stop (traffic.go), and its counts.
	netns     uint32               // 0: no stop signal of the container was watched
	netShared uint32               // the namespace the container shares with the runtime (net_shared): not counted
	conns     sigvocab.Connections // the latest counts read, with connsAt
	connsAt   time.Time            // when they were read; zero: never
	unread    unreadReason         // why the episode completed without its counts
	// mainCgroup is the main process's cgroup v2 id, which tells the
	// container's own sockets from the namespace's others (ownUnknown:
	// why it cannot).
	mainCgroup uint64
	ownUnknown ownReason
	// The kernel's readings of the main process's tasks at the first stop
	// signal and at the SIGKILL that counted (atkill.go).
	atStop, atKill []reading
	hookAt         *HookAt   // the exec preStop hook's reading at the SIGKILL (takeHookAt)
	netWait        bool      // its events are over and it waits for its counts (Engine.waiting), out of the indexes
	netDue         time.Time // with netWait: when its counts are to be read
	netAsked       bool      // with netWait: ConnectionsDue returned its namespace, not read since
}

// graceKnob is the knob that sets a container's grace period (StopTimeout):
// the pod's terminationGracePeriodSeconds, Docker's StopTimeout, or ""
// when the runtime did not say.
type graceKnob string

const (
	knobUnknown    graceKnob = ""
	knobKubernetes graceKnob = "kubernetes"
	knobDocker     graceKnob = "docker"
)

// counted reports whether the episode waits for its counts and has them,
// read when they were due.
func (ep *episode) counted() bool {
	return ep.netWait && !ep.connsAt.IsZero() && !ep.connsAt.Before(ep.netDue)
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

// initLike reports whether the main process counts as its namespace's
// init: it is one, or it has not shown itself yet (a stop's target is
// taken for PID 1 until then).
func (ep *episode) initLike() bool { return !ep.mainKnown || ep.MainIsInit }

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

// settle sets what the kernel's record alone says of a completed
// episode: its main process's language runtime, its preStop hook, the
// grace the stopper applied as the record shows it. The rest is Finish's.
func (ep *episode) settle() {
	ep.Main.Runtime = ep.mainRuntime()
	ep.PreStop = ep.preStop()
	ep.GracePeriod = ep.appliedGrace()
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
// deletion's grace), when Finish has it, wins.
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
