package kubeplugin

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// WorkloadStops sums up a workload's stops: the row of `top`.
type WorkloadStops struct {
	Namespace string         `json:"namespace"`
	Workload  timeline.Owner `json:"workload"` // Pod/NAME for a pod no controller owns; Container/NAME outside Kubernetes
	Stops     int            `json:"stops"`
	Outcomes  map[string]int `json:"outcomes"`
	// NeedsFix counts the stops the container itself made go wrong
	// (timeline.Outcome.NeedsFix): what to fix first.
	NeedsFix int      `json:"needs_fix"`
	Exit137  int      `json:"exit_137"` // SIGKILLed main processes: the runtime's "exit code 137"
	Slowest  *Slowest `json:"slowest,omitempty"`
	Nodes    []string `json:"nodes"`
	// LostTraffic counts the stops whose clients lost requests (the
	// episode's traffic, timeline.Traffic.Lost: refused, reset by the
	// application, unanswered, after a close, cut), and LostConnections
	// sums what they lost. A pod's containers share its traffic: it counts
	// once per pod's stop (timeline.Watch), whichever of its containers'
	// episodes carry it.
	LostTraffic     int    `json:"lost_traffic"`
	LostConnections uint64 `json:"lost_connections"`
	// EndpointLag is the longest time, over the stops, from the pod's
	// deletion to its endpoint's first change in a Service, as the agent
	// saw the EndpointSlices; absent when no stop measured it.
	EndpointLag *float64 `json:"endpoint_lag_s,omitempty"`
	// PreStopSleep is the preStop sleep, in seconds, that would have
	// covered the refused attempts measured, a hook the pods had included:
	// each stop's timeline.CoveringPreStopSleep, and over the stops
	// timeline.CoveringOverStops (the longest of a few, the 95th
	// percentile of many), which PreStopSleepFrom says; absent when none
	// was refused.
	PreStopSleep     *int   `json:"prestop_sleep_s,omitempty"`
	PreStopSleepFrom string `json:"prestop_sleep_from,omitempty"`
	sleeps           []int
	watches          []watchTaken
	// RunningOOMKills counts OOM kills in its containers that lived on
	// (outcome oom_kill_survived): not stops, and in none of the above.
	RunningOOMKills int `json:"running_oom_kills"`
	// Reasons counts the stops by why the kubelet stopped the container
	// (the episode's stop_reason: deleted, evicted, preempted,
	// probe_failed, restarted, deadline_exceeded, node_shutdown,
	// poststart_failed, unknown); a stop with none (Docker, or no API
	// server) is not counted here.
	Reasons map[string]int `json:"reasons"`
}

// Slowest is the longest stop of a workload.
type Slowest struct {
	Seconds   float64          `json:"seconds"`
	Pod       string           `json:"pod,omitempty"`
	Container string           `json:"container,omitempty"`
	Outcome   timeline.Outcome `json:"outcome"`
	At        time.Time        `json:"at"`
}

// watchTaken is what a workload's row took of one pod's stop's traffic
// (the kernel's count, on its node), whichever of the pod's containers'
// episodes it came from: the most lost (a later read includes an earlier
// one's), and where its covering sleep is in sleeps (-1: none yet).
type watchTaken struct {
	node  string // and the pod's namespace and name: the count's
	pod   [2]string
	watch timeline.Watch
	lost  uint64
	sleep int
}

// takeTraffic adds ep's traffic to w, once per pod's stop.
func (w *WorkloadStops) takeTraffic(ep *timeline.Episode) {
	t := ep.Traffic
	if t == nil {
		return
	}
	var taken *watchTaken
	pod := [2]string{ep.Container.Namespace, ep.Container.Pod}
	for i := range w.watches {
		if w.watches[i].node == ep.Node && w.watches[i].pod == pod && w.watches[i].watch.Same(t.Watch()) {
			taken = &w.watches[i]
			break
		}
	}
	if taken == nil {
		w.watches = append(w.watches, watchTaken{node: ep.Node, pod: pod, watch: t.Watch(), sleep: -1})
		taken = &w.watches[len(w.watches)-1]
	}
	if lost := t.Lost(); lost > taken.lost {
		if taken.lost == 0 {
			w.LostTraffic++
		}
		w.LostConnections += lost - taken.lost
		taken.lost = lost
	}
	if secs, ok := ep.CoveringPreStopSleep(); ok {
		switch {
		case taken.sleep < 0:
			taken.sleep = len(w.sleeps)
			w.sleeps = append(w.sleeps, secs)
		case secs > w.sleeps[taken.sleep]:
			w.sleeps[taken.sleep] = secs
		}
	}
}

