package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// documentedCaps is the capability set added back by default, the one
// docs/deploy.md explains. Changing it means changing the doc, the chart's
// comments and this list together.
var documentedCaps = []corev1.Capability{"BPF", "PERFMON", "SYS_PTRACE"}

const (
	manifestDefault    = "manifests/sigscope.yaml"
	manifestKubeEvents = "manifests/sigscope-kube-events.yaml"
	templateDaemonSet  = "chart/sigscope/templates/daemonset.yaml"
	port               = 10042
	namespace          = "sigscope"
)

// objects is one rendered manifest, decoded.
type objects struct {
	daemonSets      []*appsv1.DaemonSet
	serviceAccounts []*corev1.ServiceAccount
	services        []*corev1.Service
	clusterRoles    []*rbacv1.ClusterRole
	clusterBindings []*rbacv1.ClusterRoleBinding
	roles           []*rbacv1.Role
	roleBindings    []*rbacv1.RoleBinding
	serviceMonitors []*unstructured.Unstructured
	prometheusRules []*prometheusRule
}

// prometheusRule is prometheus-operator's PrometheusRule
// (monitoring.coreos.com/v1) with the fields the chart sets: its spec is a
// rules file's groups, decoded strictly.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       ruleGroups        `json:"spec"`
}

// splitDocuments splits a multi-document YAML stream at its "---" lines and
// drops the documents that hold only comments.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// strict decodes one document into v the way the API server does, but
// refusing what it would only warn about: unknown fields, duplicate fields,
// and fields in the wrong case (the server's decoding is case-sensitive;
// encoding/json's is not, so "hostPid" would pass for "hostPID" there). A
// misspelt or misplaced field is dropped by the server, and the setting it
// carried with it.
func strict(t *testing.T, name string, doc []byte, v any) {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, doc)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		t.Fatalf("%s: decoding into %T: %v", name, v, err)
	}
	for _, e := range strictErrs {
		t.Errorf("%s: strict decoding into %T: %v", name, v, e)
	}
	if len(strictErrs) > 0 {
		t.FailNow()
	}
}

// decode reads every object of a rendered manifest into its k8s.io/api type
// by kind. An unexpected kind fails: the tests must know every object.
func decode(t *testing.T, name string, data []byte) *objects {
	t.Helper()
	o := &objects{}
	docs := splitDocuments(data)
	if len(docs) == 0 {
		t.Fatalf("%s: no objects", name)
	}
	for i, doc := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		where := fmt.Sprintf("%s: document %d (%s %s)", name, i, head.APIVersion, head.Kind)
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 DaemonSet":
			v := &appsv1.DaemonSet{}
			strict(t, where, doc, v)
			o.daemonSets = append(o.daemonSets, v)
		case "v1 ServiceAccount":
			v := &corev1.ServiceAccount{}
			strict(t, where, doc, v)
			o.serviceAccounts = append(o.serviceAccounts, v)
		case "v1 Service":
			v := &corev1.Service{}
			strict(t, where, doc, v)
			o.services = append(o.services, v)
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			v := &rbacv1.ClusterRole{}
			strict(t, where, doc, v)
			o.clusterRoles = append(o.clusterRoles, v)
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			v := &rbacv1.ClusterRoleBinding{}
			strict(t, where, doc, v)
			o.clusterBindings = append(o.clusterBindings, v)
		case "rbac.authorization.k8s.io/v1 Role":
			v := &rbacv1.Role{}
			strict(t, where, doc, v)
			o.roles = append(o.roles, v)
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			v := &rbacv1.RoleBinding{}
			strict(t, where, doc, v)
			o.roleBindings = append(o.roleBindings, v)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			// prometheus-operator's types are not a dependency: check
			// the fields the chart sets by hand.
			m := map[string]any{}
			strict(t, where, doc, &m)
			o.serviceMonitors = append(o.serviceMonitors, &unstructured.Unstructured{Object: m})
		case "monitoring.coreos.com/v1 PrometheusRule":
			v := &prometheusRule{}
			strict(t, where, doc, v)
			o.prometheusRules = append(o.prometheusRules, v)
		default:
			t.Fatalf("%s: unexpected object", where)
		}
	}
	return o
}

func readManifest(t *testing.T, path string) *objects {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, path, data)
}

