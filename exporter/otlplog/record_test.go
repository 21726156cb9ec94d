package otlplog

import (
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/containers/langrt"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// podEpisode is a pod's container whose shell PID 1 dropped SIGTERM and was
// SIGKILLed at the end of its 30 s grace, after a 2 s preStop hook.
func podEpisode() *timeline.Episode {
	start := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	st := 0
	return &timeline.Episode{
		ID:   42,
		Node: "node-a",
		Container: timeline.Container{PidNS: 4026532180, Identity: identity.Identity{
			ID: "3d3243f7f97e" + strings.Repeat("0", 52), Name: "web", Image: "registry:5000/shop/web:1.2",
			Runtime: "containerd", Pod: "web-7c5f5f4f-fvp82", Namespace: "shop", PodUID: "5f1c0a5e-8d1b-4b6e-9c2a-0d6f3a9e7b21"}},
		Owner:       &timeline.Owner{Kind: "Deployment", Name: "web"},
		Revision:    &timeline.Revision{Controller: "ReplicaSet/web-7c5f5f4f", Hash: "7c5f5f4f", Label: "pod-template-hash"},
		Main:        timeline.Proc{PID: 12660, NsPID: 1, Comm: "sh", Runtime: langrt.Shell},
		MainIsInit:  true,
		Outcome:     timeline.OutcomeIgnoredByInit,
		Start:       start,
		StopSignal:  sigvocab.SIGTERM,
		StopVerdict: sigvocab.FateDroppedInit,
		StopAt:      start.Add(2 * time.Second),
		KillAt:      start.Add(30 * time.Second),
		ExitAt:      start.Add(30*time.Second + 3*time.Millisecond),
		ExitStatus:  137,
		ExitSignal:  sigvocab.SIGKILL,
		PreStop:     &timeline.PreStop{Kind: "exec", StartAt: start, EndAt: start.Add(2 * time.Second), ExitStatus: &st},
		StopReason:  "deleted",
		GracePeriod: 30 * time.Second,
		StopTimeout: 30 * time.Second,
		CascadeKills: []timeline.Proc{
			{PID: 12687, NsPID: 7, Comm: "sleep"}, {PID: 12688, NsPID: 8, Comm: "sleep"}},
		CascadeOmitted: 1,
		EventsDropped:  3,
		Hint:           "use the exec form",
	}
}

func attrs(r *log.Record) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		m[string(kv.Key)] = kv.Value
		return true
	})
	return m
}

