package timeline

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// WriteText writes the episode as a readable timeline: a header naming the
// container, one line per step with its offset from the episode's start,
// then the outcome and the hint, and what the stop cost its clients (a
// "traffic:" line with the verdict and the counts, a "traffic hint:" line
// when there is one). Every string that came from a process or a
// runtime is escaped for the terminal here, and only here, so an episode read
// back from untrusted JSON prints safely too.
func (ep *Episode) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(textsafe.Terminal(ep.title()))
	b.WriteByte('\n')
	for i := range ep.Steps {
		s := &ep.Steps[i]
		fmt.Fprintf(&b, "%-8s %s\n", offset(s.At), textsafe.Terminal(s.Text))
	}
	if ep.StepsOmitted > 0 {
		fmt.Fprintf(&b, "%-8s (%d more steps not kept)\n", "", ep.StepsOmitted)
	}
	fmt.Fprintf(&b, "outcome: %s — %s\n", textsafe.Terminal(string(ep.Outcome)), textsafe.Terminal(ep.Summary()))
	if ep.Hint != "" {
		fmt.Fprintf(&b, "hint: %s\n", textsafe.Terminal(ep.Hint))
	}
	ep.writeTraffic(&b, ep.Start)
	if race := ep.EndpointRace(); race != "" {
		fmt.Fprintf(&b, "endpoints: %s\n", textsafe.Terminal(race))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTraffic writes the traffic's lines, its times as offsets from start.
func (ep *Episode) writeTraffic(b *strings.Builder, start time.Time) {
	t := ep.Traffic
	if t == nil {
		return
	}
	fmt.Fprintf(b, "traffic: %s (%s)\n", textsafe.Terminal(t.Verdict), trafficCounts(t, start, ep.Container.Pod != ""))
	if t.Hint != "" {
		fmt.Fprintf(b, "traffic hint: %s\n", textsafe.Terminal(t.Hint))
	}
	if h := t.PeersText(); h != "" {
		fmt.Fprintf(b, "hurt: %s\n", textsafe.Terminal(h))
	}
	if l := ep.LagText(); l != "" {
		fmt.Fprintf(b, "last request: %s\n", textsafe.Terminal(l))
	}
}

// offset formats a step's offset: "+0.000s", "+10.003s".
func offset(d time.Duration) string {
	return fmt.Sprintf("%+.3fs", d.Seconds())
}

// title names the container and the start: "container web (3f2a1b9c4d5e,
// docker, image app:1, pid ns 4026532177) at 2026-...".
func (ep *Episode) title() string {
	c := &ep.Container
	var parts []string
	if c.ID != "" {
		parts = append(parts, c.ShortID())
	}
	if c.Runtime != "" {
		parts = append(parts, c.Runtime)
	}
	if c.Image != "" {
		parts = append(parts, "image "+c.Image)
	}
	parts = append(parts, fmt.Sprintf("pid ns %d", c.PidNS))
	if c.IdentityFrom == IdentityFromFiles {
		named := "named from the runtime's files"
		if c.NotInFiles != "" {
			named += ", which do not give its " + c.NotInFiles
		}
		parts = append(parts, named)
	}
	if ep.Node != "" {
		parts = append(parts, "node "+ep.Node)
	}
	var who string
	switch {
	case c.Pod != "":
		who = fmt.Sprintf("pod %s/%s container %s", c.Namespace, c.Pod, c.Name)
	case c.Name != "":
		who = "container " + c.Name
	case c.ID != "" && c.NameUnknown != "":
		who = "container (name unknown: " + c.NameUnknown + ")"
	case c.ID != "":
		who = "container"
	default:
		who = "pid namespace (no container resolved)"
	}
	return fmt.Sprintf("%s (%s) at %s", who, strings.Join(parts, ", "), ep.Start.Format(sigvocab.TimeFormat))
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
	for i, ep := range ps.Episodes {
		name := ep.Container.Name
		width = max(width, len(textsafe.Terminal(name)))
		for _, s := range ep.Steps {
			switch {
			case s.Kind == StepSandbox || s.Kind.traffic() && ps.trafficShown(i):
				continue // once, below; the pod's network namespace's once
			case s.Kind.traffic():
				lines = append(lines, line{s.Time, "", s.Text}) // the pod's, not one container's
			default:
				lines = append(lines, line{s.Time, name, s.Text})
			}
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
	for i := range ps.Episodes {
		if !ps.trafficShown(i) {
			ps.Episodes[i].writeTraffic(&b, start)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// trafficShown reports whether an earlier episode of the pod shows the
// same traffic: its containers share one network namespace, whose counts
// each of their episodes took from one read.
func (ps *PodStop) trafficShown(i int) bool {
	t := ps.Episodes[i].Traffic
	if t == nil {
		return false
	}
	for _, ep := range ps.Episodes[:i] {
		if o := ep.Traffic; o != nil && o.NetNS == t.NetNS && o.Until.Equal(t.Until) && o.Unread == t.Unread {
			return true
		}
	}
	return false
}