// workloadOf names the group an episode counts in.
func workloadOf(ep *timeline.Episode) timeline.Owner {
	switch c := &ep.Container; {
	case ep.Owner != nil:
		return *ep.Owner
	case c.Pod != "":
		return timeline.Owner{Kind: "Pod", Name: c.Pod}
	case c.Name != "":
		return timeline.Owner{Kind: "Container", Name: c.Name}
	default:
		return timeline.Owner{Kind: "PidNamespace", Name: strconv.FormatUint(uint64(c.PidNS), 10)}
	}
}

// Top groups episodes by workload, worst first: the most stops to fix, then
// the most exit 137s, then the slowest stop.
func Top(eps []timeline.Episode) []WorkloadStops {
	byKey := map[string]*WorkloadStops{}
	for i := range eps {
		ep := &eps[i]
		wl := workloadOf(ep)
		k := ep.Container.Namespace + "\x00" + wl.Kind + "\x00" + wl.Name
		w := byKey[k]
		if w == nil {
			w = &WorkloadStops{Namespace: ep.Container.Namespace, Workload: wl, Outcomes: map[string]int{}, Reasons: map[string]int{}}
			byKey[k] = w
		}
		if !ep.Outcome.IsStop() {
			w.RunningOOMKills++
			continue
		}
		w.Stops++
		w.Outcomes[string(ep.Outcome)]++
		if ep.StopReason != "" {
			w.Reasons[ep.StopReason]++
		}
		if ep.Outcome.NeedsFix() {
			w.NeedsFix++
		}
		if !ep.ExitAt.IsZero() && ep.ExitStatus == 137 {
			w.Exit137++
		}
		if d, ok := ep.StopDuration(); ok && (w.Slowest == nil || d.Seconds() > w.Slowest.Seconds) {
			w.Slowest = &Slowest{Seconds: d.Seconds(), Pod: ep.Container.Pod, Container: ep.Container.Name, Outcome: ep.Outcome, At: ep.Start}
		}
		w.takeTraffic(ep)
		for _, c := range ep.Endpoints {
			if c.AfterDeletion != nil && (w.EndpointLag == nil || c.AfterDeletion.Seconds() > *w.EndpointLag) {
				lag := c.AfterDeletion.Seconds()
				w.EndpointLag = &lag
			}
		}
		if ep.Node != "" && !slices.Contains(w.Nodes, ep.Node) {
			w.Nodes = append(w.Nodes, ep.Node)
		}
	}
	out := make([]WorkloadStops, 0, len(byKey))
	for _, w := range byKey {
		if secs, how, ok := timeline.CoveringOverStops(w.sleeps); ok {
			w.PreStopSleep, w.PreStopSleepFrom = &secs, how
		}
		sort.Strings(w.Nodes)
		if w.Nodes == nil {
			w.Nodes = []string{}
		}
		out = append(out, *w)
	}
	slowest := func(w *WorkloadStops) float64 {
		if w.Slowest == nil {
			return 0
		}
		return w.Slowest.Seconds
	}
	slices.SortFunc(out, func(a, b WorkloadStops) int {
		return cmp.Or(cmp.Compare(b.NeedsFix, a.NeedsFix), cmp.Compare(b.Exit137, a.Exit137), cmp.Compare(slowest(&b), slowest(&a)),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Workload.String(), b.Workload.String()))
	})
	return out
}