func TestRecordAttributes(t *testing.T) {
	ep := podEpisode()
	now := time.Date(2026, 11, 26, 9, 0, 31, 0, time.UTC)
	r := Record(ep, now)
	if r.EventName() != EventName || !r.Timestamp().Equal(ep.Start) || !r.ObservedTimestamp().Equal(now) {
		t.Errorf("event %q at %v observed %v", r.EventName(), r.Timestamp(), r.ObservedTimestamp())
	}
	if r.Severity() != log.SeverityWarn || r.SeverityText() != "WARN" {
		t.Errorf("severity %v %q", r.Severity(), r.SeverityText())
	}
	wantBody := "container shop/web-7c5f5f4f-fvp82/web: ignored_by_init — " + ep.Summary()
	if got := r.Body().AsString(); got != wantBody {
		t.Errorf("body %q, want %q", got, wantBody)
	}
	want := map[string]attribute.Value{
		"k8s.node.name":               attribute.StringValue("node-a"),
		"k8s.namespace.name":          attribute.StringValue("shop"),
		"k8s.pod.name":                attribute.StringValue("web-7c5f5f4f-fvp82"),
		"k8s.pod.uid":                 attribute.StringValue("5f1c0a5e-8d1b-4b6e-9c2a-0d6f3a9e7b21"),
		"k8s.container.name":          attribute.StringValue("web"),
		"k8s.deployment.name":         attribute.StringValue("web"),
		"k8s.replicaset.name":         attribute.StringValue("web-7c5f5f4f"),
		"sigscope.revision":           attribute.StringValue("7c5f5f4f"),
		"sigscope.revision.label":     attribute.StringValue("pod-template-hash"),
		"container.name":              attribute.StringValue("web"),
		"container.id":                attribute.StringValue(ep.Container.ID),
		"container.runtime.name":      attribute.StringValue("containerd"),
		"container.image.name":        attribute.StringValue("registry:5000/shop/web"),
		"container.image.tags":        attribute.StringSliceValue([]string{"1.2"}),
		"process.pid":                 attribute.Int64Value(12660),
		"process.exit.code":           attribute.IntValue(137),
		"sigscope.owner":              attribute.StringValue("Deployment/web"),
		"sigscope.outcome":            attribute.StringValue("ignored_by_init"),
		"sigscope.needs_fix":          attribute.BoolValue(true),
		"sigscope.episode.id":         attribute.Int64Value(42),
		"sigscope.stop_signal":        attribute.StringValue("SIGTERM"),
		"sigscope.stop_verdict":       attribute.StringValue("pid1_ignored"),
		"sigscope.stop_reason":        attribute.StringValue("deleted"),
		"sigscope.grace_period_s":     attribute.Float64Value(30),
		"sigscope.stop_timeout_s":     attribute.Float64Value(30),
		"sigscope.kill_after_s":       attribute.Float64Value(28),
		"sigscope.stop_duration_s":    attribute.Float64Value(30.003),
		"sigscope.exit_signal":        attribute.StringValue("SIGKILL"),
		"sigscope.cascade_kills":      attribute.IntValue(3),
		"sigscope.prestop.kind":       attribute.StringValue("exec"),
		"sigscope.prestop.duration_s": attribute.Float64Value(2),
		"sigscope.main.comm":          attribute.StringValue("sh"),
		"sigscope.main.is_init":       attribute.BoolValue(true),
		"sigscope.main.runtime":       attribute.StringValue("shell"),
		"sigscope.events_dropped":     attribute.Int64Value(3),
		"sigscope.hint":               attribute.StringValue("use the exec form"),
	}
	got := attrs(&r)
	for k, v := range want {
		if g, ok := got[k]; !ok || g.Type() != v.Type() || g.String() != v.String() {
			t.Errorf("%s = %v (set %v), want %v", k, g.String(), ok, v.String())
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected attribute %s = %v", k, v.String())
		}
	}
}

// A docker container with little known: only what the episode knows is set.
func TestRecordOnlyKnown(t *testing.T) {
	ep := &timeline.Episode{
		Container: timeline.Container{PidNS: 1, Identity: identity.Identity{ID: "abc", Name: "ex-trap", Image: "busybox", Runtime: "docker"}},
		Main:      timeline.Proc{PID: 7, NsPID: 1, Comm: "sh"}, MainIsInit: true,
		Outcome: timeline.OutcomeGraceful, Start: time.Unix(1, 0), StopSignal: sigvocab.SIGTERM,
		StopAt: time.Unix(1, 0), ExitAt: time.Unix(2, 0),
	}
	r := Record(ep, time.Unix(3, 0))
	got := attrs(&r)
	for _, k := range []string{"k8s.node.name", "k8s.pod.name", "k8s.namespace.name", "k8s.container.name", "k8s.pod.uid",
		"container.image.tags", "sigscope.stop_reason", "sigscope.grace_period_s", "sigscope.kill_after_s",
		"sigscope.cascade_kills", "sigscope.prestop.duration_s", "sigscope.episode.id", "sigscope.hint", "sigscope.exit_signal"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s set to %v, which the episode does not know", k, v.String())
		}
	}
	if got["container.image.name"].AsString() != "busybox" || got["process.exit.code"].AsInt64() != 0 ||
		got["sigscope.stop_duration_s"].AsFloat64() != 1 {
		t.Errorf("attributes %v", got)
	}
	if r.Severity() != log.SeverityInfo {
		t.Errorf("graceful: severity %v", r.Severity())
	}
}

