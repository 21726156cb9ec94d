package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/kubemeta"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The counts of a stop's connections begun from its preStop hook: the
// rules are timeline.HookCounts'; here the pipeline does what they say on
// the reader's goroutine (the tracer's Watch and Unwatch), and takes the
// starts of the hooks the kubelet runs itself, which the API server
// reports on another goroutine.

// watchHook begins the count of a container's connections at its preStop
// hook's start, which comes before the stop signal that would begin it
// otherwise, when timeline.HookCounts says so, and has them follow e.
func (p *Pipeline) watchHook(e *sigvocab.Event, target *identity.Info) {
	if p.hooks == nil {
		p.hooks = timeline.NewHookCounts(maxHeld)
	}
	if p.hooks.Begins(e, target) {
		if err := p.t.Watch(e.NetNS, e.Time); err != nil {
			p.log().Warn("counting connections from a preStop hook", "netns", e.NetNS, "error", err)
			return
		}
		p.hooks.Begun(e.NetNS, e.Target.PID, time.Time{})
		return
	}
	p.hooks.Saw(e)
}

// HookStarted begins the count of a container's connections at the start
// of a preStop hook the kubelet runs itself (sleep, httpGet), which nothing
// in the container marks: the API server's report of its pod's deletion
// (kubemeta.HookStart) is the start, at. Until is the hook's end at the
// latest: a count no stop signal took up timeline.HookGrace after it is
// let go.
// Safe from any goroutine: it finds the container's network namespace
// (its main process's, from the resolver and /proc) and hands the watch to
// the reader, which it wakes.
func (p *Pipeline) HookStarted(containerID string, at, until time.Time) error {
	if p.t == nil || !p.t.CountsConnections() || p.engine == nil {
		return nil
	}
	r := p.opts.Resolver
	if r == nil {
		return errors.New("no resolver: the container's process is not known")
	}
	pid := 0
	if info, _ := r.Known(containerID); info != nil {
		pid = info.MainPID
	}
	if pid == 0 {
		// Not looked up yet: ask the runtimes.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		runs, err := r.ListRunning(ctx)
		cancel()
		for _, run := range runs {
			if run.Info.ID == containerID {
				pid = run.PID
			}
		}
		if pid == 0 {
			return fmt.Errorf("container %.12s: its main process is not known (%v)", containerID, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		return fmt.Errorf("container %.12s: its network namespace: %w", containerID, err)
	}
	p.hookMu.Lock()
	if len(p.hookStarts) < maxHeld {
		p.hookStarts = append(p.hookStarts, hookStart{netns: uint32(st.Ino), at: at, until: until})
	}
	p.hookMu.Unlock()
	p.t.Wake()
	return nil
}

// CountFromHooks begins, for each container of h, the count of its
// connections at its preStop hook's start (HookStarted), in the background:
// fit for kubemeta.Pods.OnHookStart, which runs on the informer's goroutine.
func (p *Pipeline) CountFromHooks(h kubemeta.HookStart) {
	go func() {
		for _, c := range h.Containers {
			if err := p.HookStarted(c.ID, h.At, c.Until); err != nil {
				p.log().Warn("counting connections from a preStop hook", "pod", h.Namespace+"/"+h.Pod, "container", c.Name, "error", err)
			}
		}
	}()
}

// hookStart is a HookStarted the reader has yet to act on.
type hookStart struct {
	netns     uint32
	at, until time.Time
}

// takeHookStarts begins the counts HookStarted handed over, on the
// reader's goroutine.
func (p *Pipeline) takeHookStarts() {
	p.hookMu.Lock()
	starts := p.hookStarts
	p.hookStarts = nil
	p.hookMu.Unlock()
	for _, h := range starts {
		if err := p.t.Watch(h.netns, h.at); err != nil {
			p.log().Warn("counting connections from a preStop hook", "netns", h.netns, "error", err)
			continue
		}
		if p.hooks == nil {
			p.hooks = timeline.NewHookCounts(maxHeld)
		}
		p.hooks.Begun(h.netns, 0, h.until)
	}
}

// endHooks lets go the counts begun from hooks that no stop signal took up
// in time (timeline.HookCounts.LetGo).
func (p *Pipeline) endHooks(now time.Time) {
	if p.hooks == nil {
		return
	}
	p.hooks.LetGo(now, func(netns uint32) {
		if p.engine == nil || !p.engine.Watching(netns) {
			_ = p.t.Unwatch(netns)
		}
	})
}
