package kubeplugin

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A rollout is a revision change of a workload: revision N made current,
// the pods of revision N-1 (the one current before it) stopped for it. Its
// stops are the deletions of N-1's pods from the rollout's beginning on,
// whatever their node (stopsOf); the other stops of the workload's pods
// until the next rollout (a restart, an eviction, a probe kill, a new pod
// of N that failed) are shown apart. Rollout N begins when its ReplicaSet was
// made (a new revision), else (a rollback, which reuses a revision) at the
// Deployment's ScalingReplicaSet event that scaled it up, while the API
// server keeps events; a StatefulSet's or DaemonSet's rollback renumbers
// its ControllerRevision and keeps no trace of when: its beginning is then
// not known, and its stops are taken from the rollout before's beginning.

// clockSlack is how much earlier than a rollout's beginning, by the API
// server's clock, a stop may be on a node's clock and still be the
// rollout's.
const clockSlack = 5 * time.Second

// RolloutReport is one rollout's report, `kubectl sigscope rollout`'s item.
type RolloutReport struct {
	Namespace string         `json:"namespace"`
	Workload  timeline.Owner `json:"workload"`
	// Revision is the number this rollout made current, as the controller
	// numbered it then; From is the revision whose pods it stopped, To the
	// one it rolled out. From is nil when the controller no longer knows
	// the revision before (a ControllerRevision a rollback renumbered).
	Revision int64             `json:"revision"`
	From     *WorkloadRevision `json:"from"`
	To       *WorkloadRevision `json:"to"`
	// Began is when the rollout began, BeganFrom what says so; absent when
	// not known (see the package's rule).
	Began      *time.Time    `json:"began,omitempty"`
	BeganFrom  string        `json:"began_from,omitempty"`
	Ended      *time.Time    `json:"ended,omitempty"` // the next rollout's beginning; absent for the last one
	InProgress bool          `json:"in_progress"`
	Pods       []RolloutPod  `json:"pods"`
	Apart      []RolloutStop `json:"apart"`
	// WithoutRevision counts the episodes of the workload's pods in the
	// rollout's window that carry no revision (recorded by an agent older
	// than the revision's field): which rollout they were cannot be told.
	WithoutRevision int           `json:"episodes_without_revision"`
	Totals          RolloutTotals `json:"totals"`
	Verdict         string        `json:"verdict"`
	// PreStopSleep is the preStop sleep that would have covered this
	// rollout's refused attempts (timeline.CoveringOverStops over the pods'
	// timeline.Episode.CoveringPreStopSleep), GracePeriod the
	// terminationGracePeriodSeconds that sleep needs with the shutdown the
	// stops measured; Advice says them in words, with what else the data
	// shows.
	PreStopSleep     *int   `json:"prestop_sleep_s,omitempty"`
	PreStopSleepFrom string `json:"prestop_sleep_from,omitempty"`
	// PreStopSleepAtLeast: a stop's refused attempts were still coming
	// when its counts were read (the pod's network namespace goes soon
	// after its containers): the sleep is a floor, not a measurement of
	// enough.
	PreStopSleepAtLeast bool     `json:"prestop_sleep_at_least,omitempty"`
	GracePeriod         *int     `json:"termination_grace_period_s,omitempty"`
	GracePeriodFrom     string   `json:"termination_grace_period_from,omitempty"`
	Advice              []string `json:"advice"`
	// Compared is this rollout against the one before it; nil for the
	// first known.
	Compared *RolloutComparison `json:"compared,omitempty"`
	// Asked is which agents were asked; Partial, with PartialWhy, that
	// some of the rollout's stops may be missing.
	Asked      RolloutAsked `json:"asked"`
	Partial    bool         `json:"partial"`
	PartialWhy []string     `json:"partial_why,omitempty"`
}