func TestSeverityByOutcome(t *testing.T) {
	warn := map[timeline.Outcome]bool{timeline.OutcomeIgnoredByInit: true, timeline.OutcomeIgnored: true,
		timeline.OutcomeHandlerTimeout: true, timeline.OutcomePreStopTimeout: true, timeline.OutcomeOOMKilled: true}
	for _, o := range timeline.Outcomes {
		sev, text := Severity(o)
		want, wantText := log.SeverityInfo, "INFO"
		if warn[o] {
			want, wantText = log.SeverityWarn, "WARN"
		}
		if sev != want || text != wantText {
			t.Errorf("%s: %v %q, want %v %q", o, sev, text, want, wantText)
		}
	}
}

// Names and comms are anyone's bytes: every string of the record is valid UTF-8.
func TestRecordUTF8(t *testing.T) {
	ep := podEpisode()
	bad := "w\xffeb\xc3"
	ep.Container.Name, ep.Container.Pod, ep.Container.Namespace, ep.Container.Image = bad, bad, bad, bad+":t\xfe"
	ep.Main.Comm, ep.Hint, ep.Node, ep.Owner.Name = bad, bad, bad, bad
	r := Record(ep, time.Now())
	if b := r.Body().AsString(); !utf8.ValidString(b) || !strings.Contains(b, `w\xffeb\xc3`) {
		t.Errorf("body %q", b)
	}
	for k, v := range attrs(&r) {
		var ss []string
		switch v.Type() {
		case attribute.STRING:
			ss = []string{v.AsString()}
		case attribute.STRINGSLICE:
			ss = v.AsStringSlice()
		}
		for _, s := range ss {
			if !utf8.ValidString(s) {
				t.Errorf("%s = %q: not UTF-8", k, s)
			}
		}
	}
}

func TestSplitImage(t *testing.T) {
	for _, tc := range []struct{ ref, name, tag string }{
		{"nginx", "nginx", ""},
		{"nginx:1.27", "nginx", "1.27"},
		{"registry:5000/app", "registry:5000/app", ""},
		{"registry:5000/app:v1", "registry:5000/app", "v1"},
		{"app@sha256:abcd", "app@sha256:abcd", ""},
		{"", "", ""},
	} {
		if n, tg := splitImage(tc.ref); n != tc.name || tg != tc.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tc.ref, n, tg, tc.name, tc.tag)
		}
	}
}

// The stop's traffic: one attribute per kind the kernel counted, the lost
// total, the verdict and the hint; refused left out where the kernel could
// not count it, nothing at all when the counts were not read.
func TestRecordTraffic(t *testing.T) {
	ep := &timeline.Episode{
		Container: timeline.Container{PidNS: 1, Identity: identity.Identity{ID: "abc", Name: "web", Runtime: "docker"}},
		Outcome:   timeline.OutcomeHandlerTimeout, Start: time.Unix(1, 0),
		Traffic: &timeline.Traffic{NetNS: 7, Since: time.Unix(1, 0), Until: time.Unix(3, 0), SeesRefused: true,
			Verdict: "45 connections lost: 40 refused, 2 reset by the application, 3 cut", Hint: "keep serving"},
	}
	for k, n := range []uint64{12, 9, 2, 1, 3, 40, 1} {
		ep.Traffic.Counts[k].N = n
	}
	got := attrs(ptr(Record(ep, time.Unix(4, 0))))
	want := map[string]int64{"sigscope.connections.accepted": 12, "sigscope.connections.closed": 9, "sigscope.connections.reset_sent": 2,
		"sigscope.connections.reset_received": 1, "sigscope.connections.cut": 3, "sigscope.connections.refused": 40, "sigscope.connections.lost": 45}
	for k, n := range want {
		if v, ok := got[k]; !ok || v.AsInt64() != n {
			t.Errorf("%s = %v, want %d", k, v.String(), n)
		}
	}
	if _, ok := got["sigscope.connections.listener_closed"]; ok {
		t.Errorf("the listener's close is a moment, not a count of connections")
	}
	if got["sigscope.traffic.verdict"].AsString() != ep.Traffic.Verdict || got["sigscope.traffic.hint"].AsString() != "keep serving" {
		t.Errorf("verdict %v, hint %v", got["sigscope.traffic.verdict"].String(), got["sigscope.traffic.hint"].String())
	}

	ep.Traffic.SeesRefused = false
	got = attrs(ptr(Record(ep, time.Unix(4, 0))))
	if _, ok := got["sigscope.connections.refused"]; ok || got["sigscope.connections.lost"].AsInt64() != 5 {
		t.Errorf("a kernel that cannot count refused attempts: refused %v, lost %v", got["sigscope.connections.refused"].String(), got["sigscope.connections.lost"].String())
	}
	ep.Traffic = &timeline.Traffic{NetNS: 7, Unread: "the trace ended"}
	for k := range attrs(ptr(Record(ep, time.Unix(4, 0)))) {
		if strings.HasPrefix(k, "sigscope.connections.") || strings.HasPrefix(k, "sigscope.traffic.") {
			t.Errorf("counts not read, yet %s", k)
		}
	}
}

