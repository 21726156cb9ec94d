package container

import (
	"testing"
)

// BenchmarkLookupHit is the hot path: every event's target and sender, a
// container process and a host process, both cached.
func BenchmarkLookupHit(b *testing.B) {
	h := newFakeHost(b)
	r := h.resolver(Options{})
	p := h.dockerProcess(100, 4026532100, id1)
	host := h.hostProcess(200, "/system.slice")
	r.Lookup(p)
	r.Lookup(host)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r.Lookup(p) == nil || r.Lookup(host) != nil {
			b.Fatal("wrong answer")
		}
	}
}