// RolloutPod is one stopped pod of a rollout, its containers' episodes
// together.
type RolloutPod struct {
	Pod        string           `json:"pod"`
	Node       string           `json:"node"`
	Containers int              `json:"containers"`
	StopReason string           `json:"stop_reason"`
	Outcome    timeline.Outcome `json:"outcome"` // the worst of its containers'
	ExitStatus *int             `json:"exit_status,omitempty"`
	// Grace is the grace the kubelet gave, Used the longest of its
	// containers' stops (timeline.Episode.StopDuration).
	Grace     *float64 `json:"grace_period_s,omitempty"`
	GraceFrom string   `json:"grace_from,omitempty"`
	Used      *float64 `json:"stop_duration_s,omitempty"`
	// Lost is what its clients lost (timeline.Traffic.Lost), LostByKind
	// its split, MaybeLost the possibly lost; Lost is nil when its traffic
	// was not counted, and TrafficUnknown says why.
	Lost           *uint64           `json:"lost"`
	LostByKind     map[string]uint64 `json:"lost_by_kind,omitempty"`
	MaybeLost      uint64            `json:"maybe_lost"`
	RefusedUnknown bool              `json:"refused_unknown,omitempty"` // its kernel cannot count refused attempts (before Linux 6.10)
	// CountedUntil is when the kernel's count was read: an attempt after
	// it is in none of the above.
	CountedUntil   *time.Time `json:"counted_until,omitempty"`
	TrafficUnknown string     `json:"traffic_unknown,omitempty"`
	Who            []string   `json:"who,omitempty"` // the clients that lost most, as the episodes name them
	// EndpointLag is from the pod's deletion to its endpoint's first
	// change; LastNewConnection from the stop signal to the last
	// connection accepted (a client still sent to it); CoveringSleep the
	// preStop sleep that would have covered its refused attempts.
	EndpointLag       *float64 `json:"endpoint_lag_s,omitempty"`
	LastNewConnection *float64 `json:"last_new_connection_after_stop_s,omitempty"`
	CoveringSleep     *int     `json:"covering_prestop_sleep_s,omitempty"`
	// CoveringAtLeast: refused attempts were still coming when the counts
	// were read (timeline.Lag.StillComing): CoveringSleep is a floor.
	CoveringAtLeast bool      `json:"covering_prestop_sleep_at_least,omitempty"`
	shutdown        *float64  // a graceful stop's SIGTERM to exit
	from, to        time.Time // its stop: the first begun of its containers' to the last exit
	traffic         *timeline.Traffic
}

// RolloutStop is a stop during a rollout that was not the rollout's.
type RolloutStop struct {
	Pod        string           `json:"pod"`
	Container  string           `json:"container"`
	Node       string           `json:"node"`
	StopReason string           `json:"stop_reason"`
	Outcome    timeline.Outcome `json:"outcome"`
	Revision   string           `json:"revision"` // the pod's revision's hash; "" when not recorded
	At         time.Time        `json:"at"`
}

// RolloutTotals sums a rollout's pods.
type RolloutTotals struct {
	Pods           int               `json:"pods"`
	Stops          int               `json:"stops"` // episodes: a pod's containers each
	Outcomes       map[string]int    `json:"outcomes"`
	Exit137        int               `json:"exit_137"`
	Lost           uint64            `json:"lost"`
	LostByKind     map[string]uint64 `json:"lost_by_kind"`
	MaybeLost      uint64            `json:"maybe_lost"`
	PodsHurt       int               `json:"pods_hurt"`
	PodsUncounted  int               `json:"pods_uncounted"`
	RefusedUnknown int               `json:"pods_refused_unknown"`
	Slowest        *float64          `json:"slowest_stop_s,omitempty"`
	// AtOnce is the most pods whose stops overlapped: pods stopping at
	// the same time serve no one meanwhile.
	AtOnce int `json:"most_stopping_at_once"`
}

// RolloutComparison is a rollout against the one before it. A rollout
// stops the revision the one before it rolled out: what changed between
// the two rollouts' stopped revisions' templates is what this rollout's
// stops show the effect of.
type RolloutComparison struct {
	Revision  int64          `json:"revision"` // the rollout before's
	Changes   []string       `json:"changes"`  // From's template against the rollout before's From's
	Lost      uint64         `json:"lost"`     // the rollout before's
	Uncounted int            `json:"pods_uncounted"`
	Slowest   *float64       `json:"slowest_stop_s,omitempty"`
	Outcomes  map[string]int `json:"outcomes"`
	Words     string         `json:"words"`
}

// RolloutAsked says which agents a report's stops came from.
type RolloutAsked struct {
	All   bool     `json:"all"`   // every agent was asked
	Nodes []string `json:"nodes"` // the nodes asked (all: the nodes of the agents found)
	Why   string   `json:"why"`
}

// rolloutWindow is where rollout number's stops are taken from.
type rolloutWindow struct {
	number    int64
	from, to  *WorkloadRevision
	began     time.Time // zero: not known
	beganFrom string
	lo, hi    time.Time // hi zero: open
}

