package deploy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestService(t *testing.T) {
	o := readManifest(t, manifestDefault)
	svc := o.services[0]
	ds := oneDaemonSet(t, o)
	if !selectorMatches(svc.Spec.Selector, ds.Spec.Template.Labels) {
		t.Errorf("Service selector %v does not select the agent's pods %v", svc.Spec.Selector, ds.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service ports %+v, want one", svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Name != "metrics" || p.Port != port || p.TargetPort != intstr.FromString("metrics") {
		t.Errorf("Service port %+v, want metrics %d -> metrics", p, port)
	}
}

type grant struct{ group, resource, verb string }

func (a grant) compare(b grant) int {
	return strings.Compare(a.group+"/"+a.resource+"/"+a.verb, b.group+"/"+b.resource+"/"+b.verb)
}

// grants lists what r grants, sorted; wildcards, resource names and
// non-resource URLs are errors.
func grants(t *testing.T, r *rbacv1.ClusterRole) []grant {
	t.Helper()
	var got []grant
	for _, rule := range r.Rules {
		if len(rule.ResourceNames) != 0 || len(rule.NonResourceURLs) != 0 {
			t.Errorf("%s rule %+v: resourceNames or nonResourceURLs were not expected", r.Name, rule)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("%s rule %+v has a wildcard", r.Name, rule)
					}
					got = append(got, grant{g, res, v})
				}
			}
		}
	}
	slices.SortFunc(got, grant.compare)
	return got
}

func TestKubeEventsManifest(t *testing.T) {
	o := readManifest(t, manifestKubeEvents)
	ds := oneDaemonSet(t, o)
	checkPodSecurity(t, manifestKubeEvents, ds, false)
	spec := ds.Spec.Template.Spec
	if !slices.Contains(spec.Containers[0].Args, "--kube-events") {
		t.Errorf("args %q lack --kube-events", spec.Containers[0].Args)
	}
	if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
		t.Errorf("--kube-events needs the service account token mounted")
	}
	if len(o.roles)+len(o.roleBindings) != 0 {
		t.Errorf("namespaced RBAC objects were not expected")
	}
	var agentRole *rbacv1.ClusterRole
	for _, r := range o.clusterRoles {
		if r.Name == "sigscope" {
			agentRole = r
		}
	}
	if len(o.clusterRoles) != 3 || agentRole == nil || len(o.clusterBindings) != 1 {
		t.Fatalf("%d ClusterRoles (agent's: %v) and %d ClusterRoleBindings, want the agent's and the two readers', and 1", len(o.clusterRoles), agentRole != nil, len(o.clusterBindings))
	}
	// Exactly: events create/patch in the core group and events.k8s.io,
	// pods get/list/watch, core events list/watch, EndpointSlices
	// list/watch.
	want := []grant{
		{"", "events", "create"}, {"", "events", "patch"},
		{"", "pods", "get"}, {"", "pods", "list"}, {"", "pods", "watch"},
		{"", "events", "list"}, {"", "events", "watch"},
		{"events.k8s.io", "events", "create"}, {"events.k8s.io", "events", "patch"},
		{"discovery.k8s.io", "endpointslices", "list"}, {"discovery.k8s.io", "endpointslices", "watch"},
	}
	slices.SortFunc(want, grant.compare)
	if got := grants(t, agentRole); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole grants\n got %v\nwant %v", got, want)
	}
	b := o.clusterBindings[0]
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != agentRole.Name || b.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("binding refers to %+v, not the ClusterRole %s", b.RoleRef, agentRole.Name)
	}
	sa := o.serviceAccounts[0]
	if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa.Name ||
		b.Subjects[0].Namespace != sa.Namespace || spec.ServiceAccountName != sa.Name {
		t.Errorf("binding subjects %+v, pod's service account %q, want only %s/%s", b.Subjects, spec.ServiceAccountName, sa.Namespace, sa.Name)
	}

	if len(o.serviceMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(o.serviceMonitors))
	}
	sm := o.serviceMonitors[0]
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !selectorMatches(sel, o.services[0].Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", sel, o.services[0].Labels)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
	}
	ep, _ := eps[0].(map[string]any)
	if ep["port"] != "metrics" || ep["path"] != "/metrics" || ep["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoint %v, want port metrics, path /metrics, honorLabels (docs/metrics.md)", ep)
	}
}
