package timeline

import "testing"

func TestControllerWorkload(t *testing.T) {
	for _, tc := range []struct {
		kind, name, hash string
		want             Owner
	}{
		{"ReplicaSet", "web-7d9f8c6b5", "7d9f8c6b5", Owner{Kind: "Deployment", Name: "web"}},
		{"ReplicaSet", "web", "7d9f8c6b5", Owner{Kind: "ReplicaSet", Name: "web"}},                     // not the Deployment's naming
		{"ReplicaSet", "-7d9f8c6b5", "7d9f8c6b5", Owner{Kind: "ReplicaSet", Name: "-7d9f8c6b5"}},       // no name before the hash
		{"ReplicaSet", "web-7d9f8c6b5", "", Owner{Kind: "ReplicaSet", Name: "web-7d9f8c6b5"}},          // no label
		{"StatefulSet", "db-7d9f8c6b5", "7d9f8c6b5", Owner{Kind: "StatefulSet", Name: "db-7d9f8c6b5"}}, // only a ReplicaSet
		{"Job", "migrate-29400000", "", Owner{Kind: "Job", Name: "migrate-29400000"}},
	} {
		if got := ControllerWorkload(tc.kind, tc.name, tc.hash); got != tc.want {
			t.Errorf("ControllerWorkload(%q, %q, %q) = %v, want %v", tc.kind, tc.name, tc.hash, got, tc.want)
		}
	}
}
