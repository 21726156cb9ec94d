package kubeplugin

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
)

func (o *options) rolloutCmd() *cobra.Command {
	var (
		revision int64
		last     int
		eventTTL time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rollout (deploy/NAME | sts/NAME | ds/NAME | rollout/NAME)",
		Short: "What each rollout of a workload cost its clients, on every node, and whether the last change helped",
		Long: `Reports a workload's rollouts: each revision change, the pods of the
revision before it that it stopped (on whichever node), what their clients
lost, kind by kind, the grace they were given and used, the endpoint lag;
then one verdict, the preStop sleep and terminationGracePeriodSeconds that
would have covered the stops (measured, not guessed), and the rollout
against the one before it: what changed in the stopped revisions'
templates, and what it did to the lost requests.

A rollout's beginning comes from its ReplicaSet's (or ControllerRevision's)
creation, or for a rollback from the Deployment's scaling event while the
API server keeps events. Only the agents of the nodes that ran the pods are
asked (the pods that exist, and the kubelets' Killing events), while the
events reach back to the rollout (--event-ttl, the API server's own, 1 h
by default); an older rollout asks every agent. A node not read, or whose
agent started after the rollout, makes the report partial, and it says so.

An Argo Rollouts Rollout (rollout/NAME) is a workload of its own: its
ReplicaSets are numbered by rollout.argoproj.io/revision and its pods
labelled rollouts-pod-template-hash; it is in progress until Healthy.

Needs, in the workload's namespace: get the workload, list replicasets
(Deployment, Rollout) or controllerrevisions (StatefulSet, DaemonSet), list
pods and events (the chart's sigscope-rollout-reader; the built-in
ClusterRole view has all but Rollouts), besides reading the agents
(docs/kubectl.md).`,
		Example: `  kubectl sigscope rollout deploy/web -n shop              # the last rollout
  kubectl sigscope rollout deploy/web -n shop --last 3     # the last three, each against the one before
  kubectl sigscope rollout sts/db --revision 7 -o json     # the rollout that made revision 7 current`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if revision < 0 || last < 1 {
				return UsageError{fmt.Errorf("--revision %d, --last %d: want a revision number and 1 or more", revision, last)}
			}
			return o.runRollout(cmd.Context(), args[0], revision, last, eventTTL)
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "the rollout that made this revision current (its number then: a rollback gives a reused revision a new one)")
	cmd.Flags().IntVar(&last, "last", 1, "the last this many rollouts")
	cmd.Flags().DurationVar(&eventTTL, "event-ttl", time.Hour, "how long the API server keeps events (kube-apiserver --event-ttl): rollouts within it ask only their pods' nodes")
	return cmd
}