// windows are the rollouts of revs, oldest first: one per number from 2 to
// the current one, begun at the ReplicaSet's or ControllerRevision's
// creation for a number it was made for, else at the first scale-up of it
// (scaleUps, the Deployment's events, by ReplicaSet name) after the
// rollout before began.
func windows(revs *revisions, scaleUps map[string][]time.Time) []rolloutWindow {
	var out []rolloutWindow
	var prevBegan time.Time
	for n := int64(2); n <= revs.current; n++ {
		w := rolloutWindow{number: n, from: revs.byNum[n-1], to: revs.byNum[n]}
		if w.to == nil {
			// A number whose revision moved on (a ControllerRevision a
			// rollback renumbered): no rollout to report, but the next
			// one's window starts after what is known.
			out = append(out, w)
			continue
		}
		switch name := strings.TrimPrefix(w.to.Object, "ReplicaSet/"); {
		case w.to.First == n:
			w.began, w.beganFrom = w.to.Created, fmt.Sprintf("%s created", w.to.Object)
		default:
			for _, at := range scaleUps[name] {
				if at.After(prevBegan) {
					w.began, w.beganFrom = at, fmt.Sprintf("%s scaled up (the Deployment's event)", w.to.Object)
					break
				}
			}
		}
		w.lo = w.began
		if w.lo.IsZero() {
			w.lo = prevBegan
		}
		if !w.began.IsZero() {
			prevBegan = w.began
		}
		out = append(out, w)
	}
	// Each window ends where the next known one begins.
	var next time.Time
	for i := len(out) - 1; i >= 0; i-- {
		out[i].hi = next
		if !out[i].began.IsZero() {
			next = out[i].began
		}
	}
	return out
}

// stopsOf is the rollout whose stops ep is: the deletion of a pod of the
// revision a rollout stopped, at or after its beginning; of two rollouts
// that stopped that revision (a rollback reuses it), the later begun. A
// stop after the next rollout began is still its own (rollouts in quick
// succession: the controller scales every old revision down). nil for a
// stop that is no rollout's (not a deletion, the current revision's pod,
// no revision recorded).
func stopsOf(wins []rolloutWindow, wl timeline.Owner, ep *timeline.Episode) *rolloutWindow {
	if ep.Revision == nil || ep.StopReason != "deleted" {
		return nil
	}
	var owner *rolloutWindow
	for i := range wins {
		w := &wins[i]
		if w.from == nil || w.from.Hash != ep.Revision.Hash || strings.HasPrefix(w.from.Object, "ReplicaSet/") && ep.Revision.Controller != w.from.Object {
			continue
		}
		if w.lo.IsZero() || !ep.Start.Before(w.lo.Add(-clockSlack)) {
			owner = w // windows are oldest first: the last that fits began latest
		}
	}
	return owner
}

// in reports whether t falls in w.
func (w *rolloutWindow) in(t time.Time) bool {
	return (w.lo.IsZero() || !t.Before(w.lo.Add(-clockSlack))) && (w.hi.IsZero() || t.Before(w.hi.Add(-clockSlack)))
}

// buildReport makes rollout w's report from the workload's episodes;
// current is the workload's current revision, which the advice weighs.
// replicas is the workload's (0: not known).
func buildReport(ns string, wl timeline.Owner, wins []rolloutWindow, w *rolloutWindow, eps []timeline.Episode, current *WorkloadRevision, replicas int) RolloutReport {
	r := RolloutReport{Namespace: ns, Workload: wl, Revision: w.number, From: w.from, To: w.to, BeganFrom: w.beganFrom,
		Pods: []RolloutPod{}, Apart: []RolloutStop{}, Advice: []string{}}
	if !w.began.IsZero() {
		b := w.began
		r.Began = &b
	}
	if !w.hi.IsZero() {
		e := w.hi
		r.Ended = &e
	}
	byPod := map[string]*RolloutPod{}
	var order []string
	for i := range eps {
		ep := &eps[i]
		if !ep.Outcome.IsStop() {
			continue
		}
		owner := stopsOf(wins, wl, ep)
		mine := owner != nil && owner.number == w.number
		if !mine && !w.in(ep.Start) {
			continue
		}
		if ep.Revision == nil {
			r.WithoutRevision++
			continue
		}
		if !mine {
			if owner != nil {
				continue // another rollout's, begun since: listed there
			}
			r.Apart = append(r.Apart, RolloutStop{Pod: ep.Container.Pod, Container: ep.Container.Name, Node: ep.Node,
				StopReason: ep.StopReason, Outcome: ep.Outcome, Revision: ep.Revision.Hash, At: ep.Start})
			continue
		}
		// A StatefulSet's pods keep their names: one row per pod object.
		k := ep.Node + "\x00" + ep.Container.Pod + "\x00" + ep.Container.PodUID
		p := byPod[k]
		if p == nil {
			p = &RolloutPod{Pod: ep.Container.Pod, Node: ep.Node, StopReason: ep.StopReason}
			byPod[k] = p
			order = append(order, k)
		}
		p.take(ep)
	}
	for _, k := range order {
		p := byPod[k]
		p.finish()
		r.Pods = append(r.Pods, *p)
	}
	slices.SortFunc(r.Pods, func(a, b RolloutPod) int {
		return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Pod, b.Pod))
	})
	r.total()
	r.advise(current, replicas)
	r.Verdict = r.verdict()
	return r
}

