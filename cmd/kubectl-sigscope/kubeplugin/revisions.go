package kubeplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// A workload's revisions, as its controller keeps them in the API server:
// a Deployment's ReplicaSets (each numbered by its revision annotation, the
// numbers it held before a rollback in its revision history), a
// StatefulSet's or DaemonSet's ControllerRevisions (a rollback renumbers
// the revision it reuses, and its earlier number is lost). The plugin reads
// them with its own little types, as it reads pods (apiserver.go).

// The annotations a Deployment's controller numbers its ReplicaSets with,
// and an Argo Rollout's.
const (
	annRevision        = "deployment.kubernetes.io/revision"
	annRevisionHistory = "deployment.kubernetes.io/revision-history"
	annRolloutRevision = "rollout.argoproj.io/revision"
)

// flexInt is a number the API may give as a string too: an Argo Rollout's
// status.observedGeneration is the hash of its spec, not a generation (0
// then: the Rollout's phase tells whether it is done).
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	var n int64
	if json.Unmarshal(b, &n) == nil {
		*f = flexInt(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	n, _ = strconv.ParseInt(s, 10, 64)
	*f = flexInt(n)
	return nil
}

// ownerRef is an object's owner reference.
type ownerRef struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller *bool  `json:"controller"`
}

// objectMeta is the metadata the plugin reads of a workload's objects.
type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               string            `json:"uid"`
	Generation        int64             `json:"generation"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	OwnerReferences   []ownerRef        `json:"ownerReferences"`
}

// controlledBy reports whether m's controller is the object of uid.
func (m *objectMeta) controlledBy(uid string) bool {
	for _, r := range m.OwnerReferences {
		if r.Controller != nil && *r.Controller && r.UID == uid {
			return true
		}
	}
	return false
}

// handler is a preStop hook's or a probe's action.
type handler struct {
	Exec *struct {
		Command []string `json:"command"`
	} `json:"exec"`
	HTTPGet *struct {
		Path string          `json:"path"`
		Port json.RawMessage `json:"port"` // a number or a port's name
	} `json:"httpGet"`
	TCPSocket *struct {
		Port json.RawMessage `json:"port"`
	} `json:"tcpSocket"`
	GRPC *struct {
		Port int32 `json:"port"`
	} `json:"grpc"`
	Sleep *struct {
		Seconds int64 `json:"seconds"`
	} `json:"sleep"`
}

// describe says what h does, in a few words; "" for none.
func (h *handler) describe() string {
	switch {
	case h == nil:
		return ""
	case h.Sleep != nil:
		return fmt.Sprintf("sleep %d s", h.Sleep.Seconds)
	case h.Exec != nil:
		if secs, ok := sleepCommand(h.Exec.Command); ok {
			return fmt.Sprintf("exec sleep %s s", secs)
		}
		return "exec " + strings.Join(h.Exec.Command, " ")
	case h.HTTPGet != nil:
		return fmt.Sprintf("httpGet :%s%s", port(h.HTTPGet.Port), h.HTTPGet.Path)
	case h.TCPSocket != nil:
		return "tcpSocket :" + port(h.TCPSocket.Port)
	case h.GRPC != nil:
		return fmt.Sprintf("grpc :%d", h.GRPC.Port)
	}
	return "other"
}

// sleepSeconds is how long a hook that only sleeps sleeps (the sleep
// action, or an exec of sleep alone); ok is false for any other hook.
func (h *handler) sleepSeconds() (secs float64, ok bool) {
	switch {
	case h == nil:
		return 0, false
	case h.Sleep != nil:
		return float64(h.Sleep.Seconds), true
	case h.Exec != nil:
		if v, ok := sleepCommand(h.Exec.Command); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// sleepArg matches `sleep N` as an exec hook runs it, alone or as a
// shell's command.
var sleepArg = regexp.MustCompile(`^\s*sleep\s+([0-9]+(\.[0-9]+)?)\s*$`)

// sleepCommand is the seconds of an exec hook that only sleeps
// (["sleep", "8"], ["sh", "-c", "sleep 8"]).
func sleepCommand(cmd []string) (string, bool) {
	line := strings.Join(cmd, " ")
	if len(cmd) == 3 && (cmd[0] == "sh" || cmd[0] == "/bin/sh" || cmd[0] == "bash" || cmd[0] == "/bin/bash") && cmd[1] == "-c" {
		line = cmd[2]
	}
	if m := sleepArg.FindStringSubmatch(line); m != nil {
		return m[1], true
	}
	return "", false
}

func port(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// containerTemplate is a container of a pod template.
type containerTemplate struct {
	Name          string `json:"name"`
	Image         string `json:"image"`
	RestartPolicy string `json:"restartPolicy"` // an init container's: Always for a sidecar
	Lifecycle     *struct {
		PreStop *handler `json:"preStop"`
	} `json:"lifecycle"`
	ReadinessProbe *struct {
		handler
		PeriodSeconds int32 `json:"periodSeconds"`
	} `json:"readinessProbe"`
}

// podTemplate is the part of a pod template a rollout's report compares.
type podTemplate struct {
	Spec struct {
		TerminationGracePeriodSeconds *int64              `json:"terminationGracePeriodSeconds"`
		InitContainers                []containerTemplate `json:"initContainers"`
		Containers                    []containerTemplate `json:"containers"`
	} `json:"spec"`
}

// TemplateFacts is what a revision's pod template says about its stops:
// the grace, each container's preStop hook, image and readiness probe.
type TemplateFacts struct {
	// GracePeriod is terminationGracePeriodSeconds (the API's default, 30,
	// when the template leaves it out).
	GracePeriod int64               `json:"termination_grace_period_s"`
	Containers  []ContainerTemplate `json:"containers"`
}

// ContainerTemplate is one container's part of TemplateFacts; a sidecar
// (an init container that runs beside the others) included.
type ContainerTemplate struct {
	Name      string `json:"name"`
	Image     string `json:"image"`
	PreStop   string `json:"prestop,omitempty"`   // "sleep 8 s", "exec ...", "httpGet :8080/drain"; "" for none
	Readiness string `json:"readiness,omitempty"` // "httpGet :8080/ready every 5 s"; "" for none
	// PreStopSleep is how long its preStop hook sleeps when that is all
	// it does (the sleep action, or an exec of sleep alone); nil for any
	// other hook, or none.
	PreStopSleep *float64 `json:"prestop_sleep_s,omitempty"`
}

// defaultGrace is terminationGracePeriodSeconds when a pod leaves it out.
const defaultGrace = 30

func (t *podTemplate) facts() TemplateFacts {
	f := TemplateFacts{GracePeriod: defaultGrace, Containers: []ContainerTemplate{}}
	if g := t.Spec.TerminationGracePeriodSeconds; g != nil {
		f.GracePeriod = *g
	}
	add := func(c *containerTemplate) {
		ct := ContainerTemplate{Name: c.Name, Image: c.Image}
		if c.Lifecycle != nil {
			ct.PreStop = c.Lifecycle.PreStop.describe()
			if secs, ok := c.Lifecycle.PreStop.sleepSeconds(); ok {
				ct.PreStopSleep = &secs
			}
		}
		if p := c.ReadinessProbe; p != nil {
			period := p.PeriodSeconds
			if period == 0 {
				period = 10 // the API's default
			}
			ct.Readiness = fmt.Sprintf("%s every %d s", p.describe(), period)
		}
		f.Containers = append(f.Containers, ct)
	}
	for i := range t.Spec.InitContainers {
		if t.Spec.InitContainers[i].RestartPolicy == "Always" {
			add(&t.Spec.InitContainers[i])
		}
	}
	for i := range t.Spec.Containers {
		add(&t.Spec.Containers[i])
	}
	return f
}

// Changes are what changed from f to g, in words ("preStop of app: none →
// sleep 8 s"), in a stable order; none for templates alike in what a
// report compares.
func (f *TemplateFacts) Changes(g *TemplateFacts) []string {
	var out []string
	none := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	if f.GracePeriod != g.GracePeriod {
		out = append(out, fmt.Sprintf("terminationGracePeriodSeconds: %d → %d", f.GracePeriod, g.GracePeriod))
	}
	byName := map[string]ContainerTemplate{}
	for _, c := range f.Containers {
		byName[c.Name] = c
	}
	for _, c := range g.Containers {
		old, ok := byName[c.Name]
		if !ok {
			out = append(out, fmt.Sprintf("container %s added", c.Name))
			continue
		}
		delete(byName, c.Name)
		if old.PreStop != c.PreStop {
			out = append(out, fmt.Sprintf("preStop of %s: %s → %s", c.Name, none(old.PreStop), none(c.PreStop)))
		}
		if old.Readiness != c.Readiness {
			out = append(out, fmt.Sprintf("readiness probe of %s: %s → %s", c.Name, none(old.Readiness), none(c.Readiness)))
		}
		if old.Image != c.Image {
			out = append(out, fmt.Sprintf("image of %s: %s → %s", c.Name, old.Image, c.Image))
		}
	}
	for _, c := range f.Containers {
		if _, gone := byName[c.Name]; gone {
			out = append(out, fmt.Sprintf("container %s removed", c.Name))
		}
	}
	return out
}

// workloadObject is a Deployment, StatefulSet or DaemonSet, the fields the
// report reads.
type workloadObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Replicas *int32 `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration flexInt `json:"observedGeneration"`
		// An Argo Rollout's: Healthy once done (Progressing, Paused,
		// Degraded before).
		Phase           string `json:"phase"`
		Replicas        int32  `json:"replicas"`
		UpdatedReplicas int32  `json:"updatedReplicas"`
		CurrentRevision string `json:"currentRevision"` // a StatefulSet's
		UpdateRevision  string `json:"updateRevision"`
		// A DaemonSet's.
		DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`
		UpdatedNumberScheduled int32 `json:"updatedNumberScheduled"`
		NumberUnavailable      int32 `json:"numberUnavailable"`
	} `json:"status"`
}

// replicaSet is a Deployment's revision.
type replicaSet struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Template podTemplate `json:"template"`
	} `json:"spec"`
	Status struct {
		Replicas int32 `json:"replicas"`
	} `json:"status"`
}

// controllerRevision is a StatefulSet's or DaemonSet's revision: its data
// is the template as a patch ({"spec":{"template":{...}}}).
type controllerRevision struct {
	Metadata objectMeta `json:"metadata"`
	Revision int64      `json:"revision"`
	Data     struct {
		Spec struct {
			Template podTemplate `json:"template"`
		} `json:"spec"`
	} `json:"data"`
}

// event is a core Event, the fields the report reads.
type event struct {
	InvolvedObject struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"involvedObject"`
	Reason         string     `json:"reason"`
	Message        string     `json:"message"`
	FirstTimestamp time.Time  `json:"firstTimestamp"`
	LastTimestamp  time.Time  `json:"lastTimestamp"`
	EventTime      *time.Time `json:"eventTime"`
	Source         struct {
		Host string `json:"host"`
	} `json:"source"`
	ReportingInstance string `json:"reportingInstance"`
}