func (o *options) topCmd() *cobra.Command {
	since := time.Hour
	cmd := &cobra.Command{
		Use:   "top",
		Short: "The workloads whose containers stop worst, over the last hour (--since)",
		Long: `Groups the stops the agents saw in the window by workload (the pod's
Deployment, StatefulSet, DaemonSet, Job, ...; Pod/NAME for a bare pod): the
stops, their outcomes, how many need a fix in the container (ignored_by_init,
ignored, handler_timeout, prestop_timeout, oom_killed), how many ended in
exit 137, and the slowest stop (stop_duration_s: from the preStop hook, else the
stop signal, else the episode's start, to the exit). Then what the stops cost
their clients: how many lost requests (LOST-TRAFFIC: refused, reset by the
application, read and never answered, sent after a close, cut, as the kernel
counted them; the kubelet's probes are none of them), the longest time from a
pod's deletion to its endpoint's first change in a Service (ENDPOINT-LAG, as
the agent saw the EndpointSlices), and the preStop sleep that would have
covered the refused attempts measured (PRESTOP-SLEEP: the longest of fewer
than 20 stops, the 95th percentile of more). Worst first: the list of
workloads to fix.

An agent that started within the window, or whose episode ring no longer
reaches back to its start, is named: its count is short.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runTop(cmd, since) },
	}
	cmd.Flags().DurationVar(&since, "since", since, "the window: stops that began within this long")
	return cmd
}

func (o *options) runTop(cmd *cobra.Command, since time.Duration) error {
	if since <= 0 {
		return UsageError{fmt.Errorf("--since %v: want a positive duration", since)}
	}
	ctx := cmd.Context()
	s, pods, err := o.begin(ctx)
	if err != nil {
		return err
	}
	q := apiv1.EpisodeQuery{Namespace: s.namespace, Since: sinceTime(since)}
	res, agents, err := readAgents[timeline.Episode](ctx, o, s, "/api/v1/episodes", q.Values(), true)
	if err != nil {
		return err
	}
	rows := Top(mergeEpisodes(res, pods))
	warnings := windowWarnings(res, since)
	for _, w := range warnings {
		fmt.Fprintf(o.stderr, "warning: %s\n", w)
	}
	if !o.table() {
		return o.writeList("WorkloadStopList", rows, agents, warnings)
	}
	if len(rows) == 0 {
		fmt.Fprintf(o.stderr, "no stops in the last %v in %s on %d node(s) read\n", since, orAll(s.namespace), len(res))
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 8, 2, ' ', 0)
	if len(rows) > 0 {
		fmt.Fprintln(tw, "NAMESPACE\tWORKLOAD\tSTOPS\tNEEDS-FIX\tEXIT-137\tSLOWEST\tLOST-TRAFFIC\tENDPOINT-LAG\tPRESTOP-SLEEP\tREASONS\tOUTCOMES")
	}
	for i := range rows {
		r := &rows[i]
		slow := "-"
		if r.Slowest != nil {
			slow = fmt.Sprintf("%.1fs", r.Slowest.Seconds)
			if r.Slowest.Pod != "" {
				slow += " (" + r.Slowest.Pod + ")"
			}
		}
		lost, lag, sleep := "-", "-", "-"
		if r.LostTraffic > 0 {
			lost = fmt.Sprintf("%d (%d conns)", r.LostTraffic, r.LostConnections)
		}
		if r.EndpointLag != nil {
			lag = fmt.Sprintf("%.1fs", *r.EndpointLag)
		}
		if r.PreStopSleep != nil {
			sleep = fmt.Sprintf("%ds", *r.PreStopSleep)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(r.Namespace), cell(r.Workload.String()), r.Stops, r.NeedsFix, r.Exit137,
			cell(slow), lost, lag, sleep, reasonCounts(r.Reasons), outcomeCounts(r.Outcomes, r.RunningOOMKills))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	unreadable(o.stdout, agents)
	return nil
}

// outcomeCounts is "ignored_by_init=3,graceful=1", in timeline.Outcomes
// order, then the OOM kills its containers lived through, which are no
// stops: "graceful=1 (+2 oom_kill_survived)".
func outcomeCounts(m map[string]int, runningOOM int) string {
	var parts []string
	for _, oc := range timeline.Outcomes {
		if n := m[string(oc)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", oc, n))
		}
	}
	s := strings.Join(parts, ",")
	if runningOOM > 0 {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("(+%d %s)", runningOOM, timeline.OutcomeOOMKillSurvived)
	}
	return s
}

// reasonCounts is "deleted=3,probe_failed=1", sorted by name; "-" for none.
func reasonCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", cell(n), m[n])
	}
	return strings.Join(parts, ",")
}