func oneDaemonSet(t *testing.T, o *objects) *appsv1.DaemonSet {
	t.Helper()
	if len(o.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(o.daemonSets))
	}
	return o.daemonSets[0]
}

// checkPodSecurity checks what must hold in every rendering, whatever the
// values: the agent's pod sees the host's pids, mounts every host path
// read-only, runs with a read-only root filesystem, and is either privileged
// on purpose or holds exactly the documented capabilities.
func checkPodSecurity(t *testing.T, name string, ds *appsv1.DaemonSet, wantPrivileged bool) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Errorf("%s: hostPID is false: the agent must see every process's /proc", name)
	}
	if spec.HostNetwork || spec.HostIPC {
		t.Errorf("%s: hostNetwork %v, hostIPC %v: neither is needed", name, spec.HostNetwork, spec.HostIPC)
	}
	if len(spec.InitContainers) != 0 || len(spec.EphemeralContainers) != 0 {
		t.Errorf("%s: init or ephemeral containers were not expected", name)
	}
	if len(spec.Containers) == 0 {
		t.Fatalf("%s: no containers", name)
	}
	if psc := spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot {
		t.Errorf("%s: pod runAsNonRoot true contradicts runAsUser 0", name)
	}
	hostPaths := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath
		}
	}
	for _, c := range spec.Containers {
		where := name + ": container " + c.Name
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", where)
			continue
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", where)
		}
		if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
			t.Errorf("%s: runAsUser %v, want 0 (the runtime sockets and other processes' /proc)", where, sc.RunAsUser)
		}
		if sc.RunAsNonRoot == nil || *sc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot should be explicitly false, as documented", where)
		}
		privileged := sc.Privileged != nil && *sc.Privileged
		if privileged != wantPrivileged {
			t.Errorf("%s: privileged %v, want %v", where, privileged, wantPrivileged)
		}
		if wantPrivileged {
			// The API server refuses allowPrivilegeEscalation false with
			// privileged true; a capability list would be meaningless.
			if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
				t.Errorf("%s: privileged with allowPrivilegeEscalation false is rejected by the API server", where)
			}
			if sc.Capabilities != nil {
				t.Errorf("%s: privileged with a capability list %+v", where, sc.Capabilities)
			}
		} else {
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("%s: capabilities do not drop ALL: %+v", where, sc.Capabilities)
			} else if got := sortedCaps(sc.Capabilities.Add); !reflect.DeepEqual(got, sortedCaps(documentedCaps)) {
				t.Errorf("%s: added capabilities %v, want exactly the documented %v", where, got, sortedCaps(documentedCaps))
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil && spec.SecurityContext != nil {
				seccomp = spec.SecurityContext.SeccompProfile
			}
			if seccomp == nil {
				t.Errorf("%s: no seccomp profile: the kubelet's default would be Unconfined", where)
			}
		}
		for _, m := range c.VolumeMounts {
			// The one host directory written is the node journal's, where
			// the agent is told to write it and nowhere else.
			hp, ok := hostPaths[m.Name]
			journal := ok && m.Name == "journal" && hp.Path == m.MountPath && slices.Contains(c.Args, "--journal-dir="+m.MountPath)
			if ok && !m.ReadOnly && !journal {
				t.Errorf("%s: host path volume %s mounted read-write at %s", where, m.Name, m.MountPath)
			}
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
				t.Errorf("%s: %s: Bidirectional propagation needs a privileged container and is never needed", where, m.Name)
			}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				t.Errorf("%s: hostPort %d: the Service reaches the pod without one", where, p.HostPort)
			}
		}
	}
	for name2, hp := range hostPaths {
		if hp.Path == "/proc" || strings.HasPrefix(hp.Path, "/proc/") {
			t.Errorf("%s: volume %s mounts %s: /proc comes from hostPID", name, name2, hp.Path)
		}
		if hp.Path == "/" {
			t.Errorf("%s: volume %s mounts the host's root", name, name2)
		}
	}
}

func sortedCaps(cs []corev1.Capability) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, strings.TrimPrefix(string(c), "CAP_"))
	}
	sort.Strings(out)
	return out
}

