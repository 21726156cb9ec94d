package timeline

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sigscope/sigscope/internal/sigvocab"
	"github.com/sigscope/sigscope/internal/textsafe"
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

// WriteText writes the pod's stop as one view: every container's steps on
// one clock, each line naming its container, then each container's outcome
// and the sandbox's teardown. Untrusted strings are escaped here.
func (ps *PodStop) WriteText(w io.Writer) error {
	var b strings.Builder
	start := time.Time{}
	for _, ep := range ps.Episodes {
		if start.IsZero() || ep.Start.Before(start) {
			start = ep.Start
		}
	}
	var nodes []string
	for _, ep := range ps.Episodes {
		if ep.Node != "" && !slices.Contains(nodes, ep.Node) {
			nodes = append(nodes, ep.Node)
		}
	}
	on := ""
	if len(nodes) > 0 {
		on = " on node " + textsafe.Terminal(strings.Join(nodes, ", "))
	}
	fmt.Fprintf(&b, "pod %s/%s%s: %d container(s) stopped, from %s\n", textsafe.Terminal(ps.Namespace), textsafe.Terminal(ps.Pod), on,
		len(ps.Episodes), start.Format(sigvocab.TimeFormat))
	type line struct {
		at   time.Time
		name string
		text string
	}
	var lines []line
	width := 0
	for _, ep := range ps.Episodes {
		name := ep.Container.Name
		width = max(width, len(textsafe.Terminal(name)))
		for _, s := range ep.Steps {
			if s.Kind == StepSandbox {
				continue // once, below
			}
			lines = append(lines, line{s.Time, name, s.Text})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	for _, l := range lines {
		fmt.Fprintf(&b, "%-8s %-*s  %s\n", offset(l.at.Sub(start)), width, textsafe.Terminal(l.name), textsafe.Terminal(l.text))
	}
	if !ps.SandboxAt.IsZero() {
		fmt.Fprintf(&b, "%-8s %-*s  the pod's sandbox is torn down\n", offset(ps.SandboxAt.Sub(start)), width, "")
	}
	for _, ep := range ps.Episodes {
		fmt.Fprintf(&b, "%s: %s — %s\n", textsafe.Terminal(ep.Container.Name), textsafe.Terminal(string(ep.Outcome)), textsafe.Terminal(ep.Summary()))
		if ep.Hint != "" {
			fmt.Fprintf(&b, "  hint: %s\n", textsafe.Terminal(ep.Hint))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