// severity orders outcomes for a pod's worst: one to fix, then one cut
// short by a SIGKILL, then any other.
func severity(o timeline.Outcome) int {
	switch {
	case o.NeedsFix():
		return 3
	case o.KilledAfterGrace():
		return 2
	case o != timeline.OutcomeGraceful:
		return 1
	}
	return 0
}

// take adds a container's episode to its pod's row.
func (p *RolloutPod) take(ep *timeline.Episode) {
	p.Containers++
	begin := ep.StopAt
	if begin.IsZero() {
		begin = ep.Start
	}
	if pre := ep.PreStop; pre != nil && !pre.StartAt.IsZero() && pre.StartAt.Before(begin) {
		begin = pre.StartAt
	}
	if p.from.IsZero() || begin.Before(p.from) {
		p.from = begin
	}
	if end := ep.ExitAt; end.After(p.to) {
		p.to = end
	}
	if p.Containers == 1 || severity(ep.Outcome) > severity(p.Outcome) {
		p.Outcome = ep.Outcome
		if !ep.ExitAt.IsZero() {
			st := ep.ExitStatus
			p.ExitStatus = &st
		}
	}
	if ep.GracePeriod > 0 && (p.Grace == nil || ep.GracePeriod.Seconds() > *p.Grace) {
		g := ep.GracePeriod.Seconds()
		p.Grace, p.GraceFrom = &g, string(ep.GraceFrom)
	}
	if d, ok := ep.StopDuration(); ok && (p.Used == nil || d.Seconds() > *p.Used) {
		u := d.Seconds()
		p.Used = &u
	}
	if d, ok := ep.ExitAfter(); ok && ep.Outcome == timeline.OutcomeGraceful && (p.shutdown == nil || d.Seconds() > *p.shutdown) {
		s := d.Seconds()
		p.shutdown = &s
	}
	for _, c := range ep.Endpoints {
		if c.AfterDeletion != nil && (p.EndpointLag == nil || c.AfterDeletion.Seconds() > *p.EndpointLag) {
			l := c.AfterDeletion.Seconds()
			p.EndpointLag = &l
		}
	}
	t := ep.Traffic
	if t == nil {
		return
	}
	// A pod's containers share the count: the one read latest includes
	// the others' (timeline.Watch).
	if t.Unread == "" && (p.traffic == nil || t.Lost() > p.traffic.Lost() || t.Lost() == p.traffic.Lost() && t.Until.After(p.traffic.Until)) {
		p.traffic = t
		if a := t.Counts[sigvocab.NetAccepted]; a.N > 0 && !ep.StopAt.IsZero() && a.Last.After(ep.StopAt) {
			d := a.Last.Sub(ep.StopAt).Seconds()
			p.LastNewConnection = &d
		}
	} else if t.Unread != "" && p.traffic == nil {
		p.TrafficUnknown = t.Unread
	}
	if secs, ok := ep.CoveringPreStopSleep(); ok && (p.CoveringSleep == nil || secs > *p.CoveringSleep) {
		p.CoveringSleep = &secs
		l, _ := ep.Lag()
		p.CoveringAtLeast = l.StillComing
	}
}

