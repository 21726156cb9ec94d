package timeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// What the main process was doing when the SIGKILL came (Episode.AtKill),
// and what held an exec preStop hook (PreStop.AtKill): the sentences, and
// the fix that follows from each cause (causes.go). "More grace" is offered
// only for a process that was making progress.

// childText names a child: "sleep (pid 7)", with what it was in.
func childText(c *TaskAt) string {
	s := fmt.Sprintf("%s (pid %d", c.Comm, c.NsPID)
	if c.Syscall != "" {
		s += ", in " + c.Syscall
	}
	return s + ")"
}

// cpuText is the CPU time used in the grace: "0.000s of CPU in the 2.0s".
func cpuText(used, since time.Duration) string {
	return fmt.Sprintf("%.3fs of CPU in the %.3fs since the stop signal", used.Seconds(), since.Seconds())
}

// atKillVerdict is the sentence of what the main thread was doing at the
// SIGKILL, and what the other threads that were read were in.
func (ep *episode) atKillVerdict(c atKillCause) string {
	return ep.mainVerdict(c) + ep.AtKill.othersText()
}

// othersText summarises the other threads the kernel read (at most three)
// by the system call each was in: "; its other threads: 2 in futex, 1 in
// epoll_wait (3 of 22 read)". A JVM's or a Go program's main thread only
// waits; what holds the shutdown is often in another.
func (a *AtKill) othersText() string {
	if len(a.Threads) == 0 {
		return ""
	}
	var order []string
	n := map[string]int{}
	for _, t := range a.Threads {
		k := "in " + t.Syscall
		switch {
		case t.Unread:
			k = "not read"
		case t.Syscall == "":
			k = "in no system call"
		}
		if t.CPU != nil && busy(*t.CPU, a.Since) {
			k = "working (" + cpuText(*t.CPU, a.Since) + ")"
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	s := "; its other threads: " + strings.Join(parts, ", ")
	if others := a.ThreadCount - 1; others > len(a.Threads) {
		s += fmt.Sprintf(" (%d of %d read)", len(a.Threads), others)
	}
	return s
}

// mainVerdict is the sentence of what the main thread was doing at the
// SIGKILL, from its cause.
func (ep *episode) mainVerdict(c atKillCause) string {
	a := ep.AtKill
	who := ep.who()
	m := &a.Main
	idle := ""
	if a.Since > 0 {
		idle = "; it used " + cpuText(c.used, a.Since)
	}
	switch c.kind {
	case atKillProgress:
		return fmt.Sprintf("%s was still working when the SIGKILL came: it used %s", who, cpuText(c.used, a.Since))
	case atKillAnyChild:
		return fmt.Sprintf("%s was waiting for a child (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillChildIgnores, atKillShellTrap, atKillChild:
		s := fmt.Sprintf("%s was waiting for its child %s when the SIGKILL came%s", who, childText(c.child), idle)
		switch c.kind {
		case atKillChildIgnores:
			s += fmt.Sprintf(": the child ignores %s", ep.StopSignal)
		case atKillShellTrap:
			s += fmt.Sprintf(": a shell runs its %s trap only after the foreground command ends", ep.StopSignal)
		}
		return s
	case atKillEventLoop:
		s := fmt.Sprintf("%s was idle in its event loop (%s) when the SIGKILL came%s", who, m.Syscall, idle)
		if t := ep.Traffic; t != nil && t.Known(sigvocab.NetCut) && t.N(sigvocab.NetCut) > 0 {
			s += fmt.Sprintf(", with %s still open", count(t.N(sigvocab.NetCut), "connection"))
		}
		return s
	case atKillLock:
		return fmt.Sprintf("%s was waiting on a lock or another thread (%s) when the SIGKILL came, with %s%s", who, m.Syscall, count(uint64(max(a.ThreadCount, 1)), "thread"), idle)
	case atKillSleep:
		return fmt.Sprintf("%s was sleeping (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillAccept:
		return fmt.Sprintf("%s was still accepting connections (%s) when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillSyscallOnFd:
		return fmt.Sprintf("%s was in %s on a %s (fd %d) when the SIGKILL came%s", who, m.Syscall, strings.ReplaceAll(m.Fd, "_", " "), m.Arg, idle)
	case atKillSyscall:
		return fmt.Sprintf("%s was in %s when the SIGKILL came%s", who, m.Syscall, idle)
	case atKillUnread:
		return fmt.Sprintf("%s: what it was in when the SIGKILL came could not be read (the kernel reads it on x86_64)%s", who, idle)
	}
	return fmt.Sprintf("%s was in no system call when the SIGKILL came%s", who, idle)
}

// hookVerdict is what the exec preStop hook's process was doing when the
// SIGKILL came: "the preStop hook sleep (pid 9) was still sleeping
// (clock_nanosleep) when the SIGKILL came".
func hookVerdict(h *HookAt, c hookCause) string {
	p := &h.Process
	s := fmt.Sprintf("the preStop hook %s (pid %d) was still running when the SIGKILL came", p.Comm, p.NsPID)
	switch {
	case c.child != nil:
		s += fmt.Sprintf(", waiting for its child %s", childText(c.child))
	case p.Syscall != "":
		s += ", in " + p.Syscall
		if p.Fd != "" {
			s += fmt.Sprintf(" on a %s (fd %d)", strings.ReplaceAll(p.Fd, "_", " "), p.Arg)
		}
	case p.Unread:
		s += " (what it was in could not be read)"
	}
	if c.used != nil {
		s += fmt.Sprintf("; it used %s", cpuText(*c.used, c.since))
	}
	return s
}

// hookHint is the fix for a preStop hook the grace ran out on, from what
// held it at the SIGKILL; "" when that tells none (or was not read).
func (ep *episode) hookHint(c hookCause) string {
	b := c.task
	if b == nil {
		return ""
	}
	grace := ""
	if ep.GracePeriod > 0 {
		grace = fmt.Sprintf(" (%s)", ep.GracePeriod)
	}
	head := func(state string) string {
		return fmt.Sprintf("The preStop hook was still %s when the grace period%s ran out, so the kubelet sent %s with only its 2 s minimum left: ", state, grace, ep.StopSignal)
	}
	in := b.Comm
	if b.Syscall != "" {
		in += " in " + b.Syscall
	}
	switch c.kind {
	case hookWorking:
		return head(fmt.Sprintf("working (%s used %s)", b.Comm, cpuText(*c.used, c.since))) +
			"raise terminationGracePeriodSeconds to cover the hook and the shutdown after it, or make the hook faster."
	case hookSleeping:
		return head("sleeping ("+in+")") + fmt.Sprintf("its sleep is longer than the grace period. Sleep less than terminationGracePeriodSeconds minus the time the application needs after %s, or raise the grace period to cover both.", ep.StopSignal)
	case hookNetwork:
		return head("waiting on the network ("+in+")") +
			"what it calls did not answer. Give its request a timeout well within the grace period (curl --max-time, wget -T) and let the hook go on without the answer."
	case hookInput:
		// A poll says nothing of what it waits on: a request's answer
		// (curl polls its socket) is only the likeliest.
		return head("waiting for input ("+in+")") +
			"if it calls a service, that did not answer in time: give the request a timeout well within the grace period (curl --max-time, wget -T); whatever it waits for, bound the wait."
	case hookWaiting:
		return head("waiting ("+in+")") + "bound what it waits for with a timeout well within the grace period."
	}
	return ""
}

// atKillHint is the fix for a handler that did not finish, from why the
// process still ran; "" when the cause tells none.
func (ep *episode) atKillHint(c atKillCause) string {
	a := ep.AtKill
	who, sig := ep.who(), ep.StopSignal
	switch c.kind {
	case atKillProgress:
		return fmt.Sprintf("%s was making progress when the SIGKILL came (it used %s): give it more time (%s), or make its shutdown faster.",
			who, cpuText(c.used, a.Since), ep.graceFix())
	case atKillChildIgnores:
		return fmt.Sprintf("%s waited for its child %s, which ignores %s: signal the child with one it acts on (or SIGKILL it after a deadline) before waiting for it, or have it handle %s. More grace would not help.",
			who, c.child.Comm, sig, sig)
	case atKillShellTrap:
		return fmt.Sprintf("The %s trap of %s could not run while its foreground command %s ran: run the command in the background and wait for it (cmd & wait $!), so that wait returns on the signal and the trap runs at once, forwarding it (kill -TERM $!); or exec the command so that it receives %s itself. More grace would not help.",
			sig, who, c.child.Comm, sig)
	case atKillChild:
		return fmt.Sprintf("%s waited for its child %s, which did not end: pass %s on to it (an init such as tini does), and make the child handle it. More grace would not help while the child gets no signal.",
			who, c.child.Comm, sig)
	case atKillEventLoop:
		h := fmt.Sprintf("%s sat idle in its event loop until the SIGKILL: its shutdown waited for something that never came, not for CPU.", who)
		if ep.Main.Runtime == langrt.NodeJS {
			h += " Node.js's server.close() waits for every open connection, keep-alive ones included: close idle ones (server.closeIdleConnections()) and, after a deadline shorter than the grace period, the rest (server.closeAllConnections()), then exit."
		} else {
			h += " Close idle (keep-alive) connections, bound the wait for in-flight requests with a deadline shorter than the grace period, then exit."
		}
		return h + " More grace would not help."
	case atKillLock:
		return fmt.Sprintf("The shutdown of %s waited on a lock or another thread that never finished (a JVM shutdown hook joining a thread pool, a Python handler joining a worker, a Go program waiting on a goroutine): find what it waits for (a thread dump as it stops: jcmd PID Thread.print, py-spy dump, SIGQUIT for Go) and bound the wait. More grace would not help.", who)
	case atKillSleep:
		return fmt.Sprintf("%s was sleeping when the SIGKILL came: its shutdown sleeps longer than the grace period; sleep less, or raise the grace period (%s) to cover the sleep.", who, ep.graceFix())
	case atKillAccept:
		return fmt.Sprintf("%s was still accepting connections at the SIGKILL: on %s, close the listener, finish what is in flight and exit. More grace would not help.", who, sig)
	}
	return ""
}
