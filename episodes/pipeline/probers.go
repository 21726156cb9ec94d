package pipeline

import (
	"slices"
	"time"

	"github.com/sigscope/sigscope/tracer"
)

// probersEvery is how often the node's probers (the kubelet's processes)
// are looked for again: a restarted kubelet is found within it.
const probersEvery = 5 * time.Second

// noteProbers tells the kernel which processes' connections are probes
// (tracer.SetProbers): the kubelet's, found by name in /proc, at most every
// probersEvery. A node without a kubelet has none, and costs a /proc read
// every probersEvery while events come.
func (p *Pipeline) noteProbers(now time.Time) {
	if p.t == nil || !p.t.CountsConnections() || now.Sub(p.probersAt) < probersEvery {
		return
	}
	p.probersAt = now
	pids, err := tracer.FindProbers("/proc")
	if err != nil {
		p.log().Warn("looking for the kubelet, whose probes count apart from clients", "error", err)
		return
	}
	if slices.Equal(pids, p.probers) {
		return
	}
	if err := p.t.SetProbers(pids); err != nil {
		p.log().Warn("naming the kubelet's processes to the kernel: its probes count as clients", "error", err)
		return
	}
	if len(pids) > 0 {
		p.log().Info("the kubelet's probes count apart from clients", "pids", pids)
	}
	p.probers = pids
}
