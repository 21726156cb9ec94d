package container

import (
	"fmt"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Caches reports each bounded cache against its bound, and a resolver fed
// more containers than MaxEntries, which then all end, holds MaxEntries
// of each.
func TestCachesReportBounds(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{MaxEntries: 3})
	ids := make([]string, 5)
	procs := make([]*sigvocab.Process, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", 0xc0ffee00+i)
		p := h.dockerProcess(uint32(700+i), uint32(4026532700+i), ids[i])
		procs[i] = p
		waitIndexed(t, r, p.CgroupV1ID, true, false)
		if info := r.Lookup(p); info == nil || info.ID != ids[i] {
			t.Fatalf("Lookup = %+v, want %s", info, ids[i])
		}
	}
	// All end, after all were made: a test directory's inode, unlike a
	// cgroup's id, is reused at once.
	for i, id := range ids {
		p := procs[i]
		h.removeProcess(uint32(700 + i))
		h.rmCgroup(false, "/docker/"+id)
		h.rmCgroup(true, "/docker/"+id)
		waitIndexed(t, r, p.CgroupV1ID, true, true)
		waitIndexed(t, r, p.CgroupID, false, true)
	}
	got := map[string]CacheSize{}
	for _, c := range r.Caches() {
		got[c.Name] = c
	}
	for _, want := range []CacheSize{
		{"resolver_processes", 3, 3},
		{"resolver_containers", 3, 3},
		{"cgroups_removed_v1", 3, 3},
		{"cgroups_removed_v2", 3, 3},
		{"resolver_rechecks", 0, prefetchQueue},
	} {
		if got[want.Name] != want {
			t.Errorf("%s: %+v, want %+v", want.Name, got[want.Name], want)
		}
	}
	if w := got["cgroup_watches"]; w.Entries == 0 || w.Capacity != maxWatches {
		t.Errorf("cgroup_watches: %+v", w)
	}
	if _, ok := got["resolver_prefetch_queue"]; ok {
		t.Error("a resolver that asks no runtime has no prefetch queue")
	}
}