// finish fills the row's traffic from the count taken.
func (p *RolloutPod) finish() {
	t := p.traffic
	if t == nil {
		if p.TrafficUnknown == "" {
			p.TrafficUnknown = "no count: no stop signal of its containers was watched"
		}
		p.CoveringSleep = nil
		return
	}
	p.TrafficUnknown = ""
	if !t.Until.IsZero() {
		u := t.Until
		p.CountedUntil = &u
	}
	lost := t.Lost()
	p.Lost = &lost
	p.MaybeLost = t.MaybeLost()
	p.RefusedUnknown = !t.Known(sigvocab.NetRefused)
	p.LostByKind = map[string]uint64{}
	for _, k := range []sigvocab.NetKind{sigvocab.NetRefused, sigvocab.NetResetSent, sigvocab.NetCut, sigvocab.NetUnanswered, sigvocab.NetAfterClose} {
		if n := t.N(k); n > 0 {
			p.LostByKind[k.String()] = n
		}
	}
	if t.N(sigvocab.NetRefused) == 0 {
		p.CoveringSleep, p.CoveringAtLeast = nil, false // a sleep covers refused attempts: none to cover
	}
	if t.Peers != nil {
		for _, peer := range t.Peers.Top {
			if peer.Lost == 0 {
				continue
			}
			p.Who = append(p.Who, fmt.Sprintf("%s (%d)", peerWords(&peer), peer.Lost))
		}
	}
}

// peerWords names a client as the episode does: its pod's workload, its
// pod, its node, else its address.
func peerWords(p *timeline.Peer) string {
	switch w := p.Who; {
	case w.Workload != "":
		return w.Namespace + "/" + w.Workload
	case w.Namespace != "" && w.Name != "":
		return w.Namespace + "/" + w.Name
	case w.Name != "":
		return w.Name
	case w.Kind == timeline.PeerNamespace:
		return "the pod's own namespace"
	}
	return p.Addr.String()
}

func (r *RolloutReport) total() {
	t := &r.Totals
	t.Outcomes, t.LostByKind = map[string]int{}, map[string]uint64{}
	t.AtOnce = atOnce(r.Pods)
	for i := range r.Pods {
		p := &r.Pods[i]
		t.Pods++
		t.Stops += p.Containers
		t.Outcomes[string(p.Outcome)]++
		if p.ExitStatus != nil && *p.ExitStatus == 137 {
			t.Exit137++
		}
		if p.Used != nil && (t.Slowest == nil || *p.Used > *t.Slowest) {
			t.Slowest = p.Used
		}
		if p.Lost == nil {
			t.PodsUncounted++
			continue
		}
		t.Lost += *p.Lost
		t.MaybeLost += p.MaybeLost
		for k, n := range p.LostByKind {
			t.LostByKind[k] += n
		}
		if *p.Lost > 0 {
			t.PodsHurt++
		}
		if p.RefusedUnknown {
			t.RefusedUnknown++
		}
	}
}

// atOnce is the most pods whose stops overlapped (a stop with no exit seen
// counts at its beginning alone).
func atOnce(pods []RolloutPod) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for i := range pods {
		p := &pods[i]
		if p.from.IsZero() {
			continue
		}
		to := p.to
		if to.Before(p.from) {
			to = p.from
		}
		es = append(es, edge{p.from, 1}, edge{to, -1})
	}
	// Ends before beginnings at one time: stops that touch do not overlap.
	slices.SortFunc(es, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.d, b.d)) })
	n, most := 0, 0
	for _, e := range es {
		n += e.d
		most = max(most, n)
	}
	return most
}

// kindWords are the lost kinds in a verdict's words, in Lost's order.
var kindWords = []struct{ kind, words string }{
	{"refused", "refused"}, {"reset_sent", "reset by the application"}, {"cut", "cut by its death"},
	{"unanswered", "read and never answered"}, {"after_close", "sent after the close"},
}

