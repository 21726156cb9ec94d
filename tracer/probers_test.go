package tracer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The probers are found by their command names, not by other processes'
// arguments or a name that only contains one.
func TestFindProbers(t *testing.T) {
	root := t.TempDir()
	for pid, comm := range map[string]string{"1": "systemd", "812": "kubelet", "900": "k3s-agent", "901": "kubelet-helper", "17": "kubelite", "self": "kubelet"} {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "55"), 0o755); err != nil { // gone: no comm
		t.Fatal(err)
	}
	got, err := FindProbers(root)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []uint32{17, 812, 900}) {
		t.Errorf("FindProbers = %v, %v; want [17 812 900]", got, err)
	}
	if _, err := FindProbers(filepath.Join(root, "none")); err == nil {
		t.Error("no /proc: no error")
	}
}
