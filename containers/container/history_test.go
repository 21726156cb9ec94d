package container

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The real daemon's record: `docker kill -s TERM` is a stop signal the
// history holds, with its signal; `docker kill` (SIGKILL) is not; a window
// that ends before both holds neither.
func TestRealDockerStopHistory(t *testing.T) {
	d := dockertest.EnsureDaemon(t)
	img := dockertest.BuildBusyboxImage(t, "sigscope-container-test:latest", "")
	name := fmt.Sprintf("sigscope-history-%d", os.Getpid())
	before := time.Now()
	id := d.RunContainer(t, "--name", name, img, "sh", "-c", "trap '' TERM; sleep 1000 & wait")
	d.Docker(t, "kill", "-s", "TERM", name)
	d.Docker(t, "kill", name)
	after := time.Now()

	r := NewResolver(Options{DockerSocket: d.Socket, CRISockets: []string{}, NoCgroupWatch: true})
	defer r.Close()
	h := r.StopHistory(context.Background(), before, after)
	if !h.Covers(RuntimeDocker, before) {
		t.Errorf("Docker's record of the last seconds is not complete: %+v", h)
	}
	req, ok := h.LastRequest(id, before)
	if !ok || req.Signal != sigvocab.SIGTERM || req.At.Before(before) || req.At.After(after) {
		t.Fatalf("last request %+v (found %v), want SIGTERM between %v and %v; all: %+v", req, ok, before, after, h.Requests)
	}
	for _, q := range h.Requests {
		if q.Signal == sigvocab.SIGKILL {
			t.Errorf("SIGKILL taken for a stop request: %+v", q)
		}
	}
	if early := r.StopHistory(context.Background(), before.Add(-time.Minute), before); func() bool { _, ok := early.LastRequest(id, before.Add(-time.Minute)); return ok }() {
		t.Errorf("a window that ended before the kill holds it: %+v", early.Requests)
	}

	down := NewResolver(Options{DockerSocket: t.TempDir() + "/none.sock", CRISockets: []string{}, NoCgroupWatch: true})
	defer down.Close()
	if h := down.StopHistory(context.Background(), before, after); h.Covers(RuntimeDocker, before) {
		t.Errorf("an unreachable daemon's record taken for complete")
	}
}
