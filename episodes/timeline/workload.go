package timeline

import "strings"

// ControllerWorkload is the workload a pod's controller reference (its
// kind and name) stands for, from the reference alone (no further lookup,
// so no RBAC beyond reading pods): a ReplicaSet whose name is a
// Deployment's name, "-" and the pod's pod-template-hash label
// (podTemplateHash; the Deployment controller's naming) is taken for that
// Deployment. A CronJob's Jobs stay Jobs: telling one from a Job named like
// it would need the Job itself. An Argo Rollouts Rollout names its
// ReplicaSets the same way, but labels their pods rollouts-pod-template-hash
// (rolloutsPodTemplateHash) instead: such a ReplicaSet is taken for that
// Rollout, a workload of its own. The agent (kubemeta.WorkloadOf) and the
// kubectl plugin, which reads pods without client-go's types, share it.
func ControllerWorkload(kind, name, podTemplateHash, rolloutsPodTemplateHash string) Owner {
	if kind == "ReplicaSet" {
		for _, h := range []struct{ hash, kind string }{{podTemplateHash, "Deployment"}, {rolloutsPodTemplateHash, KindRollout}} {
			if h.hash == "" {
				continue
			}
			if d, ok := strings.CutSuffix(name, "-"+h.hash); ok && d != "" {
				return Owner{Kind: h.kind, Name: d}
			}
		}
	}
	return Owner{Kind: kind, Name: name}
}

// KindRollout is an Argo Rollouts Rollout's kind (argoproj.io/v1alpha1).
const KindRollout = "Rollout"

// Revision is the pod template a pod ran, as its controller labelled the
// pod: what tells the pods one rollout stopped from those it started. The
// agent reads it from the pod alone, as it does the workload; the
// revision's number (a Deployment's deployment.kubernetes.io/revision, on
// its ReplicaSet) is the kubectl plugin's to look up.
type Revision struct {
	// Controller is the pod's own controller, "ReplicaSet/web-7d9f8b6c5"
	// for a Deployment's pod: the ReplicaSet is the Deployment's revision.
	Controller string `json:"controller"`
	// Hash is the label's value: a ReplicaSet's pod-template-hash, a
	// StatefulSet's or DaemonSet's controller-revision-hash (the
	// ControllerRevision's name for a StatefulSet's pod, its hash for a
	// DaemonSet's).
	Hash string `json:"hash"`
	// Label is which label Hash is (LabelPodTemplateHash,
	// LabelControllerRevisionHash).
	Label string `json:"label"`
}

// The labels a pod's controller puts on it for the template it was made
// from.
const (
	LabelPodTemplateHash        = "pod-template-hash"
	LabelControllerRevisionHash = "controller-revision-hash"
	// LabelRolloutsPodTemplateHash is an Argo Rollouts Rollout's
	// ReplicaSets' and their pods' (its DefaultRolloutUniqueLabelKey).
	LabelRolloutsPodTemplateHash = "rollouts-pod-template-hash"
)

// ControllerRevision is the revision of a pod whose controller reference is
// kind and name and whose labels pod-template-hash, controller-revision-hash
// and rollouts-pod-template-hash are podTemplateHash, controllerRevisionHash
// and rolloutsPodTemplateHash: a ReplicaSet's pod by the first (by the
// third, an Argo Rollout's), a StatefulSet's or DaemonSet's by the second; nil for any other pod (a bare pod, a Job's, a label missing). The
// agent (kubemeta) and the kubectl plugin share it, as ControllerWorkload.
func ControllerRevision(kind, name, podTemplateHash, controllerRevisionHash, rolloutsPodTemplateHash string) *Revision {
	switch {
	case kind == "ReplicaSet" && podTemplateHash != "":
		return &Revision{Controller: kind + "/" + name, Hash: podTemplateHash, Label: LabelPodTemplateHash}
	case kind == "ReplicaSet" && rolloutsPodTemplateHash != "":
		return &Revision{Controller: kind + "/" + name, Hash: rolloutsPodTemplateHash, Label: LabelRolloutsPodTemplateHash}
	case (kind == "StatefulSet" || kind == "DaemonSet") && controllerRevisionHash != "":
		return &Revision{Controller: kind + "/" + name, Hash: controllerRevisionHash, Label: LabelControllerRevisionHash}
	}
	return nil
}
