package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
)

// Running is a running container and the host pid of its PID 1.
type Running struct {
	Info Info
	PID  int // host pid of the container's main process (Info.MainPID); 0 when the runtime did not say
}

// ListRunning asks every reachable runtime for its running containers, for
// `sigscope audit`. Pod sandboxes are not listed: their pause process is
// not a workload. Runtimes whose socket does not exist are skipped; when
// none exists it returns an error. A runtime that exists but fails adds to
// the returned error while the others' containers are still returned. The
// answers refresh the resolver's metadata cache.
func (r *Resolver) ListRunning(ctx context.Context) ([]Running, error) {
	r.mu.Lock()
	docker, cri := r.docker, r.cri
	r.mu.Unlock()
	if docker == nil {
		return nil, errors.New("container runtime APIs are disabled")
	}
	var (
		out   []Running
		errs  []error
		tried []string
		seen  = make(map[string]bool)
	)
	add := func(run Running) {
		if run.Info.ID == "" || run.Info.Sandbox || seen[run.Info.ID] {
			return
		}
		seen[run.Info.ID] = true
		r.detectRuntime(&run.Info)
		out = append(out, run)
		info := run.Info
		now := r.now()
		r.mu.Lock()
		r.metas.put(info.ID, &meta{info: &info, fetched: now, complete: true})
		r.mu.Unlock()
	}

	if fi, err := os.Stat(docker.socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		tried = append(tried, docker.socket)
		runs, err := r.listDocker(ctx, docker)
		if err != nil {
			r.fail(SourceDocker, docker.socket, err)
			errs = append(errs, err)
		} else {
			r.ok(SourceDocker, docker.socket)
		}
		for _, run := range runs {
			add(run)
		}
	}
	for _, c := range cri {
		if !c.present() {
			continue
		}
		tried = append(tried, c.socket)
		runs, err := r.listCRI(ctx, c)
		if err != nil {
			r.fail(SourceCRI, c.socket, err)
			errs = append(errs, err)
		} else {
			r.ok(SourceCRI, c.socket)
		}
		for _, run := range runs {
			add(run)
		}
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("no container runtime socket found (looked for %s and %v)", docker.socket, r.opts.CRISockets)
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

func (r *Resolver) listDocker(ctx context.Context, c *dockerClient) ([]Running, error) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
	ids, err := c.running(cctx)
	cancel()
	if err != nil {
		return nil, err
	}
	var out []Running
	var errs []error
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
		ins, err := c.inspect(cctx, id)
		cancel()
		if errors.Is(err, errNotFound) {
			continue // removed since the list
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		info := ins.info()
		if !ins.State.Running || info.Sandbox {
			continue
		}
		out = append(out, Running{Info: *info, PID: info.MainPID})
	}
	return out, errors.Join(errs...)
}

func (r *Resolver) listCRI(ctx context.Context, c *criClient) ([]Running, error) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
	defer cancel()
	name, err := c.runtimeName(cctx)
	if err != nil {
		return nil, err
	}
	ids, err := c.running(cctx)
	if err != nil {
		return nil, err
	}
	var out []Running
	var errs []error
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, r.opts.APITimeout)
		st, err := c.status(cctx, id)
		cancel()
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st.Info.Runtime = name
		out = append(out, Running{Info: st.Info, PID: st.Info.MainPID})
	}
	return out, errors.Join(errs...)
}
