package timeline

import "strings"

// ControllerWorkload is the workload a pod's controller reference (its
// kind and name) stands for, from the reference alone (no further lookup,
// so no RBAC beyond reading pods): a ReplicaSet whose name is a
// Deployment's name, "-" and the pod's pod-template-hash label
// (podTemplateHash; the Deployment controller's naming) is taken for that
// Deployment. A CronJob's Jobs stay Jobs: telling one from a Job named like
// it would need the Job itself. The agent (kubemeta.WorkloadOf) and the
// kubectl plugin, which reads pods without client-go's types, share it.
func ControllerWorkload(kind, name, podTemplateHash string) Owner {
	if kind == "ReplicaSet" && podTemplateHash != "" {
		if d, ok := strings.CutSuffix(name, "-"+podTemplateHash); ok && d != "" {
			return Owner{Kind: "Deployment", Name: d}
		}
	}
	return Owner{Kind: kind, Name: name}
}
