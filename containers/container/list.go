package container

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sigscope/sigscope/containers/identity"
)

// ListRunning asks every reachable runtime for its running containers, for
// `sigscope audit`. Pod sandboxes are not listed: their pause process is
// not a workload. Runtimes whose socket does not exist are skipped; when
// none exists it returns an error. A runtime that exists but fails adds to
// the returned error while the others' containers are still returned. The
// answers refresh the resolver's metadata cache.
func (r *Resolver) ListRunning(ctx context.Context) ([]identity.Running, error) {
	rts := r.apis()
	if rts == nil {
		return nil, errors.New("container runtime APIs are disabled")
	}
	var (
		out   []identity.Running
		errs  []error
		tried []string
		seen  = make(map[string]bool)
	)
	for _, a := range rts {
		if !a.present() {
			continue
		}
		sent := r.now()
		runs, err := r.listRunning(ctx, a)
		if errors.Is(err, errNoCRI) {
			r.failSince(a.source(), a.endpoint(), err, sent) // said once, not counted
			continue
		}
		tried = append(tried, a.endpoint())
		if err != nil {
			r.failSince(a.source(), a.endpoint(), err, sent)
			errs = append(errs, err)
		} else {
			r.ok(a.source(), a.endpoint())
		}
		for _, run := range runs {
			if run.Info.ID == "" || run.Info.Sandbox || seen[run.Info.ID] {
				continue
			}
			seen[run.Info.ID] = true
			r.detectRuntime(&run.Info)
			out = append(out, run)
			info := run.Info
			now := r.now()
			r.mu.Lock()
			r.metas.Add(info.ID, &meta{info: &info, fetched: now, complete: true})
			r.mu.Unlock()
		}
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("no container runtime socket found (looked for %s and %v)", r.opts.DockerSocket, r.opts.CRISockets)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Info, out[j].Info
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Pod != b.Pod {
			return a.Pod < b.Pod
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return out, errors.Join(errs...)
}

// listRunning lists the running containers of one runtime, pod sandboxes
// left out; those that ended since the list are too.
func (r *Resolver) listRunning(ctx context.Context, a runtimeAPI) ([]identity.Running, error) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
	refs, err := a.list(cctx, false)
	cancel()
	if err != nil {
		return nil, err
	}
	var out []identity.Running
	var errs []error
	for _, ref := range refs {
		cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
		ans, err := a.describe(cctx, ref)
		cancel()
		if errors.Is(err, errNotFound) {
			continue // removed since the list
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ans.stopped || ans.info.Sandbox {
			continue
		}
		out = append(out, identity.Running{Info: *ans.info, PID: ans.info.MainPID})
	}
	return out, errors.Join(errs...)
}
