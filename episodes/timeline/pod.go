package timeline

import (
	"slices"
	"time"
)

// PodStop is the stop of a whole pod: the episodes of its containers, in
// the order their stops began (the kubelet stops a pod's containers in
// parallel, native sidecars after the main containers), and its sandbox's
// teardown when it was seen.
type PodStop struct {
	Namespace, Pod string
	Episodes       []Episode
	SandboxAt      time.Time // the sandbox's SIGKILL or end; zero when not seen
}

// PodGrouper gathers completed episodes into pod stops: a pod's stop is
// complete when an episode of it shows the sandbox's teardown (the last
// thing the kubelet does) and none of its episodes is still open, or at
// Flush. Episodes of no pod pass through at once. Bounded: at most max pods
// wait, the oldest is handed over first.
type PodGrouper struct {
	max     int
	open    func(namespace, pod string) bool
	waiting []*PodStop
}

// NewPodGrouper returns a grouper keeping at most max pods waiting (0:
// 256). open, when not nil, tells whether the engine still has an episode
// of the pod in progress (Engine.HasOpen): every episode open at the
// sandbox's teardown shows it, so the pod is complete when the last of
// them is.
func NewPodGrouper(max int, open func(namespace, pod string) bool) *PodGrouper {
	if max <= 0 {
		max = 256
	}
	return &PodGrouper{max: max, open: open}
}

// Add takes completed episodes and returns the pod stops now complete, and
// the episodes of no pod. A batch is taken whole before any pod is judged
// complete: episodes that completed together belong together.
func (g *PodGrouper) Add(eps []Episode) (pods []PodStop, single []Episode) {
	var touched []*PodStop
	for _, ep := range eps {
		if ep.Container.Pod == "" {
			single = append(single, ep)
			continue
		}
		ps := g.find(ep.Container.Namespace, ep.Container.Pod)
		if ps == nil {
			if len(g.waiting) >= g.max {
				pods = append(pods, g.done(0))
			}
			ps = &PodStop{Namespace: ep.Container.Namespace, Pod: ep.Container.Pod}
			g.waiting = append(g.waiting, ps)
		}
		ps.Episodes = append(ps.Episodes, ep)
		for _, s := range ep.Steps {
			if s.Kind == StepSandbox && (ps.SandboxAt.IsZero() || s.Time.Before(ps.SandboxAt)) {
				ps.SandboxAt = s.Time
			}
		}
		if !slices.Contains(touched, ps) {
			touched = append(touched, ps)
		}
	}
	for _, ps := range touched {
		i := slices.Index(g.waiting, ps)
		if i >= 0 && !ps.SandboxAt.IsZero() && (g.open == nil || !g.open(ps.Namespace, ps.Pod)) {
			pods = append(pods, g.done(i))
		}
	}
	return pods, single
}

// Flush hands over every waiting pod, oldest first.
func (g *PodGrouper) Flush() []PodStop {
	var out []PodStop
	for len(g.waiting) > 0 {
		out = append(out, g.done(0))
	}
	return out
}

func (g *PodGrouper) find(ns, pod string) *PodStop {
	for _, ps := range g.waiting {
		if ps.Namespace == ns && ps.Pod == pod {
			return ps
		}
	}
	return nil
}

func (g *PodGrouper) done(i int) PodStop {
	ps := g.waiting[i]
	g.waiting = slices.Delete(g.waiting, i, i+1)
	slices.SortStableFunc(ps.Episodes, func(a, b Episode) int { return a.Start.Compare(b.Start) })
	return *ps
}