func TestDefaultManifestObjects(t *testing.T) {
	o := readManifest(t, manifestDefault)
	if len(o.serviceAccounts) != 1 || len(o.services) != 1 || len(o.daemonSets) != 1 {
		t.Fatalf("want one ServiceAccount, Service and DaemonSet; got %d, %d, %d",
			len(o.serviceAccounts), len(o.services), len(o.daemonSets))
	}
	// Without --kube-events the agent has no RBAC at all; the
	// ClusterRoles are the readers' (kubectl sigscope: the agents, and a
	// rollout's workload), bound to nobody.
	if n := len(o.clusterBindings) + len(o.roles) + len(o.roleBindings); n != 0 {
		t.Errorf("%d RBAC bindings or Roles in the default manifest, want none", n)
	}
	if len(o.clusterRoles) != 2 || o.clusterRoles[0].Name != "sigscope-reader" || o.clusterRoles[1].Name != "sigscope-rollout-reader" {
		t.Fatalf("ClusterRoles %d, want sigscope-reader and sigscope-rollout-reader", len(o.clusterRoles))
	}
	want := []grant{{"", "pods", "get"}, {"", "pods", "list"}, {"", "pods/proxy", "get"}}
	if got := grants(t, o.clusterRoles[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("sigscope-reader grants\n got %v\nwant %v", got, want)
	}
	// Read-only: what kubectl sigscope rollout reads, nothing it could change.
	want = nil
	for _, res := range []string{"controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets"} {
		want = append(want, grant{"apps", res, "get"}, grant{"apps", res, "list"})
	}
	want = append(want, grant{"argoproj.io", "rollouts", "get"}, grant{"argoproj.io", "rollouts", "list"}, grant{"", "events", "list"}, grant{"", "pods", "list"})
	slices.SortFunc(want, grant.compare)
	if got := grants(t, o.clusterRoles[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("sigscope-rollout-reader grants\n got %v\nwant %v", got, want)
	}
	if len(o.serviceMonitors) != 0 {
		t.Errorf("ServiceMonitor rendered by default")
	}
	if len(o.prometheusRules) != 0 {
		t.Errorf("PrometheusRule rendered by default")
	}
	sa := o.serviceAccounts[0]
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount automounts a token without --kube-events")
	}
	for _, obj := range []struct{ kind, ns string }{
		{"ServiceAccount", sa.Namespace}, {"Service", o.services[0].Namespace}, {"DaemonSet", o.daemonSets[0].Namespace},
	} {
		if obj.ns != namespace {
			t.Errorf("%s in namespace %q, want %q", obj.kind, obj.ns, namespace)
		}
	}
}

func TestDaemonSetSecurity(t *testing.T) {
	ds := oneDaemonSet(t, readManifest(t, manifestDefault))
	checkPodSecurity(t, manifestDefault, ds, false)
	spec := ds.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token without --kube-events")
	}
	c := spec.Containers[0]
	if p := c.SecurityContext.SeccompProfile; p == nil || p.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("default seccomp profile %+v, want RuntimeDefault", p)
	}
}

func TestDaemonSetHostMounts(t *testing.T) {
	ds := oneDaemonSet(t, readManifest(t, manifestDefault))
	spec := ds.Spec.Template.Spec
	type hp struct {
		path string
		typ  corev1.HostPathType
	}
	got := map[string]hp{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath; the default manifest has no other", v.Name)
			continue
		}
		typ := corev1.HostPathType("")
		if v.HostPath.Type != nil {
			typ = *v.HostPath.Type
		}
		got[v.Name] = hp{v.HostPath.Path, typ}
	}
	// The runtimes' directories, not their sockets, with DirectoryOrCreate:
	// a node without containerd or CRI-O still runs the agent.
	want := map[string]hp{
		"btf":        {"/sys/kernel/btf", corev1.HostPathDirectory},
		"cgroup":     {"/sys/fs/cgroup", corev1.HostPathDirectory},
		"containerd": {"/run/containerd", corev1.HostPathDirectoryOrCreate},
		"crio":       {"/var/run/crio", corev1.HostPathDirectoryOrCreate},
		// The node journal, created on a new node.
		"journal": {"/var/lib/sigscope", corev1.HostPathDirectoryOrCreate},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("host paths\n got %v\nwant %v", got, want)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	// Mounted where the agent looks by default (container.Default*).
	for name, path := range map[string]string{
		"btf": "/sys/kernel/btf", "cgroup": "/sys/fs/cgroup", "containerd": "/run/containerd", "crio": "/var/run/crio",
	} {
		m, ok := mounts[name]
		if !ok {
			t.Errorf("volume %s not mounted", name)
			continue
		}
		if m.MountPath != path || !m.ReadOnly {
			t.Errorf("volume %s mounted at %s (readOnly %v), want %s read-only", name, m.MountPath, m.ReadOnly, path)
		}
	}
	// The journal: read-write, at the path the agent is given.
	if m, ok := mounts["journal"]; !ok || m.MountPath != "/var/lib/sigscope" || m.ReadOnly {
		t.Errorf("the journal mount %+v, want /var/lib/sigscope read-write", m)
	}
	if args := spec.Containers[0].Args; !slices.Contains(args, "--journal-dir=/var/lib/sigscope") ||
		!slices.Contains(args, "--journal-file-size=7M") || !slices.Contains(args, "--journal-files=8") {
		t.Errorf("args %q: want the journal at /var/lib/sigscope, 8 files of 7M", args)
	}
	for _, name := range []string{"containerd", "crio"} {
		if p := mounts[name].MountPropagation; p == nil || *p != corev1.MountPropagationHostToContainer {
			t.Errorf("%s: mount propagation %v, want HostToContainer (container rootfs mounts come and go below it)", name, p)
		}
	}
}

