package timeline

import "testing"

func TestControllerWorkload(t *testing.T) {
	for _, tc := range []struct {
		kind, name, hash, rolloutsHash string
		want                           Owner
	}{
		{"ReplicaSet", "web-7d9f8c6b5", "7d9f8c6b5", "", Owner{Kind: "Deployment", Name: "web"}},
		{"ReplicaSet", "web", "7d9f8c6b5", "", Owner{Kind: "ReplicaSet", Name: "web"}},                     // not the Deployment's naming
		{"ReplicaSet", "-7d9f8c6b5", "7d9f8c6b5", "", Owner{Kind: "ReplicaSet", Name: "-7d9f8c6b5"}},       // no name before the hash
		{"ReplicaSet", "web-7d9f8c6b5", "", "", Owner{Kind: "ReplicaSet", Name: "web-7d9f8c6b5"}},          // no label
		{"StatefulSet", "db-7d9f8c6b5", "7d9f8c6b5", "", Owner{Kind: "StatefulSet", Name: "db-7d9f8c6b5"}}, // only a ReplicaSet
		{"Job", "migrate-29400000", "", "", Owner{Kind: "Job", Name: "migrate-29400000"}},
		// An Argo Rollout's ReplicaSet: a Rollout, not a Deployment.
		{"ReplicaSet", "web-5f9b48bf7c", "", "5f9b48bf7c", Owner{Kind: KindRollout, Name: "web"}},
		{"ReplicaSet", "web", "", "5f9b48bf7c", Owner{Kind: "ReplicaSet", Name: "web"}},
	} {
		if got := ControllerWorkload(tc.kind, tc.name, tc.hash, tc.rolloutsHash); got != tc.want {
			t.Errorf("ControllerWorkload(%q, %q, %q, %q) = %v, want %v", tc.kind, tc.name, tc.hash, tc.rolloutsHash, got, tc.want)
		}
	}
}

func TestControllerRevision(t *testing.T) {
	for _, tc := range []struct {
		kind, name, podTemplateHash, controllerRevisionHash, rolloutsHash string
		want                                                              *Revision
	}{
		{"ReplicaSet", "web-7d9f8c6b5", "7d9f8c6b5", "", "", &Revision{Controller: "ReplicaSet/web-7d9f8c6b5", Hash: "7d9f8c6b5", Label: LabelPodTemplateHash}},
		{"StatefulSet", "db", "", "db-6c8d5f7b9", "", &Revision{Controller: "StatefulSet/db", Hash: "db-6c8d5f7b9", Label: LabelControllerRevisionHash}},
		{"DaemonSet", "agent", "", "5b7c9d8f6", "", &Revision{Controller: "DaemonSet/agent", Hash: "5b7c9d8f6", Label: LabelControllerRevisionHash}},
		{"ReplicaSet", "web-5f9b48bf7c", "", "", "5f9b48bf7c", &Revision{Controller: "ReplicaSet/web-5f9b48bf7c", Hash: "5f9b48bf7c", Label: LabelRolloutsPodTemplateHash}},
		{"ReplicaSet", "web-7d9f8c6b5", "", "5b7c9d8f6", "", nil}, // a ReplicaSet's pod by its own label only
		{"StatefulSet", "db", "7d9f8c6b5", "", "", nil},           // and a StatefulSet's
		{"Job", "migrate-29400000", "", "", "", nil},
		{"Rollout", "web", "7d9f8c6b5", "", "", nil}, // a controller that is not one of these: no rule
	} {
		got := ControllerRevision(tc.kind, tc.name, tc.podTemplateHash, tc.controllerRevisionHash, tc.rolloutsHash)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("ControllerRevision(%q, %q, %q, %q, %q) = %+v, want %+v", tc.kind, tc.name, tc.podTemplateHash, tc.controllerRevisionHash, tc.rolloutsHash, got, tc.want)
		}
	}
}