// verdict is the rollout's one line. It never says no client was hurt
// unless every pod's traffic was counted, refused attempts included, and
// nothing was possibly lost.
func (r *RolloutReport) verdict() string {
	t := &r.Totals
	var parts []string
	switch {
	case r.From == nil:
		return "the revision this rollout stopped is no longer known to the controller (a ControllerRevision a rollback renumbered): its stops cannot be told"
	case t.Pods == 0 && r.InProgress:
		parts = append(parts, fmt.Sprintf("in progress: no pod of revision %d stopped yet", r.Revision-1))
	case t.Pods == 0:
		parts = append(parts, fmt.Sprintf("no stop of revision %d's pods was recorded", r.Revision-1))
	case t.Lost > 0:
		var kinds []string
		for _, kw := range kindWords {
			if n := t.LostByKind[kw.kind]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%d %s", n, kw.words))
			}
		}
		parts = append(parts, fmt.Sprintf("clients lost %d requests on %d of %d pods (%s)", t.Lost, t.PodsHurt, t.Pods, strings.Join(kinds, ", ")))
	case t.PodsUncounted == t.Pods:
		parts = append(parts, "what clients lost is not known: no pod's traffic was counted")
	case t.PodsUncounted > 0 || t.RefusedUnknown > 0:
		parts = append(parts, fmt.Sprintf("no request lost that was counted, on %d of %d pods", t.Pods-t.PodsUncounted, t.Pods))
	case t.MaybeLost > 0:
		parts = append(parts, "no request surely lost")
	default:
		parts = append(parts, "no client was hurt")
	}
	if t.MaybeLost > 0 {
		parts = append(parts, fmt.Sprintf("%d possibly lost (who spoke last cannot be told)", t.MaybeLost))
	}
	if t.PodsUncounted > 0 && t.PodsUncounted < t.Pods {
		parts = append(parts, fmt.Sprintf("the traffic of %d pods was not counted", t.PodsUncounted))
	}
	if t.RefusedUnknown > 0 {
		parts = append(parts, fmt.Sprintf("refused attempts cannot be counted on %d pods' nodes (Linux before 6.10)", t.RefusedUnknown))
	}
	if t.Exit137 > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d pods ended in SIGKILL (exit 137)", t.Exit137, t.Pods))
	}
	if r.InProgress && t.Pods > 0 {
		parts = append(parts, "in progress: more stops may come")
	}
	return strings.Join(parts, "; ")
}

// advise measures the preStop sleep and the grace that would have covered
// the rollout's stops, and says what else the data shows; against current,
// the revision the workload's next rollout will stop.
func (r *RolloutReport) advise(current *WorkloadRevision, replicas int) {
	var sleeps, shutdowns []int
	refused, race, reset := uint64(0), uint64(0), uint64(0)
	killed := 0
	atLeast := false
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.CoveringSleep != nil {
			sleeps = append(sleeps, *p.CoveringSleep)
			atLeast = atLeast || p.CoveringAtLeast
		}
		if p.shutdown != nil {
			shutdowns = append(shutdowns, int(math.Ceil(*p.shutdown)))
		}
		if p.Outcome.KilledAfterGrace() || severity(p.Outcome) == 3 {
			killed++
		}
		refused += p.LostByKind["refused"]
		race += p.LostByKind["unanswered"] + p.LostByKind["after_close"]
		reset += p.LostByKind["reset_sent"]
	}
	if secs, how, ok := timeline.CoveringOverStops(sleeps); ok {
		r.PreStopSleep, r.PreStopSleepFrom, r.PreStopSleepAtLeast = &secs, how, atLeast
		line := fmt.Sprintf("%d connection attempts were refused after the pods stopped listening: a preStop sleep of %d s would have covered them (%s, from the stop's beginning or the pod's deletion to the last client request); the application should keep serving until it ends",
			refused, secs, how)
		if atLeast {
			line = fmt.Sprintf("%d connection attempts were refused after the pods stopped listening, and they were still coming when the counts were read: a preStop sleep of at least %d s (%s, from the stop's beginning or the pod's deletion to the last client request counted), maybe more; the application should keep serving until it ends, and the rollout after the change will show whether it was enough",
				refused, secs, how)
		}
		if current != nil {
			if have, ok := sleepSeconds(current.Template); ok && have >= float64(secs) {
				line += fmt.Sprintf(". Revision %d, now current, sleeps %g s already: its own rollout's report will show whether it helped", current.Number, have)
			}
		}
		r.Advice = append(r.Advice, line)
		switch shut, how2, ok := timeline.CoveringOverStops(shutdowns); {
		case ok:
			g := secs + shut
			r.GracePeriod, r.GracePeriodFrom = &g, fmt.Sprintf("the sleep plus the shutdown after SIGTERM (%d s, %s)", shut, how2)
			line := fmt.Sprintf("terminationGracePeriodSeconds of at least %d s: the sleep plus the shutdown the graceful stops took after SIGTERM (%d s, %s)", g, shut, how2)
			if current != nil && current.Template.GracePeriod >= int64(g) {
				line += fmt.Sprintf("; revision %d's %d s is enough", current.Number, current.Template.GracePeriod)
			}
			r.Advice = append(r.Advice, line)
		default:
			r.Advice = append(r.Advice, "the grace to give it cannot be measured here: no stop ended gracefully, so the shutdown after SIGTERM was not seen; fix the stop signal's handling first")
		}
	}
	if race > 0 {
		r.Advice = append(r.Advice, fmt.Sprintf("%d requests were lost to the keep-alive race (the pods closed connections their clients still sent on): answer the next request on each connection with `Connection: close` (HTTP/2: GOAWAY) and keep serving until the clients move, rather than closing idle connections under them", race))
	}
	if reset > 0 {
		r.Advice = append(r.Advice, fmt.Sprintf("the pods reset %d connections with a request unread: drain keep-alive connections after their in-flight request, and let queued connections be accepted before closing the listener", reset))
	}
	if n := r.Totals.AtOnce; n >= 2 && n >= replicas && replicas > 0 && r.Totals.Lost > 0 {
		// Measured: the old pods' stops overlapped. Whether the new
		// revision's pods served meanwhile (maxSurge) the agents do not
		// see: said as the condition it is.
		r.Advice = append(r.Advice, fmt.Sprintf("all %d pods of revision %d were stopping at the same time: their clients had only the new revision's pods, and only if those were all ready by then (maxSurge); if not, nothing served them, and a maxUnavailable below %d keeps old pods serving until new ones are ready",
			n, r.Revision-1, replicas))
	}
	if killed > 0 {
		r.Advice = append(r.Advice, fmt.Sprintf("%d of %d pods did not stop by themselves (the SIGKILL ended them): `kubectl sigscope timeline` on one says why and how to fix it", killed, len(r.Pods)))
	}
}

