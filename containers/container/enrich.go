package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
)

// enrichment is what asking the runtimes about a container gave.
type enrichment struct {
	info *identity.Info
	// complete: the runtime answered (or there is no runtime to ask);
	// false when one that should know could not be asked.
	complete bool
	// again: ask soon again. The runtime knows the container but has not
	// started it (no main pid yet), or knows nothing of it yet (containerd
	// registers a pod sandbox only once it runs).
	again bool
	// why the runtime told nothing of the container (info is bare): what
	// an episode that cannot name its container says. "" when it answered.
	why string
}

// metaFor returns the container's metadata: cached within TTL, else asked
// of its runtime once, however many lookups wait for it.
func (r *Resolver) metaFor(id, runtime string) *meta {
	if m := r.filesFirst(id, runtime); m != nil {
		return m
	}
	return r.fetchMeta(id, runtime, r.opts.TTL)
}

// filesFirst returns the metadata of container id when its runtime's
// files name it and the runtime's API has not answered about it yet,
// reading the files now when they were not read yet; the API is then asked
// in the background, and its answer replaces the files' in place (the
// cache entries share the meta). Nil when the files do not name it, the
// API answered already, or there is no background to ask it in (no cgroup
// watch: the caller asks the API itself). A lookup, and the cgroup watch
// at a container's start, so never wait for a runtime's API to name a
// container whose name is on disk.
func (r *Resolver) filesFirst(id, runtime string) *meta {
	if r.files == nil || r.prefetch == nil {
		return nil
	}
	r.mu.Lock()
	m, ok := r.metas.Get(id)
	if ok {
		fromFiles := m.info.FromFiles && !m.complete
		r.mu.Unlock()
		if fromFiles {
			return m
		}
		return nil
	}
	r.mu.Unlock()
	info, err := r.files.read(id, runtime)
	if err != nil {
		if !errors.Is(err, errNoFiles) {
			r.fail(SourceFiles, "", err)
		}
		return nil
	}
	if !named(info) {
		return nil
	}
	r.detectRuntime(info)
	now := r.now()
	r.mu.Lock()
	if m, ok = r.metas.Get(id); !ok {
		// fetched is zero: the prefetcher asks the API at once; a lookup
		// hit does not ask it too before retryAt.
		m = &meta{info: info, retryAt: now.Add(r.retryInterval)}
		r.metas.Add(id, m)
	}
	r.mu.Unlock()
	select {
	case r.prefetch <- prefetchItem{id, runtime}:
	default:
		r.queueRecheck(id, runtime, false)
	}
	return m
}

// restarted enriches a container whose cgroup just appeared. A container
// already known with a main pid was started again (docker restart, a
// kubelet restart of the container keeps its ID under dockershim): its
// main pid has changed, so the cached answer is replaced. The cgroup
// appears once per v1 hierarchy: answers younger than a second stand.
func (r *Resolver) restarted(id, runtime string) {
	r.mu.Lock()
	old, ok := r.metas.Get(id)
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
	old, ok := r.metas.Get(id)
	if ok && now.Sub(old.fetched) < maxAge {
		r.mu.Unlock()
		return old
	}
	r.mu.Unlock()
	return once(&r.idCall, id, func() *meta {
		r.mu.Lock()
		r.asking[id]++
		r.mu.Unlock()
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
		m.noteWhy(en)
		r.metas.Add(id, m)
		r.mu.Unlock()
		if en.again || !en.complete {
			r.queueRecheck(id, runtime, !en.complete)
		}
		r.mu.Lock()
		if r.asking[id]--; r.asking[id] <= 0 {
			delete(r.asking, id)
		}
		r.mu.Unlock()
		return m
	})
}

