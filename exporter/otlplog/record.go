package otlplog

import (
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// EventName names every record: one completed stop episode.
const EventName = "sigscope.container.stop"

// Attribute keys of sigscope's own, for what the semantic conventions have
// no name for. The conventions' keys come from the semconv package.
const (
	AttrOutcome         attribute.Key = "sigscope.outcome"
	AttrNeedsFix        attribute.Key = "sigscope.needs_fix"
	AttrEpisodeID       attribute.Key = "sigscope.episode.id"
	AttrStopSignal      attribute.Key = "sigscope.stop_signal"
	AttrStopVerdict     attribute.Key = "sigscope.stop_verdict"
	AttrStopReason      attribute.Key = "sigscope.stop_reason"
	AttrGracePeriod     attribute.Key = "sigscope.grace_period_s"
	AttrStopTimeout     attribute.Key = "sigscope.stop_timeout_s"
	AttrKillAfter       attribute.Key = "sigscope.kill_after_s"
	AttrStopDuration    attribute.Key = "sigscope.stop_duration_s"
	AttrExitSignal      attribute.Key = "sigscope.exit_signal"
	AttrCascadeKills    attribute.Key = "sigscope.cascade_kills"
	AttrPreStopKind     attribute.Key = "sigscope.prestop.kind"
	AttrPreStopDuration attribute.Key = "sigscope.prestop.duration_s"
	AttrMainComm        attribute.Key = "sigscope.main.comm"
	AttrMainIsInit      attribute.Key = "sigscope.main.is_init"
	AttrMainRuntime     attribute.Key = "sigscope.main.runtime"
	AttrOwner           attribute.Key = "sigscope.owner"
	// The pod's template (timeline.Revision): no semantic convention names
	// a revision. Its controller goes under k8s.replicaset.name, a
	// Deployment's revision being its ReplicaSet.
	AttrRevision      attribute.Key = "sigscope.revision"
	AttrRevisionLabel attribute.Key = "sigscope.revision.label"
	AttrEventsDropped attribute.Key = "sigscope.events_dropped"
	AttrStartUnseen   attribute.Key = "sigscope.start_unseen"
	AttrHint          attribute.Key = "sigscope.hint"
	// The stop's traffic (timeline.Traffic), when its counts were read:
	// sigscope.connections.<kind> per kind the kernel counted, then the
	// lost total, the kubelet's probes' connections apart as
	// sigscope.probes.<kind> (the same kinds, only when they were told
	// apart: Traffic.Probes), the verdict and its hint.
	AttrConnectionsPrefix               = "sigscope.connections."
	AttrProbesPrefix                    = "sigscope.probes."
	AttrConnectionsLost   attribute.Key = "sigscope.connections.lost"
	AttrTrafficVerdict    attribute.Key = "sigscope.traffic.verdict"
	AttrTrafficHint       attribute.Key = "sigscope.traffic.hint"
	// Who was hurt (Traffic.Peers): parallel arrays, index i one client
	// of the few that lost most, most first, under the semantic
	// conventions' names (the record's own k8s.pod.name is the stopping
	// pod's); "" where not known. The rest are summed.
	AttrPeerAddress      attribute.Key = "sigscope.peers.network.peer.address"
	AttrPeerLost         attribute.Key = "sigscope.peers.lost"
	AttrPeerMaybeLost    attribute.Key = "sigscope.peers.maybe_lost"
	AttrPeerKind         attribute.Key = "sigscope.peers.kind" // pod, node, namespace, ""
	AttrPeerPodName      attribute.Key = "sigscope.peers.k8s.pod.name"
	AttrPeerPodNamespace attribute.Key = "sigscope.peers.k8s.namespace.name"
	AttrPeerWorkload     attribute.Key = "sigscope.peers.workload"
	AttrPeersMore        attribute.Key = "sigscope.peers.more"
	AttrPeersMoreLost    attribute.Key = "sigscope.peers.more_lost"
	// The last client request (Episode.Lag): seconds after the stop
	// signal and after the endpoint left, and the preStop sleep that
	// would have covered it.
	AttrLastRequestAfterStop     attribute.Key = "sigscope.last_request.after_stop_s"
	AttrLastRequestAfterEndpoint attribute.Key = "sigscope.last_request.after_endpoint_left_s"
	AttrCoveringPreStopSleep     attribute.Key = "sigscope.last_request.covering_prestop_sleep_s"
)

// Severity is a record's severity: WARN for the outcomes that need a fix
// (timeline.Outcome.NeedsFix: ignored_by_init, ignored, handler_timeout,
// prestop_timeout, oom_killed, oom_kill_survived), INFO for the others (graceful, exited,
// killed: someone chose SIGKILL; unfinished: nothing to judge).
func Severity(o timeline.Outcome) (log.Severity, string) {
	if o.NeedsFix() {
		return log.SeverityWarn, "WARN"
	}
	return log.SeverityInfo, "INFO"
}

// Body is a record's body: the container, the outcome and the episode's
// one-line summary, as the text output's outcome line says it with the
// container named ("container web: ignored_by_init — PID 1 (sh) did not act
// on SIGTERM ..."), valid UTF-8.
func Body(ep *timeline.Episode) string {
	return textsafe.UTF8("container " + ep.Container.DisplayName() + ": " + string(ep.Outcome) + " — " + ep.Summary())
}

// Record maps a completed episode to its log record, observed at now. Only
// what the episode knows is set; every string is valid UTF-8 (names and
// comms are anyone's bytes).
func Record(ep *timeline.Episode, now time.Time) log.Record {
	var r log.Record
	r.SetEventName(EventName)
	r.SetTimestamp(ep.Start)
	r.SetObservedTimestamp(now)
	sev, text := Severity(ep.Outcome)
	r.SetSeverity(sev)
	r.SetSeverityText(text)
	r.SetBody(attribute.StringValue(Body(ep)))
	r.AddAttributes(Attributes(ep)...)
	return r
}

// Attributes are the record's attributes, in a fixed order.
func Attributes(ep *timeline.Episode) []attribute.KeyValue {
	var kv []attribute.KeyValue
	str := func(k attribute.Key, v string) {
		if v != "" {
			kv = append(kv, k.String(textsafe.UTF8(v)))
		}
	}
	secs := func(k attribute.Key, d time.Duration) { kv = append(kv, k.Float64(d.Seconds())) }
	c := ep.Container
	str(semconv.K8SNodeNameKey, ep.Node)
	if c.Pod != "" {
		str(semconv.K8SNamespaceNameKey, c.Namespace)
		str(semconv.K8SPodNameKey, c.Pod)
		str(semconv.K8SPodUIDKey, c.PodUID)
		str(semconv.K8SContainerNameKey, c.Name)
	}
	str(semconv.ContainerNameKey, c.Name)
	str(semconv.ContainerIDKey, c.ID)
	str(semconv.ContainerRuntimeNameKey, c.Runtime)
	if name, tag := splitImage(c.Image); name != "" {
		str(semconv.ContainerImageNameKey, name)
		if tag != "" {
			kv = append(kv, semconv.ContainerImageTagsKey.StringSlice([]string{textsafe.UTF8(tag)}))
		}
	}
	if ep.Main.PID != 0 {
		kv = append(kv, semconv.ProcessPIDKey.Int64(int64(ep.Main.PID)))
	}
	if !ep.ExitAt.IsZero() {
		kv = append(kv, semconv.ProcessExitCodeKey.Int(ep.ExitStatus))
	}
	if o := ep.Owner; o != nil {
		if k, ok := ownerKeys[o.Kind]; ok {
			str(k, o.Name)
		}
		str(AttrOwner, o.String())
	}
	if r := ep.Revision; r != nil {
		if rs, ok := strings.CutPrefix(r.Controller, "ReplicaSet/"); ok && (ep.Owner == nil || ep.Owner.Kind != "ReplicaSet") {
			str(semconv.K8SReplicaSetNameKey, rs) // a bare ReplicaSet's is the owner's, above
		}
		str(AttrRevision, r.Hash)
		str(AttrRevisionLabel, r.Label)
	}

	str(AttrOutcome, string(ep.Outcome))
	kv = append(kv, AttrNeedsFix.Bool(ep.Outcome.NeedsFix()))
	if ep.ID != 0 {
		kv = append(kv, AttrEpisodeID.Int64(int64(ep.ID)))
	}
	if ep.StopSignal != 0 {
		str(AttrStopSignal, ep.StopSignal.String())
		if ep.StopVerdict != sigvocab.FateUnknown {
			str(AttrStopVerdict, ep.StopVerdict.String())
		}
	}
	str(AttrStopReason, ep.StopReason)
	if ep.GracePeriod > 0 {
		secs(AttrGracePeriod, ep.GracePeriod)
	}
	if ep.StopTimeout > 0 {
		secs(AttrStopTimeout, ep.StopTimeout)
	}
	if d, ok := ep.KillAfter(); ok {
		secs(AttrKillAfter, d)
	}
	if d, ok := ep.StopDuration(); ok {
		secs(AttrStopDuration, d)
	}
	if !ep.ExitAt.IsZero() && ep.ExitSignal != 0 {
		str(AttrExitSignal, ep.ExitSignal.String())
	}
	if n := len(ep.CascadeKills) + ep.CascadeOmitted; n > 0 {
		kv = append(kv, AttrCascadeKills.Int(n))
	}
	if p := ep.PreStop; p != nil {
		str(AttrPreStopKind, p.Kind)
		if d, ok := p.Duration(ep.StopAt); ok {
			secs(AttrPreStopDuration, d)
		}
	}
	str(AttrMainComm, ep.Main.Comm)
	if ep.Main.PID != 0 {
		kv = append(kv, AttrMainIsInit.Bool(ep.MainIsInit))
	}
	str(AttrMainRuntime, string(ep.Main.Runtime))
	if ep.EventsDropped > 0 {
		kv = append(kv, AttrEventsDropped.Int64(int64(min(ep.EventsDropped, 1<<63-1))))
	}
	if ep.StartUnseen {
		kv = append(kv, AttrStartUnseen.Bool(true))
	}
	str(AttrHint, ep.Hint)
	if t := ep.Traffic; t != nil && t.Unread == "" {
		for k := range sigvocab.NumNetKinds {
			kind := sigvocab.NetKind(k)
			if kind != sigvocab.NetListenerClosed && t.Known(kind) {
				kv = append(kv, attribute.Key(AttrConnectionsPrefix+kind.String()).Int64(int64(min(t.N(kind), 1<<63-1))))
			}
		}
		kv = append(kv, AttrConnectionsLost.Int64(int64(min(t.Lost(), 1<<63-1))))
		if t.Probes != nil {
			for k, n := range t.Probes {
				kind := sigvocab.NetKind(k)
				if kind != sigvocab.NetListenerClosed && t.Known(kind) {
					kv = append(kv, attribute.Key(AttrProbesPrefix+kind.String()).Int64(int64(min(n, 1<<63-1))))
				}
			}
		}
		str(AttrTrafficVerdict, t.Verdict)
		str(AttrTrafficHint, t.Hint)
		kv = append(kv, peerAttributes(t.Peers)...)
		if l, ok := ep.Lag(); ok {
			if l.AfterStop != nil {
				kv = append(kv, AttrLastRequestAfterStop.Float64(l.AfterStop.Seconds()))
			}
			if l.AfterLeft != nil {
				kv = append(kv, AttrLastRequestAfterEndpoint.Float64(l.AfterLeft.Seconds()))
			}
			if secs, ok := ep.CoveringPreStopSleep(); ok {
				kv = append(kv, AttrCoveringPreStopSleep.Int(secs))
			}
		}
	}
	return kv
}

// peerAttributes are who was hurt, as parallel arrays; none when the
// kernel kept no peers or none lost anything.
func peerAttributes(ps *timeline.Peers) []attribute.KeyValue {
	if ps == nil || len(ps.Top) == 0 {
		return nil
	}
	n := len(ps.Top)
	addr, kind, pod, ns, wl := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	lost, maybe := make([]int64, n), make([]int64, n)
	for i, p := range ps.Top {
		if p.Addr.IsValid() {
			addr[i] = p.Addr.String()
		}
		kind[i], wl[i] = textsafe.UTF8(string(p.Who.Kind)), textsafe.UTF8(p.Who.Workload)
		if p.Who.Kind == timeline.PeerPod {
			pod[i], ns[i] = textsafe.UTF8(p.Who.Name), textsafe.UTF8(p.Who.Namespace)
		}
		lost[i], maybe[i] = int64(min(p.Lost, 1<<63-1)), int64(min(p.MaybeLost, 1<<63-1))
	}
	kv := []attribute.KeyValue{AttrPeerAddress.StringSlice(addr), AttrPeerLost.Int64Slice(lost), AttrPeerMaybeLost.Int64Slice(maybe),
		AttrPeerKind.StringSlice(kind), AttrPeerPodName.StringSlice(pod), AttrPeerPodNamespace.StringSlice(ns), AttrPeerWorkload.StringSlice(wl)}
	if ps.More > 0 {
		kv = append(kv, AttrPeersMore.Int(ps.More), AttrPeersMoreLost.Int64(int64(min(ps.MoreLost, 1<<63-1))))
	}
	return kv
}

// ownerKeys are the semantic conventions' workload names.
var ownerKeys = map[string]attribute.Key{
	"Deployment":  semconv.K8SDeploymentNameKey,
	"StatefulSet": semconv.K8SStatefulSetNameKey,
	"DaemonSet":   semconv.K8SDaemonSetNameKey,
	"ReplicaSet":  semconv.K8SReplicaSetNameKey,
	"Job":         semconv.K8SJobNameKey,
	"CronJob":     semconv.K8SCronJobNameKey,
}

// splitImage splits a runtime's image reference into the name the
// conventions' container.image.name wants and its tag: "nginx:1.27" is
// "nginx" and "1.27"; "registry:5000/app" has no tag; a digest reference
// ("app@sha256:...") keeps its digest in the name, having no tag.
func splitImage(ref string) (name, tag string) {
	if strings.Contains(ref, "@") {
		return ref, ""
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}