// sleepSeconds is the preStop sleep of a template: the longest of its
// containers' that only sleep.
func sleepSeconds(f TemplateFacts) (best float64, ok bool) {
	for _, c := range f.Containers {
		if v := c.PreStopSleep; v != nil && (!ok || *v > best) {
			best, ok = *v, true
		}
	}
	return best, ok
}

// compare sets r.Compared against prev, the rollout before it.
func (r *RolloutReport) compare(prev *RolloutReport) {
	c := &RolloutComparison{Revision: prev.Revision, Lost: prev.Totals.Lost, Uncounted: prev.Totals.PodsUncounted,
		Slowest: prev.Totals.Slowest, Outcomes: prev.Totals.Outcomes, Changes: []string{}}
	if prev.From != nil && r.From != nil {
		if ch := prev.From.Template.Changes(&r.From.Template); ch != nil {
			c.Changes = ch
		}
	}
	var words []string
	switch {
	case prev.From == nil || r.From == nil:
		words = append(words, "the templates cannot be compared: a stopped revision is not known")
	case len(c.Changes) == 0:
		words = append(words, fmt.Sprintf("revision %d's pods, stopped here, had the stop-related template of revision %d's, stopped by rollout %d: nothing to credit",
			r.From.Number, prev.From.Number, prev.Revision))
	default:
		words = append(words, fmt.Sprintf("revision %d's pods, stopped here, against revision %d's, stopped by rollout %d: %s",
			r.From.Number, prev.From.Number, prev.Revision, strings.Join(c.Changes, "; ")))
	}
	switch {
	case prev.Totals.Pods == 0 || r.Totals.Pods == 0:
		words = append(words, "one of the two recorded no stops: nothing to weigh")
	case prev.Totals.PodsUncounted > 0 || r.Totals.PodsUncounted > 0:
		words = append(words, fmt.Sprintf("lost requests %d → %d, but some pods' traffic was not counted: not comparable", prev.Totals.Lost, r.Totals.Lost))
	default:
		w := fmt.Sprintf("lost requests %d → %d", prev.Totals.Lost, r.Totals.Lost)
		if prev.Totals.Slowest != nil && r.Totals.Slowest != nil {
			w += fmt.Sprintf(", slowest stop %.1f s → %.1f s", *prev.Totals.Slowest, *r.Totals.Slowest)
		}
		switch {
		case len(c.Changes) > 0 && r.Totals.Lost < prev.Totals.Lost:
			w += ": it helped"
		case len(c.Changes) > 0 && r.Totals.Lost > prev.Totals.Lost:
			w += ": it did not help"
		}
		words = append(words, w)
	}
	c.Words = strings.Join(words, "; ")
	r.Compared = c
}