// at is when the event was first seen.
func (e *event) at() time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp
	}
	if e.EventTime != nil {
		return *e.EventTime
	}
	return e.LastTimestamp
}

// node is the node whose kubelet reported the event ("" for none).
func (e *event) node() string {
	if e.Source.Host != "" {
		return e.Source.Host
	}
	return e.ReportingInstance
}

// groupURL is the URL of a path under /apis/GROUP/VERSION, beside the core
// API's /api/v1.
func (s *apiServer) groupURL(groupVersion string, query url.Values, elems ...string) *url.URL {
	u := *s.base
	root := strings.TrimSuffix(s.base.Path, "/api/v1")
	u.Path = path.Join(append([]string{root, "apis", groupVersion}, elems...)...)
	u.RawQuery = query.Encode()
	return &u
}

// appsResources are the resources of the kinds a rollout names, and
// rolloutGroup the API group of an Argo Rollout's (the others' is apps/v1).
var appsResources = map[string]string{"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", timeline.KindRollout: "rollouts"}

const rolloutGroup = "argoproj.io/v1alpha1"

// workload reads the workload kind/name of namespace ns.
func (s *apiServer) workload(ctx context.Context, ns, kind, name string) (*workloadObject, error) {
	res, group := appsResources[kind], "apps/v1"
	if kind == timeline.KindRollout {
		group = rolloutGroup
	}
	var w workloadObject
	if err := s.list(ctx, res, s.groupURL(group, nil, "namespaces", ns, res, name), &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// listApps lists an apps/v1 resource of namespace ns, page by page.
func listApps[T any](ctx context.Context, s *apiServer, ns, resource string) ([]T, error) {
	return listPages[T](ctx, s, resource, url.Values{}, func(q url.Values) *url.URL {
		return s.groupURL("apps/v1", q, "namespaces", ns, resource)
	})
}

// events lists namespace ns's events about objects of kind ("" for any)
// with reason ("" for any).
func (s *apiServer) events(ctx context.Context, ns, kind, reason string) ([]event, error) {
	var sel []string
	if kind != "" {
		sel = append(sel, "involvedObject.kind="+kind)
	}
	if reason != "" {
		sel = append(sel, "reason="+reason)
	}
	q := url.Values{}
	if len(sel) > 0 {
		q.Set("fieldSelector", strings.Join(sel, ","))
	}
	return listAll[event](ctx, s, "events", q, "namespaces", ns, "events")
}

// WorkloadRevision is one revision of a workload: the object that holds
// it (a ReplicaSet, a ControllerRevision), the value of the label its pods
// carry (timeline.Revision.Hash), and its pod template's facts.
type WorkloadRevision struct {
	Number  int64     `json:"number"`
	Object  string    `json:"object"` // "ReplicaSet/web-7d9f8b6c5", "ControllerRevision/db-5c4d7f9b8"
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	// First is the number it was made for; a revision a rollback reused
	// holds a later number too (a Deployment keeps the earlier ones in
	// its ReplicaSet's revision history).
	First    int64         `json:"first"`
	Template TemplateFacts `json:"template"`
	// Pods is how many pods of it there are now (the ReplicaSet's
	// status; not known for a ControllerRevision: -1).
	Pods int32 `json:"-"`
}

// revisions is a workload's revisions by number: a revision a rollback
// reused is there under each number it held.
type revisions struct {
	kind    string // Deployment, StatefulSet, DaemonSet
	byNum   map[int64]*WorkloadRevision
	current int64 // the highest number
}

// deploymentRevisions are Deployment w's ReplicaSets as revisions (an Argo
// Rollout's with kind Rollout: its own annotation and label).
func deploymentRevisions(kind string, w *workloadObject, rss []replicaSet) *revisions {
	r := &revisions{kind: kind, byNum: map[int64]*WorkloadRevision{}}
	ann, label := annRevision, timeline.LabelPodTemplateHash
	if kind == timeline.KindRollout {
		ann, label = annRolloutRevision, timeline.LabelRolloutsPodTemplateHash
	}
	for i := range rss {
		rs := &rss[i]
		if !rs.Metadata.controlledBy(w.Metadata.UID) {
			continue
		}
		n, err := strconv.ParseInt(rs.Metadata.Annotations[ann], 10, 64)
		if err != nil {
			continue // not numbered yet
		}
		nums := []int64{n}
		for _, h := range strings.Split(rs.Metadata.Annotations[annRevisionHistory], ",") {
			if m, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
				nums = append(nums, m)
			}
		}
		rev := &WorkloadRevision{Number: n, Object: "ReplicaSet/" + rs.Metadata.Name, Hash: rs.Metadata.Labels[label],
			Created: rs.Metadata.CreationTimestamp, First: slices.Min(nums), Template: rs.Spec.Template.facts(), Pods: rs.Status.Replicas}
		for _, m := range nums {
			r.byNum[m] = rev
		}
		r.current = max(r.current, n)
	}
	return r
}

// controllerRevisions are StatefulSet's or DaemonSet's (kind) w's
// ControllerRevisions as revisions. A pod's controller-revision-hash is the
// ControllerRevision's name for a StatefulSet's pod, its hash (the name
// without the workload's) for a DaemonSet's.
func controllerRevisions(kind string, w *workloadObject, crs []controllerRevision) *revisions {
	r := &revisions{kind: kind, byNum: map[int64]*WorkloadRevision{}}
	for i := range crs {
		cr := &crs[i]
		if !cr.Metadata.controlledBy(w.Metadata.UID) {
			continue
		}
		hash := cr.Metadata.Name
		if kind == "DaemonSet" {
			hash = strings.TrimPrefix(cr.Metadata.Name, w.Metadata.Name+"-")
		}
		if h := cr.Metadata.Labels[timeline.LabelControllerRevisionHash]; h != "" && kind == "DaemonSet" {
			hash = h
		}
		rev := &WorkloadRevision{Number: cr.Revision, Object: "ControllerRevision/" + cr.Metadata.Name, Hash: hash,
			Created: cr.Metadata.CreationTimestamp, First: cr.Revision, Template: cr.Data.Spec.Template.facts(), Pods: -1}
		r.byNum[cr.Revision] = rev
		r.current = max(r.current, cr.Revision)
	}
	return r
}

// readRevisions reads workload kind/name of namespace ns and its
// revisions.
func readRevisions(ctx context.Context, api *apiServer, ns, kind, name string) (*workloadObject, *revisions, error) {
	w, err := api.workload(ctx, ns, kind, name)
	if err != nil {
		return nil, nil, err
	}
	if kind == "Deployment" || kind == timeline.KindRollout {
		rss, err := listApps[replicaSet](ctx, api, ns, "replicasets")
		if err != nil {
			return nil, nil, err
		}
		return w, deploymentRevisions(kind, w, rss), nil
	}
	crs, err := listApps[controllerRevision](ctx, api, ns, "controllerrevisions")
	if err != nil {
		return nil, nil, err
	}
	return w, controllerRevisions(kind, w, crs), nil
}

// inProgress reports whether w's controller has not finished rolling its
// pods onto its current revision.
func (w *workloadObject) inProgress(kind string, revs *revisions) bool {
	st := &w.Status
	if kind == timeline.KindRollout {
		return st.Phase != "Healthy"
	}
	if int64(st.ObservedGeneration) < w.Metadata.Generation {
		return true
	}
	switch kind {
	case "Deployment":
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		if st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas {
			return true
		}
		for n, rev := range revs.byNum {
			if n != revs.current && rev != revs.byNum[revs.current] && rev.Pods > 0 {
				return true // an old ReplicaSet still has pods
			}
		}
		return false
	case "StatefulSet":
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		return st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas < want
	default:
		return st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberUnavailable > 0
	}
}
