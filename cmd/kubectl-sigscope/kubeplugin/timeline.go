package kubeplugin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// target is what `timeline` was asked about: a pod, or a workload's pods.
type target struct {
	pod   string
	owner timeline.Owner
}

// workloadKinds maps kubectl's names and short names to owner kinds.
var workloadKinds = map[string]string{
	"deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
	"sts": "StatefulSet", "statefulset": "StatefulSet", "statefulsets": "StatefulSet",
	"ds": "DaemonSet", "daemonset": "DaemonSet", "daemonsets": "DaemonSet",
	"job": "Job", "jobs": "Job",
	"rs": "ReplicaSet", "replicaset": "ReplicaSet", "replicasets": "ReplicaSet",
	"rc": "ReplicationController", "replicationcontroller": "ReplicationController", "replicationcontrollers": "ReplicationController",
	"ro": "Rollout", "rollout": "Rollout", "rollouts": "Rollout", // Argo Rollouts'
}

func parseTarget(arg string) (target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return target{pod: arg}, nil
	}
	if name == "" || strings.Contains(name, "/") {
		return target{}, UsageError{fmt.Errorf("%q: want POD, pod/NAME or KIND/NAME", arg)}
	}
	switch k := strings.ToLower(kind); k {
	case "po", "pod", "pods":
		return target{pod: name}, nil
	default:
		if w, ok := workloadKinds[k]; ok {
			return target{owner: timeline.Owner{Kind: w, Name: name}}, nil
		}
	}
	return target{}, UsageError{fmt.Errorf("%q: %s is no pod or workload kind (deploy, sts, ds, job, rs, rc, rollout)", arg, kind)}
}

func (o *options) timelineCmd() *cobra.Command {
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "timeline [POD | pod/NAME | deploy/NAME | sts/NAME | ds/NAME | job/NAME]",
		Short: "Stop episodes of a pod, a workload's pods, or a namespace, from every node",
		Long: `Asks every node's agent for its recent stop episodes and prints them as
"sigscope timeline" does: each signal, the kernel's verdict, the SIGKILL, the
exit, the outcome and a fix. A pod is found on whichever node ran it, deleted
pods included (agents keep their last episodes, 1000 by default). A workload
(deploy/NAME, ...) is matched by the owner the agent recorded for each pod
(the agent learns it from the API server: chart value kubeEvents). The
clients a stop hurt that the node's agent could not name (another node's
pod, another node) are named from the cluster's pods and nodes, which needs
list pods and list nodes cluster-wide; without them they stay addresses.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t target
			if len(args) == 1 {
				var err error
				if t, err = parseTarget(args[0]); err != nil {
					return err
				}
			}
			return o.runTimeline(cmd, t, since)
		},
	}
	cmd.Flags().DurationVar(&since, "since", 0, "only stops that began within this long (0: every episode the agents keep)")
	return cmd
}

func (o *options) runTimeline(cmd *cobra.Command, t target, since time.Duration) error {
	ctx := cmd.Context()
	if (t.pod != "" || t.owner.Name != "") && o.all {
		return UsageError{fmt.Errorf("a pod or workload is named in one namespace: -n, not -A")}
	}
	s, pods, err := o.begin(ctx)
	if err != nil {
		return err
	}
	q := apiv1.EpisodeQuery{Namespace: s.namespace, Pod: t.pod, Owner: t.owner}
	if since > 0 {
		q.Since = sinceTime(since)
	}
	res, agents, err := readAgents[timeline.Episode](ctx, o, s, "/api/v1/episodes", q.Values(), since > 0)
	if err != nil {
		return err
	}
	eps := mergeEpisodes(res, pods)
	warnings := windowWarnings(res, since)
	if w := nameClusterPeers(ctx, s, eps); w != "" {
		warnings = append(warnings, w)
	}
	for _, w := range warnings {
		fmt.Fprintf(o.stderr, "warning: %s\n", w)
	}
	if !o.table() {
		return o.writeList("EpisodeList", eps, agents, warnings)
	}
	w := o.stdout
	if len(eps) == 0 {
		fmt.Fprintf(o.stderr, "no stop episodes found for %s on %d node(s) read\n", describe(t, s.namespace), len(res))
	}
	if t.pod != "" {
		// One pod: the pod's view, its containers' stops together.
		g := timeline.NewPodGrouper(0, nil)
		ps, single := g.Add(eps)
		ps = append(ps, g.Flush()...)
		for i := range ps {
			if err := ps[i].WriteText(w); err != nil {
				return err
			}
			fmt.Fprintln(w)
		}
		eps = single
	}
	for i := range eps {
		if err := eps[i].WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	unreadable(w, agents)
	return nil
}

func describe(t target, ns string) string {
	switch {
	case t.pod != "":
		return "pod " + ns + "/" + t.pod
	case t.owner.Name != "":
		return t.owner.String() + " in namespace " + ns
	}
	return orAll(ns)
}

// mergeEpisodes gathers the agents' episodes, oldest first, without the
// duplicates two agents on one node (a rollout) would give, keeping those
// of the pods -l selected when it was given.
func mergeEpisodes(res []Result[timeline.Episode], pods map[string]bool) []timeline.Episode {
	type key struct {
		id    string
		pidns uint32
		start time.Time
	}
	seen := map[key]bool{}
	eps := []timeline.Episode{}
	for _, r := range res {
		for _, ep := range r.Items {
			c := ep.Container
			if pods != nil && !pods[c.Namespace+"/"+c.Pod] {
				continue
			}
			k := key{c.ID, c.PidNS, ep.Start}
			if seen[k] {
				continue
			}
			seen[k] = true
			if ep.Node == "" {
				ep.Node = r.Agent.Node
			}
			eps = append(eps, ep)
		}
	}
	slices.SortStableFunc(eps, func(a, b timeline.Episode) int { return a.Start.Compare(b.Start) })
	return eps
}

// sinceTime is the window's start as an absolute time: a relative one would
// move between the pages of a listing.
func sinceTime(since time.Duration) apiv1.TimeBound {
	return apiv1.At(time.Now().Add(-since).UTC())
}

// windowWarnings says which agents cannot see the whole of the last since:
// started later, or their episode ring has already pushed out episodes
// from inside it.
func windowWarnings(res []Result[timeline.Episode], since time.Duration) []string {
	if since <= 0 {
		return nil
	}
	var out []string
	for _, r := range res {
		in := r.Info
		if in == nil {
			continue
		}
		from := time.Now().Add(-since)
		switch {
		case in.Episodes.Evicted > 0 && !in.Episodes.EvictedUntil.Before(from):
			out = append(out, fmt.Sprintf("node %s: the agent keeps its last %d episodes and has pushed out %d older ones, started until %s: stops up to then are missing",
				r.Agent.Node, in.Episodes.Kept, in.Episodes.Evicted, in.Episodes.EvictedUntil.Format(time.RFC3339)))
		case in.StartedAt.After(from) && in.Episodes.Reloaded > 0:
			out = append(out, fmt.Sprintf("node %s: the agent started at %s and read %d episodes from before back from its journal: stops while no agent ran are missing",
				r.Agent.Node, in.StartedAt.Format(time.RFC3339), in.Episodes.Reloaded))
		case in.StartedAt.After(from):
			out = append(out, fmt.Sprintf("node %s: the agent started at %s: stops before are missing", r.Agent.Node, in.StartedAt.Format(time.RFC3339)))
		}
	}
	return out
}