// merged is what is known of a container after the runtime answered next
// with info, when it had answered old before (complete) or not. The API's
// answer replaces what the files said; the files' never replace the API's,
// but for a main pid (the container started, or started again, since).
func merged(old *identity.Info, complete bool, next *identity.Info) *identity.Info {
	if bare(next) && !bare(old) {
		// The runtime has forgotten it (docker rm), or could not be asked
		// and its files are gone: what it said while the container
		// existed still holds.
		return old
	}
	if next.FromFiles && !old.FromFiles && complete && !bare(old) && next.ID == old.ID {
		if next.MainPID == 0 || next.MainPID == old.MainPID {
			return old
		}
		c := *old
		c.MainPID, c.MainRuntime = next.MainPID, next.MainRuntime
		return &c
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
	if en.complete || en.info.FromFiles {
		m.info = merged(m.info, m.complete, en.info)
	}
	if en.complete {
		m.complete = true
	} else {
		m.retryAt = r.now().Add(r.retryInterval)
	}
	m.noteWhy(en)
	r.mu.Unlock()
	if en.again || !en.complete {
		r.queueRecheck(id, runtime, !en.complete)
	}
}

// enrich asks the runtime about a container. Its Info always has the ID
// and runtime, and the main process's language runtime when it has a main
// pid.
func (r *Resolver) enrich(id, runtime string) enrichment {
	en := r.askRuntime(id, runtime)
	if bare(en.info) {
		r.fillFromFiles(&en, id, runtime)
	}
	r.detectRuntime(en.info)
	return en
}

// fillFromFiles gives en, which the runtime's API did not name, what the
// runtime's files say of the container: read again while they have not
// given its main pid (a container asked about before runc started it),
// else what they said. en.complete stays as the API left it: a failed API
// is asked again, and its answer replaces the files'.
func (r *Resolver) fillFromFiles(en *enrichment, id, runtime string) {
	if r.files == nil {
		return
	}
	r.mu.Lock()
	m, ok := r.metas.Get(id)
	if ok && m.info.FromFiles && (m.info.MainPID != 0 || m.fileReads >= r.opts.recheckTries) {
		// Read while they may still give the main pid, as many times as
		// the runtime is asked again for it: a container that exited
		// while its API failed is not read every second for minutes.
		en.info = m.info
		r.mu.Unlock()
		return
	}
	if ok {
		m.fileReads++
	}
	r.mu.Unlock()
	info, err := r.files.read(id, runtime)
	switch {
	case err == nil && named(info):
		en.info = info
	case err != nil && !errors.Is(err, errNoFiles):
		r.fail(SourceFiles, "", err)
	}
}

// detectRuntime sets info.MainRuntime, info being a fresh answer no caller
// holds yet: what the cached answer for the same main process said, else
// read from /proc (langrt.Detect, a few small files). So /proc is read once
// per main process, when the runtime first names it, and again only while
// it is not recognised (the runtime may name it before its entrypoint has
// replaced runc's init), never per event.
func (r *Resolver) detectRuntime(info *identity.Info) {
	if info == nil || info.MainPID <= 0 {
		return
	}
	r.mu.Lock()
	m, ok := r.metas.Get(info.ID)
	if ok && m.info.MainPID == info.MainPID && m.info.MainRuntime != langrt.Unknown {
		info.MainRuntime = m.info.MainRuntime
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	info.MainRuntime = langrt.Detect(r.opts.ProcRoot, info.MainPID)
}

// askRuntime is enrich without the main process's language runtime. Which
// runtimes are asked follows from the runtime the cgroup path names, and
// what their not knowing the container means from which they are.
func (r *Resolver) askRuntime(id, runtime string) enrichment {
	bare := &identity.Info{Identity: identity.Identity{ID: id, Runtime: runtime}}
	rts := r.apis()
	if rts == nil {
		return enrichment{info: bare, complete: true, why: "no runtime API is asked"}
	}
	// Each endpoint asked has APITimeout of its own (ask): one that
	// stalls must not use up the time of the next, which would then fail
	// without having been asked, and be left alone as if it had failed.
	ctx := context.Background()
	switch runtime {
	case RuntimeDocker:
		// Asked even when its socket is missing: the cgroup says Docker
		// runs the container, so a missing socket is an outage to count.
		en, found, _, failed := r.ask(ctx, bySource(rts, SourceDocker), bare, true)
		if !found && failed == 0 {
			// Docker records a container before it makes its cgroup: one
			// it does not know has been removed.
			en.complete, en.why = true, "Docker had removed it before it was asked"
		}
		return en
	case RuntimeContainerd, RuntimeCRIO:
		en, found, asked, failed := r.ask(ctx, bySource(rts, SourceCRI), bare, false)
		switch {
		case found:
			return en
		case asked == 0:
			err := errors.New("no CRI socket configured")
			if len(r.opts.CRISockets) > 0 {
				err = fmt.Errorf("no CRI socket found (looked for %s)", strings.Join(r.opts.CRISockets, ", "))
			}
			r.fail(SourceCRI, strings.Join(r.opts.CRISockets, " "), err)
			en.why = err.Error()
		case failed == 0:
			// Nobody knows it: a container removed already, or a pod
			// sandbox containerd has not registered yet (it does once the
			// sandbox runs, after its cgroup appeared).
			en.complete, en.again = true, true
			en.why = "no CRI runtime knew it (removed before it was asked)"
		}
		if runtime != RuntimeContainerd {
			return en
		}
		// The kubelet's cgroupfs layout is shared by containerd and
		// dockershim/cri-dockerd: ask Docker too, when it is there.
		var docker []runtimeAPI
		for _, a := range bySource(rts, SourceDocker) {
			if _, err := os.Stat(a.endpoint()); err == nil {
				docker = append(docker, a)
			}
		}
		if den, found, _, _ := r.ask(ctx, docker, bare, true); found {
			den.info.Runtime = RuntimeDocker
			return den
		}
		return en
	}
	// podman: its Docker-compatible API is not asked (yet).
	return enrichment{info: bare, complete: true, why: "podman's API is not asked"}
}

// whyFailed says how asking endpoint failed, for an unnamed container.
func (r *Resolver) whyFailed(endpoint string, err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("%s did not answer within %v", endpoint, r.opts.APITimeout)
	}
	return fmt.Sprint(err)
}

// bySource returns the runtimes of rts whose errors count under source.
func bySource(rts []runtimeAPI, source string) []runtimeAPI {
	var out []runtimeAPI
	for _, a := range rts {
		if a.source() == source {
			out = append(out, a)
		}
	}
	return out
}

// ask asks each of apis in turn about bare.ID, a container or a pod
// sandbox, until one knows it (found); those whose socket is missing are
// skipped unless absentToo. asked counts those asked, failed those of them
// that could not answer (down, or an error). When none knows it, the
// enrichment is bare and not complete: what that means is the caller's;
// its why names the endpoints that failed, and how.
func (r *Resolver) ask(ctx context.Context, apis []runtimeAPI, bare *identity.Info, absentToo bool) (en enrichment, found bool, asked, failed int) {
	var why []string
	for _, a := range apis {
		if !absentToo && !a.present() {
			continue
		}
		asked++
		if r.isDown(a.endpoint()) {
			failed++
			why = append(why, r.whyFailed(a.endpoint(), r.lastErr(a.endpoint()))+" (not asked again yet)")
			continue
		}
		sent := r.now()
		actx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
		ans, err := a.describe(actx, runtimeRef{id: bare.ID})
		cancel()
		if errors.Is(err, errNotFound) {
			r.ok(a.source(), a.endpoint())
			continue
		}
		if errors.Is(err, errNoCRI) && !absentToo {
			// No runtime after all: as if its socket were missing.
			r.failSince(a.source(), a.endpoint(), err, sent)
			asked--
			continue
		}
		if err != nil {
			r.failSince(a.source(), a.endpoint(), err, sent)
			failed++
			why = append(why, r.whyFailed(a.endpoint(), err))
			continue
		}
		r.ok(a.source(), a.endpoint())
		info := ans.info
		if info.Runtime == "" {
			info.Runtime = bare.Runtime
		}
		return enrichment{info: info, complete: true, again: ans.notStarted}, true, asked, failed
	}
	return enrichment{info: bare, why: strings.Join(why, "; ")}, false, asked, failed
}