func (o *options) runRollout(ctx context.Context, arg string, revision int64, last int, eventTTL time.Duration) error {
	t, err := parseTarget(arg)
	if err != nil {
		return err
	}
	if appsResources[t.owner.Kind] == "" {
		return UsageError{fmt.Errorf("%q: a rollout is a Deployment's, a StatefulSet's, a DaemonSet's or an Argo Rollouts Rollout's (deploy/NAME, sts/NAME, ds/NAME, rollout/NAME)", arg)}
	}
	if o.all {
		return UsageError{fmt.Errorf("a workload is named in one namespace: -n, not -A")}
	}
	s, err := o.session()
	if err != nil {
		return err
	}
	ns, wl := s.namespace, t.owner
	api := s.fleet.API
	w, revs, err := readRevisions(ctx, api, ns, wl.Kind, wl.Name)
	if err != nil {
		return rolloutReadErr(wl, ns, err)
	}
	now := time.Now()
	var warnings []string
	warn := func(format string, a ...any) {
		msg := textsafe.Terminal(fmt.Sprintf(format, a...))
		warnings = append(warnings, msg)
		fmt.Fprintf(o.stderr, "warning: %s\n", msg)
	}

	// When rollbacks began, and which nodes' kubelets stopped pods: the
	// events, while the API server keeps them.
	scaleUps := map[string][]time.Time{}
	var killing []event
	var eventsErr error
	if wl.Kind == "Deployment" || wl.Kind == timeline.KindRollout {
		var evs []event
		if evs, eventsErr = api.events(ctx, ns, wl.Kind, "ScalingReplicaSet"); eventsErr == nil {
			for _, e := range evs {
				if m := scaledUp.FindStringSubmatch(e.Message); m != nil && e.InvolvedObject.Name == wl.Name {
					scaleUps[m[1]] = append(scaleUps[m[1]], e.at())
				}
			}
			for k := range scaleUps {
				slices.SortFunc(scaleUps[k], time.Time.Compare)
			}
		}
	}
	if eventsErr == nil {
		killing, eventsErr = api.events(ctx, ns, "Pod", "Killing")
	}
	if eventsErr != nil {
		warn("the workload's events: %s", listFailedIn("events", ns, eventsErr))
	}

	wins := windows(revs, scaleUps)
	picked := pickWindows(wins, revision, last)
	if len(picked) == 0 {
		if revision > 0 {
			return fmt.Errorf("%s in namespace %s has no rollout to revision %d (its revisions go to %d)", wl, ns, revision, revs.current)
		}
		fmt.Fprintf(o.stderr, "%s in namespace %s has had no rollout: it is at revision %d\n", wl, ns, revs.current)
		if !o.table() {
			return o.writeList("RolloutReportList", []RolloutReport{}, nil, warnings)
		}
		return nil
	}
	// The rollouts reported, and the one before each, to compare with.
	need := map[int64]bool{}
	for _, i := range picked {
		need[wins[i].number] = true
		need[wins[i].number-1] = true
	}
	var since time.Time
	open := false
	for i := range wins {
		if need[wins[i].number] {
			if wins[i].lo.IsZero() {
				open = true
			} else if since.IsZero() || wins[i].lo.Before(since) {
				since = wins[i].lo
			}
		}
	}
	if open {
		since = time.Time{}
	}

	asked, agents, err := o.rolloutAgents(ctx, s, w, wl, since, now, eventTTL, eventsErr, killing)
	if err != nil {
		return err
	}
	q := apiv1.EpisodeQuery{Namespace: ns, Owner: wl}
	if !since.IsZero() {
		q.Since = apiv1.At(since.Add(-time.Minute).UTC())
	}
	var res []Result[timeline.Episode]
	if len(agents) > 0 {
		res = ReadAll[timeline.Episode](ctx, s.fleet, agents, "/api/v1/episodes", q.Values(), true)
	}
	for i := range agents {
		if a := &agents[i]; a.Error != "" {
			fmt.Fprintf(o.stderr, "warning: %s\n", agentErr(a))
		}
	}
	eps := mergeEpisodes(res, nil)
	if w := nameClusterPeers(ctx, s, eps); w != "" {
		warn("%s", w)
	}

	inProgress := w.inProgress(wl.Kind, revs)
	replicas := 0 // a DaemonSet's: one a node
	if w.Spec.Replicas != nil {
		replicas = int(*w.Spec.Replicas)
	}
	reports := map[int64]*RolloutReport{}
	for i := range wins {
		if !need[wins[i].number] || wins[i].to == nil {
			continue
		}
		r := buildReport(ns, wl, wins, &wins[i], eps, revs.byNum[revs.current], replicas)
		r.InProgress = inProgress && wins[i].number == revs.current
		r.Verdict = r.verdict()
		r.Asked = asked
		r.partial(&wins[i], agents, res)
		reports[r.Revision] = &r
	}
	var out []RolloutReport
	for _, i := range picked {
		r := reports[wins[i].number]
		if r == nil {
			continue
		}
		if prev := reports[r.Revision-1]; prev != nil {
			r.compare(prev)
		}
		out = append(out, *r)
	}
	if !o.table() {
		return o.writeList("RolloutReportList", out, agents, warnings)
	}
	for i := range out {
		if i > 0 {
			fmt.Fprintln(o.stdout)
		}
		if err := out[i].WriteText(o.stdout); err != nil {
			return err
		}
	}
	unreadable(o.stdout, agents)
	return nil
}

// scaledUp is the Deployment controller's event message for a ReplicaSet
// it scales up.
var scaledUp = regexp.MustCompile(`^Scaled up replica set (\S+) (to|from) `)

// pickWindows are the indexes of the rollouts asked for: the one that made
// revision current, else the last `last` known ones.
func pickWindows(wins []rolloutWindow, revision int64, last int) []int {
	var out []int
	for i := range wins {
		if wins[i].to == nil {
			continue
		}
		if revision > 0 {
			if wins[i].number == revision {
				return []int{i}
			}
			continue
		}
		out = append(out, i)
	}
	if revision > 0 {
		return nil
	}
	if len(out) > last {
		out = out[len(out)-last:]
	}
	return out
}

