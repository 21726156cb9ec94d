package timeline

import (
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The causes: why an episode went as it did, beside its outcome (decide,
// outcome.go), decided once from its facts and the kernel's readings when
// it is worded. Each is a small typed value: a kind, and what it refers to
// (a child, the CPU time used). A verdict and the hint that follows from
// it read the same cause, and the words (words*.go) only turn it into
// sentences; no table of system calls, and no rule, is in the words.

// causes are an episode's causes, decided once ([episode.words] reads
// them).
type causes struct {
	unacted unactedKind  // why the main process did not act on the stop signal
	atKill  atKillCause  // why the main process still ran at the SIGKILL
	hook    hookCause    // what held the exec preStop hook at the SIGKILL
	traffic trafficCause // what the clients lost, and why
}

// causes decides the episode's causes from its facts.
func (ep *episode) causes() causes {
	return causes{unacted: ep.unacted(), atKill: ep.atKillCause(), hook: ep.hookCause(), traffic: ep.trafficCause()}
}

// unactedKind is why the main process did not act on the stop signal, from
// the kernel's verdict on it.
type unactedKind uint8

const (
	unactedNone           unactedKind = iota // it acted on it, or the verdict tells no reason
	unactedReraise                           // its handler re-raised it with the default action, and the kernel dropped that (a namespace init)
	unactedInitBlocked                       // an init with no handler had it blocked: dropped when it unblocked it
	unactedInitConfigured                    // an init with no handler for the container's configured stop signal (not SIGTERM)
	unactedInit                              // an init with no handler for it
	unactedSigIgn                            // it ignores it (SIG_IGN)
	unactedDefault                           // its default action is to do nothing, and it has no handler
	unactedBlockedHandler                    // it kept it blocked until the SIGKILL, its handler never ran
	unactedBlocked                           // it kept it blocked with no handler, and nothing read it
)

// unacted decides why the main process did not act on the stop signal.
func (ep *episode) unacted() unactedKind {
	if ep.facts().reraiseDrop {
		return unactedReraise
	}
	switch ep.StopVerdict {
	case sigvocab.FateDroppedInit:
		switch {
		case ep.stopBlocked:
			return unactedInitBlocked
		case ep.configuredStop != 0 && ep.StopSignal != sigvocab.SIGTERM:
			return unactedInitConfigured
		}
		return unactedInit
	case sigvocab.FateDroppedSigIgn:
		return unactedSigIgn
	case sigvocab.FateDroppedDefault:
		return unactedDefault
	case sigvocab.FateBlocked, sigvocab.FateAlreadyPending:
		switch {
		case ep.handled || ep.forwarded:
			return unactedNone
		case ep.stopHandler == sigvocab.DispHandler:
			return unactedBlockedHandler
		}
		return unactedBlocked
	}
	return unactedNone
}

// The system calls, by what a task in one waits for.
var (
	// waitCalls wait for a child, loopCalls for events, sleepCalls for
	// time, lockCalls for a lock or another thread, acceptCalls for a
	// connection.
	waitCalls   = map[string]bool{"wait4": true, "waitid": true}
	loopCalls   = map[string]bool{"epoll_wait": true, "epoll_pwait": true, "epoll_pwait2": true, "poll": true, "ppoll": true, "select": true, "pselect6": true}
	sleepCalls  = map[string]bool{"nanosleep": true, "clock_nanosleep": true, "pause": true}
	lockCalls   = map[string]bool{"futex": true, "futex_waitv": true}
	acceptCalls = map[string]bool{"accept": true, "accept4": true}
	// peerCalls wait for a network peer whatever their fd (connect,
	// recvfrom, recvmsg), or, for read, on an fd the kernel read as a
	// socket (peerWait).
	peerCalls = map[string]bool{"connect": true, "recvfrom": true, "recvmsg": true}
)

// peerWait reports whether a task waits for a network peer.
func peerWait(t *TaskAt) bool { return peerCalls[t.Syscall] || t.Syscall == "read" && t.Fd == "socket" }

// busy reports whether a task that used cpu between the stop signal's
// reading and the SIGKILL's, since apart, was making progress: a quarter
// of that time or more. An unknown since (0) is no progress.
func busy(cpu, since time.Duration) bool { return since > 0 && cpu*4 >= since }

// atKillKind is why the main process was still running at the SIGKILL, as
// the kernel read its tasks there.
type atKillKind uint8

const (
	atKillNone         atKillKind = iota // nothing was read (Episode.AtKill nil)
	atKillProgress                       // its busiest task used a quarter of the time or more: it was working
	atKillChildIgnores                   // it waited for its child, which ignores the stop signal
	atKillShellTrap                      // a shell waited for its foreground command, its trap of the stop signal behind it
	atKillChild                          // it waited for its child, which did not end
	atKillAnyChild                       // it waited for a child, and none was read
	atKillEventLoop                      // idle in its event loop (epoll, poll, select)
	atKillLock                           // waiting on a lock or another thread (futex)
	atKillSleep                          // sleeping
	atKillAccept                         // still accepting connections
	atKillSyscallOnFd                    // in another system call, on an fd of a kind the kernel read
	atKillSyscall                        // in another system call
	atKillNoSyscall                      // in no system call
	atKillUnread                         // what it was in could not be read
)

// atKillCause is why the main process was still running at the SIGKILL:
// the at_kill verdict and the handler_timeout hint both read it.
type atKillCause struct {
	kind atKillKind
	// child is the child it waited for (atKillChildIgnores,
	// atKillShellTrap, atKillChild).
	child *TaskAt
	// used is the CPU time its busiest task used since the stop signal's
	// reading (known when AtKill.Since is not 0).
	used time.Duration
}

// atKillCause decides why the main process still ran at the SIGKILL.
func (ep *episode) atKillCause() atKillCause {
	a := ep.AtKill
	if a == nil {
		return atKillCause{}
	}
	used, working := a.progress()
	c := atKillCause{used: used}
	m := &a.Main
	switch {
	case working:
		c.kind = atKillProgress
	case a.waitsForChild():
		c.child = a.awaited()
		switch {
		case c.child == nil:
			c.kind = atKillAnyChild
		case c.child.Ignores:
			c.kind = atKillChildIgnores
		case langrt.IsShell(m.Comm) && waitCalls[m.Syscall] && ep.StopVerdict == sigvocab.FateHandler:
			// A shell runs a trap only between commands: a trapped signal
			// that comes while a foreground command runs waits for its end.
			c.kind = atKillShellTrap
		default:
			c.kind = atKillChild
		}
	case loopCalls[m.Syscall]:
		c.kind = atKillEventLoop
	case lockCalls[m.Syscall]:
		c.kind = atKillLock
	case sleepCalls[m.Syscall]:
		c.kind = atKillSleep
	case acceptCalls[m.Syscall]:
		c.kind = atKillAccept
	case m.Syscall != "" && m.Fd != "":
		c.kind = atKillSyscallOnFd
	case m.Syscall != "":
		c.kind = atKillSyscall
	case m.Unread:
		c.kind = atKillUnread
	default:
		c.kind = atKillNoSyscall
	}
	return c
}

// waitsForChild says the main thread waits for a child: in wait4 or
// waitid, or in rt_sigsuspend with children (a shell's wait builtin waits
// for SIGCHLD so).
func (a *AtKill) waitsForChild() bool {
	return waitCalls[a.Main.Syscall] || a.Main.Syscall == "rt_sigsuspend" && len(a.Children) > 0
}

// awaited is the child a main thread in wait4/waitid waits for: the one
// its pid argument names (a pid of the waiter's own namespace), else the
// only one, else the first.
func (a *AtKill) awaited() *TaskAt {
	if len(a.Children) == 0 {
		return nil
	}
	for i := range a.Children {
		if a.Main.Arg > 0 && uint32(a.Main.Arg) == a.Children[i].NsPID {
			return &a.Children[i]
		}
	}
	return &a.Children[0]
}

// hookKind is what held an exec preStop hook that still ran at the
// SIGKILL.
type hookKind uint8

const (
	hookOther    hookKind = iota // another system call, or none, or not read: no fix follows
	hookWorking                  // it used a quarter of the time or more
	hookSleeping                 // it slept
	hookNetwork                  // it waited on a network peer
	hookInput                    // it waited for input (poll, select): a peer's answer is only the likeliest
	hookWaiting                  // it waited for a child or a lock (wait4, waitid, futex)
)

// hookCause is what held the exec preStop hook at the SIGKILL: the
// hook_at_kill verdict and the prestop_timeout hint both read it.
type hookCause struct {
	kind hookKind
	// task is what held it: the child it waited for (child, then),
	// else its own process; nil when the hook's process was not read.
	task, child *TaskAt
	// used is task's CPU time since the stop signal's reading; nil when
	// not known.
	used *time.Duration
	// since is the time between the two readings.
	since time.Duration
}

// hookCause decides what held the exec preStop hook at the SIGKILL.
func (ep *episode) hookCause() hookCause {
	h := ep.hookAt
	if h == nil {
		return hookCause{}
	}
	c := hookCause{task: &h.Process}
	if h.Child != nil && waitCalls[h.Process.Syscall] {
		c.task, c.child = h.Child, h.Child
	}
	b := c.task
	if a := ep.AtKill; b.CPU != nil && a != nil && a.Since > 0 {
		c.used, c.since = b.CPU, a.Since
	}
	switch {
	case c.used != nil && busy(*c.used, c.since):
		c.kind = hookWorking
	case sleepCalls[b.Syscall]:
		c.kind = hookSleeping
	case peerWait(b):
		c.kind = hookNetwork
	case loopCalls[b.Syscall]:
		c.kind = hookInput
	case waitCalls[b.Syscall] || b.Syscall == "futex":
		// futex_waitv is not taken for a hook's wait (it is for the main
		// process's lock): kept as it was.
		c.kind = hookWaiting
	}
	return c
}

// trafficState is what the counts say the stop cost the clients.
type trafficState uint8

const (
	trafficNone      trafficState = iota // no traffic was watched (Episode.Traffic nil)
	trafficUncounted                     // the container shares the node's network namespace: nothing was counted
	trafficUnread                        // the counts were not read (unreadReason)
	trafficLost                          // requests were lost (Traffic.Lost)
	trafficMaybe                         // none surely lost, some possibly (Traffic.MaybeLost): never clean
	trafficUnhurt                        // no request lost that the kernel reports
)

// refusedKind is why connection attempts were refused.
type refusedKind uint8

const (
	refusedNone      refusedKind = iota // none refused, or not known
	refusedUntied                       // before any listening socket closed: what was counted does not tie them to the stop
	refusedUnstopped                    // after the application stopped listening, with no stop signal to delay
	refusedAfterStop                    // after it stopped listening on the stop signal: a delay covers them
)

// cutKind is how the process that held the cut connections ended.
type cutKind uint8

const (
	cutNone            cutKind = iota // none cut, or not known
	cutByOOM                          // the OOM kill ended it
	cutKilledUnstopped                // SIGKILL with no stop signal before it
	cutKilledIgnored                  // SIGKILL after a stop signal the main process never acted on
	cutKilled                         // SIGKILL after the main process took the stop signal
	cutEndedAfterStop                 // it ended after the stop signal
	cutEndedOwn                       // it ended on its own
)

// trafficCause is what the stop cost the clients and why: the traffic's
// verdict and hint read it.
type trafficCause struct {
	state   trafficState
	refused refusedKind
	cut     cutKind
	// keepAlive: the application closed connections its clients were
	// still sending requests on (Traffic.keepAliveRace).
	keepAlive bool
	// With refusedAfterStop: covering is the delay, in whole seconds, that
	// would have covered the refused attempts (Episode.CoveringDelay), and
	// stillComing says they were refused until the counts were read, so
	// that the delay may be longer.
	covering    int
	stillComing bool
}

// trafficCause decides what the stop cost the clients, and why.
func (ep *episode) trafficCause() trafficCause {
	t := ep.Traffic
	switch {
	case t == nil:
		return trafficCause{}
	case ep.unread == unreadShared:
		return trafficCause{state: trafficUncounted}
	case ep.unread != countsRead:
		return trafficCause{state: trafficUnread}
	case t.Lost() == 0 && t.MaybeLost() > 0:
		return trafficCause{state: trafficMaybe}
	case t.Lost() == 0:
		return trafficCause{state: trafficUnhurt}
	}
	c := trafficCause{state: trafficLost, keepAlive: t.keepAliveRace() > 0}
	if t.N(sigvocab.NetRefused) > 0 {
		switch {
		case !t.refusedAfterClose():
			c.refused = refusedUntied
		case !ep.stopped():
			c.refused = refusedUnstopped
		default:
			c.refused = refusedAfterStop
			c.covering, _ = ep.CoveringDelay()
			c.stillComing = t.Until.Sub(t.Counts[sigvocab.NetRefused].Last) < NetLinger
		}
	}
	if t.N(sigvocab.NetCut) > 0 {
		f := ep.facts()
		switch {
		case ep.Outcome == OutcomeOOMKilled:
			c.cut = cutByOOM
		case f.killed() && !f.stop:
			c.cut = cutKilledUnstopped
		case f.killed() && f.ignoredStop():
			c.cut = cutKilledIgnored
		case f.killed():
			c.cut = cutKilled
		case f.stop:
			c.cut = cutEndedAfterStop
		default:
			c.cut = cutEndedOwn
		}
	}
	return c
}

// unreadReason is why an episode that watched a network namespace
// completed without its counts (Traffic.Unread says it).
type unreadReason uint8

const (
	countsRead   unreadReason = iota
	unreadEnded               // Flush: the trace ended first
	unreadLate                // the hard deadline (NetWait) passed first
	unreadShared              // the container shares the runtime's namespace: nothing was counted
)

// ownReason is why a container's own connections cannot be told from the
// others of its network namespace (Traffic.OwnUnknown says it).
type ownReason uint8

const (
	ownKnown          ownReason = iota
	ownNoSocketCgroup           // the counts carry no split by cgroup (the kernel keeps none)
	ownRootCgroup               // the container is in the root cgroup v2: a cgroup v1 node
)
