package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sigscope/sigscope/internal/langrt"
)

// enrichment is what asking the runtimes about a container gave.
type enrichment struct {
	info *Info
	// complete: the runtime answered (or there is no runtime to ask);
	// false when one that should know could not be asked.
	complete bool
	// again: ask soon again. The runtime knows the container but has not
	// started it (no main pid yet), or knows nothing of it yet (containerd
	// registers a pod sandbox only once it runs).
	again bool
}

// metaFor returns the container's metadata: cached within TTL, else asked
// of its runtime once, however many lookups wait for it.
func (r *Resolver) metaFor(id, runtime string) *meta {
	return r.fetchMeta(id, runtime, r.opts.TTL)
}

// restarted enriches a container whose cgroup just appeared. A container
// already known with a main pid was started again (docker restart, a
// kubelet restart of the container keeps its ID under dockershim): its
// main pid has changed, so the cached answer is replaced. The cgroup
// appears once per v1 hierarchy: answers younger than a second stand.
func (r *Resolver) restarted(id, runtime string) {
	r.mu.Lock()
	old, ok := r.metas.get(id)
	r.mu.Unlock()
	maxAge := r.opts.TTL
	if ok && old.info.MainPID != 0 {
		maxAge = time.Second
	}
	r.fetchMeta(id, runtime, maxAge)
}

// fetchMeta returns the cached metadata when younger than maxAge, else
// asks the runtime once, however many callers wait for it.
func (r *Resolver) fetchMeta(id, runtime string, maxAge time.Duration) *meta {
	now := r.now()
	r.mu.Lock()
	old, ok := r.metas.get(id)
	if ok && now.Sub(old.fetched) < maxAge {
		r.mu.Unlock()
		return old
	}
	r.mu.Unlock()
	return once(&r.idCall, id, func() *meta {
		en := r.enrich(id, runtime)
		now := r.now()
		r.mu.Lock()
		// A known container's meta is updated in place: the cache entries
		// of its processes share it and see the new answer at once.
		m := old
		if m != nil {
			m.info = merged(old.info, old.complete, en.info)
		} else {
			m = &meta{info: en.info}
		}
		m.fetched, m.complete, m.retryAt = now, en.complete, now.Add(r.retryInterval)
		r.metas.put(id, m)
		r.mu.Unlock()
		if en.again {
			r.queueRecheck(id, runtime)
		}
		return m
	})
}

// merged is what is known of a container after the runtime answered next
// with info, when it had answered old before (complete) or not.
func merged(old *Info, complete bool, next *Info) *Info {
	if complete && next.bare() && !old.bare() {
		// The runtime has forgotten it (docker rm): what it said
		// while the container existed still holds.
		return old
	}
	if next.MainPID == 0 && old.MainPID != 0 && next.ID == old.ID {
		// It has exited since: its main pid was still that one, and ran
		// the same program.
		c := *next
		c.MainPID, c.MainRuntime = old.MainPID, old.MainRuntime
		return &c
	}
	return next
}

func (r *Resolver) reenrich(m *meta) {
	r.mu.Lock()
	id, runtime := m.info.ID, m.info.Runtime
	r.mu.Unlock()
	en := r.enrich(id, runtime)
	r.mu.Lock()
	m.retrying = false
	if en.complete {
		m.info, m.complete = merged(m.info, m.complete, en.info), true
	} else {
		m.retryAt = r.now().Add(r.retryInterval)
	}
	r.mu.Unlock()
	if en.again {
		r.queueRecheck(id, runtime)
	}
}

// enrich asks the runtime about a container. Its Info always has the ID
// and runtime, and the main process's language runtime when it has a main
// pid.
func (r *Resolver) enrich(id, runtime string) enrichment {
	en := r.askRuntime(id, runtime)
	r.detectRuntime(en.info)
	return en
}

