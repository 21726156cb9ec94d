package container

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sigscope/sigscope/containers/identity"
)

// The kubelet's labels and annotations on every container it creates
// (pkg/kubelet/types/labels.go, pkg/kubelet/kuberuntime/labels.go).
const (
	LabelPodName          = "io.kubernetes.pod.name"
	LabelPodNamespace     = "io.kubernetes.pod.namespace"
	LabelPodUID           = "io.kubernetes.pod.uid"
	LabelContainerName    = "io.kubernetes.container.name"
	AnnotationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	// AnnotationPreStop is the container's preStop hook as the kubelet
	// records it: the JSON of its v1.LifecycleHandler.
	AnnotationPreStop = "io.kubernetes.container.preStopHandler"
)

// applyKubernetes fills the Kubernetes fields from a container's labels and
// annotations. The grace period is an annotation under CRI; dockershim and
// cri-dockerd turn annotations into labels, so a label counts too.
func applyKubernetes(info *identity.Info, labels, annotations map[string]string) {
	if v := labels[LabelPodName]; v != "" {
		info.Pod = v
	}
	if v := labels[LabelPodNamespace]; v != "" {
		info.Namespace = v
	}
	if v := labels[LabelPodUID]; v != "" {
		info.PodUID = v
	}
	if v := labels[LabelContainerName]; v != "" {
		// Kubernetes users know the container by this name, not the
		// runtime's generated one (k8s_app_pod_ns_uid_0).
		info.Name = v
	}
	for _, m := range []map[string]string{annotations, labels} {
		if n, err := strconv.Atoi(strings.TrimSpace(m[AnnotationGracePeriod])); err == nil && n >= 0 {
			info.GracePeriod = n
			break
		}
	}
	for _, m := range []map[string]string{annotations, labels} {
		if h := ParseHook(m[AnnotationPreStop]); h != nil {
			info.PreStop = h
			break
		}
	}
}

// ParseHook reads a hook as the kubelet writes it in the
// io.kubernetes.container.preStopHandler annotation (the JSON of a
// v1.LifecycleHandler); nil for "" or anything it cannot read.
func ParseHook(s string) *identity.Hook {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var h struct {
		Exec *struct {
			Command []string `json:"command"`
		} `json:"exec"`
		HTTPGet *struct {
			Path   string `json:"path"`
			Port   any    `json:"port"`
			Host   string `json:"host"`
			Scheme string `json:"scheme"`
		} `json:"httpGet"`
		Sleep *struct {
			Seconds int `json:"seconds"`
		} `json:"sleep"`
	}
	if json.Unmarshal([]byte(s), &h) != nil {
		return nil
	}
	switch {
	case h.Exec != nil:
		return &identity.Hook{Kind: "exec", Command: h.Exec.Command}
	case h.HTTPGet != nil:
		return &identity.Hook{Kind: "http", URL: fmt.Sprintf("%s:%v%s", h.HTTPGet.Host, h.HTTPGet.Port, h.HTTPGet.Path)}
	case h.Sleep != nil:
		return &identity.Hook{Kind: "sleep", Seconds: h.Sleep.Seconds}
	}
	return nil
}