func TestDaemonSetProbesPortsEnv(t *testing.T) {
	ds := oneDaemonSet(t, readManifest(t, manifestDefault))
	c := ds.Spec.Template.Spec.Containers[0]
	var metricsPort *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			metricsPort = &c.Ports[i]
		}
	}
	if metricsPort == nil || metricsPort.ContainerPort != port {
		t.Fatalf("container port metrics = %+v, want %d", metricsPort, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe missing or not httpGet", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			t.Errorf("%s probe path %q, want %q", p.name, g.Path, p.path)
		}
		if g.Port != intstr.FromString("metrics") && g.Port != intstr.FromInt32(port) {
			t.Errorf("%s probe port %v, want the metrics port", p.name, g.Port.String())
		}
	}
	// NODE_NAME from the downward API, passed as --node-name.
	var nodeName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "NODE_NAME" {
			nodeName = &c.Env[i]
		}
	}
	if nodeName == nil || nodeName.ValueFrom == nil || nodeName.ValueFrom.FieldRef == nil ||
		nodeName.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME is not from fieldRef spec.nodeName: %+v", nodeName)
	}
	for _, arg := range []string{"--node-name=$(NODE_NAME)", fmt.Sprintf("--web.listen-address=:%d", port), "--max-series=1000"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %q", c.Args, arg)
		}
	}
	for _, arg := range []string{"--kube-events", "--pod-labels"} {
		if slices.Contains(c.Args, arg) {
			t.Errorf("args %q: %s is opt-in", c.Args, arg)
		}
	}
	if len(c.Command) != 0 {
		t.Errorf("command %q overrides the image's entrypoint (/sigscope serve)", c.Command)
	}
}

func TestDaemonSetSchedulingAndResources(t *testing.T) {
	ds := oneDaemonSet(t, readManifest(t, manifestDefault))
	spec := ds.Spec.Template.Spec
	everywhere := false
	for _, tol := range spec.Tolerations {
		if tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == "" {
			everywhere = true
		}
	}
	if !everywhere {
		t.Errorf("tolerations %+v: none with operator Exists and no key or effect (every taint)", spec.Tolerations)
	}
	for _, c := range spec.Containers {
		r := c.Resources
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := r.Requests[res]
			lim, okLim := r.Limits[res]
			if !okReq || !okLim {
				t.Errorf("container %s: %s request or limit missing: %+v", c.Name, res, r)
				continue
			}
			if req.Cmp(lim) > 0 {
				t.Errorf("container %s: %s request %s above limit %s", c.Name, res, req.String(), lim.String())
			}
		}
	}
	// The kubelet evicts it last and stops it last: the agent sees the
	// stops an eviction or a node's shutdown causes.
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", spec.PriorityClassName)
	}
	if got := ds.Spec.Template.Labels; !selectorMatches(ds.Spec.Selector.MatchLabels, got) {
		t.Errorf("selector %v does not match the pod labels %v", ds.Spec.Selector.MatchLabels, got)
	}
}

func selectorMatches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