// detectRuntime sets info.MainRuntime, info being a fresh answer no caller
// holds yet: what the cached answer for the same main process said, else
// read from /proc (langrt.Detect, a few small files). So /proc is read once
// per main process, when the runtime first names it, and again only while
// it is not recognised (the runtime may name it before its entrypoint has
// replaced runc's init), never per event.
func (r *Resolver) detectRuntime(info *Info) {
	if info == nil || info.MainPID <= 0 {
		return
	}
	r.mu.Lock()
	m, ok := r.metas.get(info.ID)
	if ok && m.info.MainPID == info.MainPID && m.info.MainRuntime != langrt.Unknown {
		info.MainRuntime = m.info.MainRuntime
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	info.MainRuntime = langrt.Detect(r.opts.ProcRoot, info.MainPID)
}

// askRuntime is enrich without the main process's language runtime.
func (r *Resolver) askRuntime(id, runtime string) enrichment {
	bare := &Info{ID: id, Runtime: runtime}
	r.mu.Lock()
	docker, cri := r.docker, r.cri
	r.mu.Unlock()
	if docker == nil {
		return enrichment{info: bare, complete: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.APITimeout)
	defer cancel()
	switch runtime {
	case RuntimeDocker:
		en, _ := r.fromDocker(ctx, docker, bare)
		return en
	case RuntimeContainerd, RuntimeCRIO:
		en, found := r.fromCRI(ctx, cri, bare)
		if found || runtime != RuntimeContainerd {
			return en
		}
		// The kubelet's cgroupfs layout is shared by containerd and
		// dockershim/cri-dockerd: ask Docker too, when it is there.
		if _, err := os.Stat(docker.socket); err == nil {
			if den, found := r.fromDocker(ctx, docker, bare); found {
				den.info.Runtime = RuntimeDocker
				return den
			}
		}
		return en
	}
	// podman: its Docker-compatible API is not asked (yet).
	return enrichment{info: bare, complete: true}
}

// fromDocker asks Docker about bare.ID; found: Docker knows it.
func (r *Resolver) fromDocker(ctx context.Context, c *dockerClient, bare *Info) (en enrichment, found bool) {
	if r.isDown(c.socket) {
		return enrichment{info: bare}, false
	}
	ins, err := c.inspect(ctx, bare.ID)
	if errors.Is(err, errNotFound) {
		// Docker records a container before it makes its cgroup: one
		// it does not know has been removed.
		r.ok(SourceDocker, c.socket)
		return enrichment{info: bare, complete: true}, false
	}
	if err != nil {
		r.fail(SourceDocker, c.socket, err)
		return enrichment{info: bare}, false
	}
	r.ok(SourceDocker, c.socket)
	info := ins.info()
	info.Runtime = bare.Runtime
	return enrichment{info: info, complete: true, again: ins.notStarted()}, true
}

// fromCRI asks each CRI endpoint present about bare.ID, a container or a
// pod sandbox, until one knows it; found: one did.
func (r *Resolver) fromCRI(ctx context.Context, clients []*criClient, bare *Info) (en enrichment, found bool) {
	present, failed := 0, 0
	for _, c := range clients {
		if !c.present() {
			continue
		}
		present++
		if r.isDown(c.socket) {
			failed++
			continue
		}
		st, err := c.lookup(ctx, bare.ID)
		if errors.Is(err, errNotFound) {
			r.ok(SourceCRI, c.socket)
			continue
		}
		if err != nil {
			r.fail(SourceCRI, c.socket, err)
			failed++
			continue
		}
		r.ok(SourceCRI, c.socket)
		info := &st.Info
		info.Runtime = bare.Runtime
		if name, err := c.runtimeName(ctx); err == nil && name != "" {
			// cri-dockerd's answer is a Docker container's.
			info.Runtime = name
		}
		return enrichment{info: info, complete: true, again: st.created}, true
	}
	switch {
	case present == 0:
		err := errors.New("no CRI socket configured")
		if len(r.opts.CRISockets) > 0 {
			err = fmt.Errorf("no CRI socket found (looked for %s)", strings.Join(r.opts.CRISockets, ", "))
		}
		r.fail(SourceCRI, strings.Join(r.opts.CRISockets, " "), err)
		return enrichment{info: bare}, false
	case failed > 0:
		return enrichment{info: bare}, false
	}
	// Nobody knows it: a container removed already, or a pod sandbox
	// containerd has not registered yet (it does once the sandbox runs,
	// after its cgroup appeared).
	return enrichment{info: bare, complete: true, again: true}, false
}