// rolloutAgents finds the agents to ask: the nodes that ran the workload's
// pods since since (its pods that exist, and the kubelets' Killing events
// of pods named after it) while the API server's events reach back that
// far, else every agent.
func (o *options) rolloutAgents(ctx context.Context, s *session, w *workloadObject, wl timeline.Owner, since, now time.Time,
	eventTTL time.Duration, eventsErr error, killing []event) (RolloutAsked, []Agent, error) {
	all, err := s.fleet.Discover(ctx)
	if err != nil {
		return RolloutAsked{}, nil, err
	}
	var why string
	switch {
	case eventsErr != nil:
		why = "every agent: the events that name the nodes could not be listed"
	case since.IsZero():
		why = "every agent: when the rollouts began is not known"
	case since.Before(now.Add(-eventTTL)):
		why = fmt.Sprintf("every agent: the rollouts began %s ago, before the API server's events reach (--event-ttl %s)", now.Sub(since).Round(time.Second), eventTTL)
	}
	var nodes []string
	if why == "" {
		var sel []string
		for k, v := range w.Spec.Selector.MatchLabels {
			sel = append(sel, k+"="+v)
		}
		slices.Sort(sel)
		pods, err := s.fleet.API.pods(ctx, w.Metadata.Namespace, strings.Join(sel, ","))
		if err != nil {
			why = "every agent: the workload's pods could not be listed (" + listFailedIn("pods", w.Metadata.Namespace, err) + ")"
		}
		for _, p := range pods {
			if n := p.Spec.NodeName; n != "" && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		for _, e := range killing {
			if !strings.HasPrefix(e.InvolvedObject.Name, wl.Name+"-") || e.at().Before(since.Add(-clockSlack)) {
				continue
			}
			if n := e.node(); n != "" && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	if why != "" {
		if nodesList, err := s.nodes(ctx); err == nil {
			for _, n := range nodesWithoutAgent(nodesList, all) {
				all = append(all, Agent{Node: n, Error: "no agent pod on this node"})
			}
		}
		if len(all) == 0 {
			return RolloutAsked{}, nil, fmt.Errorf("no sigscope agent pods in namespace %s (selector %s): is the DaemonSet installed there? (docs/kubectl.md; --agent-namespace)",
				s.fleet.Namespace, s.fleet.Selector)
		}
		return RolloutAsked{All: true, Nodes: agentNodes(all), Why: why}, all, nil
	}
	slices.Sort(nodes)
	var agents []Agent
	for _, n := range nodes {
		found := false
		for _, a := range all {
			if a.Node == n {
				agents = append(agents, a)
				found = true
			}
		}
		if !found {
			agents = append(agents, Agent{Node: n, Error: "no agent pod on this node"})
		}
	}
	return RolloutAsked{Nodes: nodes, Why: fmt.Sprintf("only the nodes that ran the workload's pods (its pods, the kubelets' Killing events): %d of the %d with an agent", len(nodes), countNodes(all))}, agents, nil
}

func agentNodes(agents []Agent) []string {
	var out []string
	for _, a := range agents {
		if !slices.Contains(out, a.Node) {
			out = append(out, a.Node)
		}
	}
	slices.Sort(out)
	return out
}

// partial says why some of the rollout's stops may be missing: an agent
// not read, an agent that began after the rollout and read no journal, a
// ring that pushed out episodes from inside the rollout, episodes with no
// revision.
func (r *RolloutReport) partial(w *rolloutWindow, agents []Agent, res []Result[timeline.Episode]) {
	var why []string
	for i := range agents {
		if a := &agents[i]; a.Error != "" {
			why = append(why, "node "+a.Node+" not read: "+a.Error)
		}
	}
	for _, rs := range res {
		in := rs.Info
		if in == nil {
			continue
		}
		switch {
		case !w.lo.IsZero() && in.StartedAt.After(w.lo) && in.Episodes.Reloaded == 0:
			why = append(why, fmt.Sprintf("node %s: its agent started at %s, after the rollout began, and read back no journal", rs.Agent.Node, in.StartedAt.UTC().Format(time.RFC3339)))
		case in.Episodes.Evicted > 0 && !in.Episodes.Journal && (w.lo.IsZero() || !in.Episodes.EvictedUntil.Before(w.lo)):
			why = append(why, fmt.Sprintf("node %s: its agent keeps its last %d episodes and pushed out older ones until %s", rs.Agent.Node, in.Episodes.Kept, in.Episodes.EvictedUntil.UTC().Format(time.RFC3339)))
		}
	}
	if r.WithoutRevision > 0 {
		why = append(why, fmt.Sprintf("%d episodes of the workload's pods carry no revision (an older agent's): which rollout they were cannot be told", r.WithoutRevision))
	}
	if w.began.IsZero() {
		why = append(why, "when the rollout began is not known: its stops are taken from the rollout before's beginning")
	}
	for i := range why {
		why[i] = textsafe.Terminal(why[i])
	}
	r.Partial, r.PartialWhy = len(why) > 0, why
	if r.Partial && !strings.HasPrefix(r.Verdict, "partial") {
		r.Verdict = "partial: " + r.Verdict
	}
}

// rolloutReadErr says which read failed, and the permission it needs.
func rolloutReadErr(wl timeline.Owner, ns string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s not found in namespace %s: %w", wl, ns, err)
	case apierrors.IsForbidden(err):
		res := "replicasets"
		if wl.Kind == "StatefulSet" || wl.Kind == "DaemonSet" {
			res = "controllerrevisions"
		}
		return fmt.Errorf(`kubectl sigscope rollout needs "get" on %s and "list" on %s in namespace %s (the ClusterRole sigscope-rollout-reader has them, and the built-in view; docs/kubectl.md): %w`,
			appsResources[wl.Kind], res, ns, err)
	}
	return fmt.Errorf("reading %s in namespace %s: %w", wl, ns, err)
}

func listFailedIn(resource, ns string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf(`kubectl sigscope rollout needs "list" on %q in namespace %s; the API server said: %v`, resource, ns, err)
	}
	return fmt.Sprintf("listing %s in namespace %s: %v", resource, ns, err)
}

// WriteText writes the report as the table `kubectl sigscope rollout`
// prints, every untrusted string escaped for the terminal.
func (r *RolloutReport) WriteText(out io.Writer) error {
	esc := textsafe.Terminal
	var b strings.Builder
	fmt.Fprintf(&b, "%s in %s: rollout to revision %d", esc(r.Workload.String()), esc(r.Namespace), r.Revision)
	if r.To != nil {
		fmt.Fprintf(&b, " (%s)", esc(r.To.Object))
	}
	if r.From != nil {
		fmt.Fprintf(&b, ", stopping revision %d (%s)", r.From.Number, esc(r.From.Object))
	}
	b.WriteString("\n")
	switch {
	case r.Began != nil:
		fmt.Fprintf(&b, "began %s (%s)", r.Began.UTC().Format(time.RFC3339), esc(r.BeganFrom))
	default:
		b.WriteString("began: not known")
	}
	switch {
	case r.InProgress:
		b.WriteString("; in progress")
	case r.Ended != nil:
		fmt.Fprintf(&b, "; the next rollout began %s", r.Ended.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", esc(r.Verdict))
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	if len(r.Pods) > 0 {
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPOD\tREASON\tOUTCOME\tGRACE\tUSED\tLOST\tBY KIND\tWHO\tENDPOINT-LAG\tLAST-NEW-CONN")
		for i := range r.Pods {
			p := &r.Pods[i]
			lost := "?"
			if p.Lost != nil {
				lost = fmt.Sprint(*p.Lost)
				if p.MaybeLost > 0 {
					lost += fmt.Sprintf(" (+%d?)", p.MaybeLost)
				}
			}
			var kinds []string
			for _, kw := range kindWords {
				if n := p.LostByKind[kw.kind]; n > 0 {
					kinds = append(kinds, fmt.Sprintf("%s %d", kw.kind, n))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(p.Node), cell(p.Pod), cell(p.StopReason), p.Outcome,
				secs(p.Grace), secs(p.Used), lost, dash(strings.Join(kinds, ", ")), cell(dash(strings.Join(p.Who, ", "))), secs(p.EndpointLag), secs(p.LastNewConnection))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var tail strings.Builder
	tot := &r.Totals
	fmt.Fprintf(&tail, "\ntotals: %d pods, %d stops, lost %d", tot.Pods, tot.Stops, tot.Lost)
	if tot.MaybeLost > 0 {
		fmt.Fprintf(&tail, " (+%d possibly)", tot.MaybeLost)
	}
	if tot.Slowest != nil {
		fmt.Fprintf(&tail, ", slowest stop %.1f s", *tot.Slowest)
	}
	tail.WriteString("\n")
	if len(r.Apart) > 0 {
		tail.WriteString("not this rollout's (shown apart):\n")
		for _, a := range r.Apart {
			fmt.Fprintf(&tail, "  %s %s/%s on %s: %s, %s\n", a.At.UTC().Format(time.RFC3339), esc(a.Pod), esc(a.Container), esc(a.Node), esc(dash(a.StopReason)), a.Outcome)
		}
	}
	if len(r.Advice) > 0 {
		tail.WriteString("advice:\n")
		for _, a := range r.Advice {
			fmt.Fprintf(&tail, "  - %s\n", esc(a))
		}
	}
	if r.Compared != nil {
		fmt.Fprintf(&tail, "against rollout %d: %s\n", r.Compared.Revision, esc(r.Compared.Words))
	}
	fmt.Fprintf(&tail, "asked: %s\n", esc(r.Asked.Why))
	for _, w := range r.PartialWhy {
		fmt.Fprintf(&tail, "partial: %s\n", esc(w))
	}
	_, err := io.WriteString(out, tail.String())
	return err
}

func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fs", *v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
