package timeline

import (
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Routing: which episode an event belongs to, and what it is there. The
// engine keeps the indexes and does all of it here; the episode then
// applies the event (apply.go) without knowing of the engine.

// role is what an event is to the episode it is routed to.
type role struct {
	main bool     // about the episode's main process
	stop bool     // generate, deliver: a stop signal to the main process
	kill bool     // generate: a SIGKILL delivered to the main process
	as   relation // why the event reaches this episode
}

// relation says why an event reaches an episode. Most are about a process
// of the episode's container; a cascade kill and a sandbox's end reach
// other episodes too.
type relation uint8

const (
	member          relation = iota // about a process of the episode's container
	cascadeSent                     // a cascade kill the episode's exiting init sent
	cascadeReceived                 // a cascade kill another container's exiting init sent to a process of this one
	sandboxEnd                      // the SIGKILL or the exit of the pod's sandbox (pause) container
	netCounts                       // the counts of the network namespace the episode watches
)

// routed is one episode an event goes to, and its role there.
type routed struct {
	ep *episode
	role
}

// route finds the episodes ev belongs to and its role in each, beginning
// one when ev can begin a stop: a stop signal, a SIGKILL or an exit of a
// main process, or an OOM kill. It keeps the engine's own records on the
// way: an exec session or its end for a container with no episode yet, a
// main process's start, a sandbox's end. Finding an episode can complete
// another (a restarted container's), into out. The slice is reused by the
// next call.
func (e *Engine) route(ev *sigvocab.Event, c *identity.Info, out *[]Episode) []routed {
	e.routes = e.routes[:0]
	t := &ev.Target
	switch {
	case ev.Kind == sigvocab.KindNet:
		return e.routeNet(ev)
	case ev.Kind == sigvocab.KindBlocked:
		// A reading of a main process's task: to its episode only, if any.
		if ep := e.byMain[ev.Task.Process]; ep != nil {
			e.routes = append(e.routes, routed{ep, role{}})
		}
		return e.routes
	case ev.Kind == sigvocab.KindNSEmpty:
		if ep := e.byNS[t.PidNS]; ep != nil {
			e.routes = append(e.routes, routed{ep, role{main: ep.mainKnown && ep.Main.PID == t.PID}})
		}
		return e.routes
	case ev.Signal == sigvocab.SIGCHLD && (ev.Kind == sigvocab.KindGenerate || ev.Kind == sigvocab.KindDeliver):
		return nil // every exit sends one to its parent: noise in a stop story
	case ev.Kind == sigvocab.KindGenerate && ev.Flags.Has(sigvocab.FlagNSCascade):
		return e.routeCascade(ev, c)
	case !tracked(t, c):
		return nil
	case ev.Kind == sigvocab.KindDeliver:
		return e.routeDeliver(ev, c)
	}
	r := role{main: isMain(t, c)}
	r.kill = r.main && ev.Kind == sigvocab.KindGenerate && ev.Signal == sigvocab.SIGKILL && ev.Result == sigvocab.ResultDelivered
	if c != nil && c.Sandbox {
		if r.kill || r.main && ev.Kind == sigvocab.KindExit {
			e.routeSandbox(c)
		}
		return e.routes
	}
	if ev.Kind == sigvocab.KindExec && r.main {
		// A container's own start: from now on its stops are seen whole.
		e.starts.add(procKey{t.PID, t.PidNS})
		return nil
	}
	ep := e.episodeOf(t, c, r.main, out)
	if ep == nil && (ev.Kind == sigvocab.KindExec || ev.Kind == sigvocab.KindExit && !r.main) {
		// A process of a container with no stop under way: its exec log
		// keeps the session (a preStop hook's, before the stop signal).
		e.execs.note(keyOf(c, t), ev)
		return nil
	}
	switch ev.Kind {
	case sigvocab.KindGenerate:
		// A stop comes from outside: for an init, from outside its
		// namespace (the kernel's own test, cross_ns). A main process
		// that is no init shares its namespace with other containers or
		// the host; runc on the host is still cross_ns there, except in
		// the host's namespace, where any other sender counts.
		r.stop = r.main && isStopSignal(ev.Signal, c, ep) &&
			(ev.Flags.Has(sigvocab.FlagCrossNS) || t.NsPID != 1 && ev.Sender.PID != t.PID)
		// A signal to a process already gone (a zombie not yet reaped: a
		// runtime's late stop or kill) begins nothing: its end was seen,
		// and its episode may have completed at once (KindNSEmpty).
		if ep == nil && (!r.stop && !r.kill || ev.Flags.Has(sigvocab.FlagTargetGone)) {
			return nil
		}
	case sigvocab.KindExit:
		if ep != nil && !r.main && ep.mainKnown && ep.Main.PID == t.PID {
			r.main = true // its container is no longer resolvable, its episode knows it
		}
		if ep != nil && r.main && ep.exited {
			return nil // the same main process's exit twice: nothing new
		}
	}
	if ep == nil {
		ep = e.begin(t, c, ev.Time)
	}
	ep.noteInfo(c, r.main)
	if r.main {
		e.noteMain(ep, t)
	}
	return append(e.routes, routed{ep, r})
}

// routeDeliver finds the episode of a process that dequeued a signal. A
// dequeue begins nothing, nor names an episode: it only tells what
// became of a signal an episode already holds.
func (e *Engine) routeDeliver(ev *sigvocab.Event, c *identity.Info) []routed {
	t := &ev.Target
	if c != nil && c.Sandbox {
		return nil
	}
	ep := e.open[keyOf(c, t)]
	if ep == nil && c == nil {
		if ep = e.byMain[t.PID]; ep == nil {
			ep = e.byNS[t.PidNS]
		}
	}
	if ep == nil {
		return nil
	}
	main := ep.mainKnown && ep.Main.PID == t.PID || !ep.mainKnown && isMain(t, c)
	return append(e.routes, routed{ep, role{main: main, stop: main && isStopSignal(ev.Signal, c, ep)}})
}

// routeNet gives a network namespace's counts to every open episode that
// watches it: the containers of a pod share one. An episode waiting for
// them completes; one whose stop goes on keeps them for Flush, should the
// trace end first.
func (e *Engine) routeNet(ev *sigvocab.Event) []routed {
	if ev.NetNS != 0 && ev.Conns != nil {
		for el := e.order.Front(); el != nil; el = el.Next() {
			if ep := el.Value.(*episode); ep.netns == ev.NetNS {
				e.routes = append(e.routes, routed{ep, role{as: netCounts}})
			}
		}
	}
	if len(e.routes) == 0 {
		e.stats.NetIgnored++
	}
	return e.routes
}

// routeCascade places a SIGKILL of the namespace cascade: it belongs to the
// episode of the init whose exit sent it, and is shown in the victim's
// container's episode too when that is another (a pod sharing one pid
// namespace, whose init is the sandbox's pause).
func (e *Engine) routeCascade(ev *sigvocab.Event, c *identity.Info) []routed {
	ep := e.byMain[ev.Sender.PID]
	if ep == nil {
		ep = e.byNS[ev.Sender.PidNS]
	}
	if ep == nil {
		ep = e.open[epKey{ns: ev.Sender.PidNS}]
	}
	if ep != nil {
		e.routes = append(e.routes, routed{ep, role{as: cascadeSent}})
	}
	if c == nil || c.Sandbox {
		return e.routes
	}
	if victim := e.open[keyOf(c, &ev.Target)]; victim != nil && victim != ep {
		e.routes = append(e.routes, routed{victim, role{as: cascadeReceived}})
	}
	return e.routes
}

// routeSandbox shows the end of a pod's sandbox (pause) container in the
// episodes of its pod's containers still open: the last step of the pod's
// teardown, never an episode of its own.
func (e *Engine) routeSandbox(c *identity.Info) {
	e.stats.SandboxStops++
	if c.Pod == "" {
		return
	}
	for el := e.order.Front(); el != nil; el = el.Next() {
		ep := el.Value.(*episode)
		if ep.Container.Pod == c.Pod && ep.Container.Namespace == c.Namespace {
			e.routes = append(e.routes, routed{ep, role{as: sandboxEnd}})
		}
	}
}

// epKey names the container an episode follows: its ID when the resolver
// found one, else its pid namespace (a namespace made by unshare, or a
// container whose runtime cannot be asked), whose init is then the main
// process.
type epKey struct {
	id string
	ns uint32
}

func keyOf(c *identity.Info, p *sigvocab.Process) epKey {
	if c != nil && c.ID != "" {
		return epKey{id: c.ID}
	}
	return epKey{ns: p.PidNS}
}

// inContainer reports whether a pid namespace can hold an episode of a
// container nobody resolved: known and not the host's.
func inContainer(ns uint32) bool { return ns != 0 && ns != sigvocab.HostPidNS }

// tracked reports whether events about p in container c can belong to an
// episode: processes of the host belong to none, unless a runtime said they
// are a container's.
func tracked(p *sigvocab.Process, c *identity.Info) bool {
	return c != nil && c.ID != "" || inContainer(p.PidNS)
}

// isMain reports whether p is the main process of its container c: the one
// the runtime started and signals. That is the init of the container's pid
// namespace when it has its own (an init that resolves to c is c's), and
// the process the runtime named otherwise: a container in another's pid
// namespace (docker --pid container:X, a pod sharing its namespace) or in
// the host's (--pid host, hostPID pods).
//
// The runtime's word wins when it gave one: a pid namespace nested in the
// container (docker-in-docker, unshare in an entrypoint) has an init of its
// own that is not the container's main process. The resolver asks again
// when a container restarts, so the pid is not a stale one.
func isMain(p *sigvocab.Process, c *identity.Info) bool {
	if c != nil && c.MainPID > 0 {
		return int(p.PID) == c.MainPID
	}
	return p.NsPID == 1 && (c != nil || inContainer(p.PidNS))
}

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

// episodeOf returns the open episode of the container c of process p (nil
// when there is none yet). A process whose container was not resolved (its
// cgroup went before the lookup, or no runtime answers) finds its episode
// through its main process or its namespace's init; an episode begun before
// its container was known takes the container's ID when it is. A main
// process other than the episode's means the container was restarted (or
// its ID or namespace reused, or the old main process's exit lost): the old
// episode is completed first.
func (e *Engine) episodeOf(p *sigvocab.Process, c *identity.Info, main bool, out *[]Episode) *episode {
	key := keyOf(c, p)
	ep := e.open[key]
	if ep == nil {
		if ep = e.byMain[p.PID]; ep == nil && (c == nil || main) {
			ep = e.byNS[p.PidNS]
		}
		if ep != nil && key.id != "" {
			if ep.key.id != "" && ep.key.id != key.id {
				ep = nil // another container's: a shared namespace
			} else if ep.key.id == "" {
				delete(e.open, ep.key)
				ep.key = key
				e.open[key] = ep
			}
		}
	}
	if ep != nil && main && ep.mainKnown && ep.Main.PID != p.PID {
		e.end(ep, e.now, out)
		return nil
	}
	return ep
}

// begin opens an episode for the container of p at t, evicting the oldest
// open one when MaxOpen are.
func (e *Engine) begin(p *sigvocab.Process, c *identity.Info, t time.Time) *episode {
	if e.order.Len() >= e.opts.MaxOpen {
		e.remove(e.order.Front().Value.(*episode))
		e.stats.Evicted++
	}
	ep := &episode{heapIdx: -1, key: keyOf(c, p), limit: e.opts.MaxSteps}
	ep.Start = t
	ep.Container.PidNS = p.PidNS
	ep.elem = e.order.PushBack(ep)
	e.open[ep.key] = ep
	e.stats.Started++
	// What ran in the container just before the stop (a preStop hook)
	// is part of it.
	ep.noteInfo(c, isMain(p, c))
	for _, s := range e.execs.take(ep.key, t) {
		ep.exec(s)
	}
	return ep
}

// noteMain records the episode's main process, once, and indexes it.
func (e *Engine) noteMain(ep *episode, p *sigvocab.Process) {
	if ep.mainKnown {
		return
	}
	ep.Main, ep.mainKnown, ep.mainNS, ep.mainCgroup = proc(p), true, p.PidNS, p.CgroupID
	ep.MainIsInit = p.NsPID == 1
	if ep.MainIsInit && langrt.ForwardingInit(ep.Main.Comm) {
		ep.ForwardingInit = ep.Main.Comm
	}
	e.byMain[p.PID] = ep
	if ep.MainIsInit {
		e.byNS[p.PidNS] = ep
	}
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
	// Or its API answered since the episode took what the runtime's files
	// said: the API's answer adds what the files lack (a containerd
	// container's grace period).
	named := ep.hasInfo && (ep.Container.Name == "" || ep.infoFromFiles && !c.FromFiles) && c.Name != "" && c.ID == ep.Container.ID
	if !named && (ep.infoFromInit || ep.hasInfo && !aboutMain) {
		return
	}
	ep.hasInfo, ep.infoFromInit, ep.infoFromFiles = true, aboutMain || ep.infoFromInit, c.FromFiles
	ep.Container = ContainerOf(c, ep.Container.PidNS)
	ep.configuredStop = c.StopSignal
	ep.hook = c.PreStop
	ep.infoRuntime = c.MainRuntime
	switch {
	case c.GracePeriod > 0:
		ep.StopTimeout, ep.graceSource = time.Duration(c.GracePeriod)*time.Second, knobKubernetes
	case c.StopTimeout > 0:
		ep.StopTimeout, ep.graceSource = time.Duration(c.StopTimeout)*time.Second, knobDocker
	case c.Pod != "":
		ep.StopTimeout, ep.graceSource = 0, knobKubernetes
	case c.Runtime == "docker":
		ep.StopTimeout, ep.graceSource = 0, knobDocker
	default:
		ep.StopTimeout, ep.graceSource = 0, knobUnknown
	}
}
