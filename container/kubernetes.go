package container

import (
	"strconv"
	"strings"

	"github.com/sigscope/sigscope/tracer"
)

// The kubelet's labels and annotations on every container it creates
// (pkg/kubelet/types/labels.go, pkg/kubelet/kuberuntime/labels.go).
const (
	LabelPodName          = "io.kubernetes.pod.name"
	LabelPodNamespace     = "io.kubernetes.pod.namespace"
	LabelPodUID           = "io.kubernetes.pod.uid"
	LabelContainerName    = "io.kubernetes.container.name"
	AnnotationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
)

// applyKubernetes fills the Kubernetes fields from a container's labels and
// annotations. The grace period is an annotation under CRI; dockershim and
// cri-dockerd turn annotations into labels, so a label counts too.
func applyKubernetes(info *Info, labels, annotations map[string]string) {
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
}

// parseStopSignal reads a configured stop signal ("TERM", "15",
// "SIGTERM"); 0 (the runtime default, SIGTERM) for "" or a name it cannot
// read.
func parseStopSignal(s string) tracer.Signal {
	if s == "" {
		return 0
	}
	sig, err := tracer.ParseSignal(s)
	if err != nil {
		return 0
	}
	return sig
}