// The kubelet's probes' connections, counted apart: one
// sigscope.probes.<kind> per kind the kernel counted, zeros included (told
// apart and none is not "not told apart"), never in sigscope.connections.*;
// absent when they were not told apart, or the counts were not read.
func TestRecordProbes(t *testing.T) {
	ep := &timeline.Episode{
		Container: timeline.Container{PidNS: 1, Identity: identity.Identity{ID: "abc", Name: "web", Pod: "web-1", Namespace: "shop", Runtime: "containerd"}},
		Outcome:   timeline.OutcomeGraceful, Start: time.Unix(1, 0),
		Traffic: &timeline.Traffic{NetNS: 7, Since: time.Unix(1, 0), Until: time.Unix(3, 0), SeesRefused: true, SeesLastSpeaker: true,
			Probes: &[sigvocab.NumNetKinds]uint64{sigvocab.NetAccepted: 3, sigvocab.NetClosed: 2, sigvocab.NetRefused: 1, sigvocab.NetListenerClosed: 1}},
	}
	ep.Traffic.Counts[sigvocab.NetAccepted].N = 10
	got := attrs(ptr(Record(ep, time.Unix(4, 0))))
	for k := range sigvocab.NumNetKinds {
		kind := sigvocab.NetKind(k)
		key := "sigscope.probes." + kind.String()
		v, ok := got[key]
		switch {
		case kind == sigvocab.NetListenerClosed:
			if ok {
				t.Errorf("%s: the listener's close is a moment, not a count of connections", key)
			}
		case !ok:
			t.Errorf("%s missing", key)
		case v.Type() != attribute.INT64 || v.AsInt64() != int64(ep.Traffic.Probes[k]):
			t.Errorf("%s = %v, want %d", key, v.String(), ep.Traffic.Probes[k])
		}
	}
	if got["sigscope.connections.accepted"].AsInt64() != 10 || got["sigscope.connections.refused"].AsInt64() != 0 || got["sigscope.connections.lost"].AsInt64() != 0 {
		t.Errorf("the clients' counts took the probes': accepted %v, refused %v, lost %v", got["sigscope.connections.accepted"].String(),
			got["sigscope.connections.refused"].String(), got["sigscope.connections.lost"].String())
	}

	// A kernel that cannot count refused attempts nor tell who spoke last:
	// those kinds are absent for the probes as for the clients.
	ep.Traffic.SeesRefused, ep.Traffic.SeesLastSpeaker = false, false
	got = attrs(ptr(Record(ep, time.Unix(4, 0))))
	for _, kind := range []sigvocab.NetKind{sigvocab.NetRefused, sigvocab.NetAfterClose, sigvocab.NetUnanswered} {
		if _, ok := got["sigscope.probes."+kind.String()]; ok {
			t.Errorf("sigscope.probes.%s from a kernel that cannot count it", kind)
		}
	}
	if got["sigscope.probes.accepted"].AsInt64() != 3 {
		t.Errorf("sigscope.probes.accepted = %v, want 3", got["sigscope.probes.accepted"].String())
	}

	for name, tr := range map[string]*timeline.Traffic{
		"not told apart": {NetNS: 7, Until: time.Unix(3, 0), SeesRefused: true, SeesLastSpeaker: true},
		"not read":       {NetNS: 7, Unread: "the trace ended", Probes: &[sigvocab.NumNetKinds]uint64{5}},
	} {
		ep.Traffic = tr
		for k := range attrs(ptr(Record(ep, time.Unix(4, 0)))) {
			if strings.HasPrefix(k, "sigscope.probes.") {
				t.Errorf("%s, yet %s", name, k)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Who was hurt, as parallel arrays under the semantic conventions' names,
// and the last request's figures; none without peers.
func TestRecordPeers(t *testing.T) {
	stop := time.Unix(10, 0)
	ep := &timeline.Episode{
		Container: timeline.Container{PidNS: 1, Identity: identity.Identity{ID: "abc", Name: "web", Pod: "web-1", Namespace: "shop", Runtime: "containerd"}},
		Outcome:   timeline.OutcomeGraceful, Start: stop, StopAt: stop, StopSignal: sigvocab.SIGTERM,
		Traffic: &timeline.Traffic{NetNS: 7, Since: stop, Until: stop.Add(5 * time.Second), SeesRefused: true, SeesLastSpeaker: true,
			Peers: &timeline.Peers{Top: []timeline.Peer{
				{Addr: netip.MustParseAddr("10.88.0.7"), Lost: 12, Who: timeline.PeerName{Kind: timeline.PeerPod, Namespace: "shop", Name: "ingress-a", Workload: "Deployment/ingress"}},
				{Addr: netip.MustParseAddr("10.88.0.1"), Lost: 3, MaybeLost: 1, Who: timeline.PeerName{Kind: timeline.PeerNode, Name: "node-1"}},
			}, More: 2, MoreLost: 2}},
	}
	ep.Traffic.Counts[sigvocab.NetRefused] = sigvocab.NetCount{N: 17, First: stop.Add(time.Second), Last: stop.Add(2500 * time.Millisecond)}
	got := attrs(ptr(Record(ep, time.Unix(20, 0))))
	for k, want := range map[string]string{
		"sigscope.peers.network.peer.address": `["10.88.0.7","10.88.0.1"]`, "sigscope.peers.lost": "[12,3]", "sigscope.peers.maybe_lost": "[0,1]",
		"sigscope.peers.kind": `["pod","node"]`, "sigscope.peers.k8s.pod.name": `["ingress-a",""]`, "sigscope.peers.k8s.namespace.name": `["shop",""]`,
		"sigscope.peers.workload": `["Deployment/ingress",""]`, "sigscope.peers.more": "2", "sigscope.peers.more_lost": "2",
		"sigscope.last_request.after_stop_s": "2.5", "sigscope.last_request.covering_prestop_sleep_s": "3",
	} {
		if v, ok := got[k]; !ok || v.String() != want {
			t.Errorf("%s = %q, want %q", k, v.String(), want)
		}
	}
	if _, ok := got["sigscope.last_request.after_endpoint_left_s"]; ok {
		t.Errorf("a lag after the endpoint left, with no endpoints")
	}
	ep.Traffic.Peers = nil
	for k := range attrs(ptr(Record(ep, time.Unix(20, 0)))) {
		if strings.HasPrefix(k, "sigscope.peers.") {
			t.Errorf("no peers, yet %s", k)
		}
	}
}
