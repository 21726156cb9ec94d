package container

import "testing"

const (
	id1 = "e234594215242c484e48457ceb63e7a6a8517e3c65fbc2d2f426cc94a3e7e598"
	id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	uid = "0f9b4b6e-6b1c-4a2a-9d0a-3c2f1e8d7a65"
)

func TestParseCgroupFile(t *testing.T) {
	for _, c := range []struct {
		name, content, id, runtime string
	}{
		// Docker, cgroupfs driver, cgroup v1 with runc's hybrid v2 line
		// (as read on this project's hosts).
		{"docker cgroupfs hybrid", "" +
			"9:name=systemd:/docker/" + id1 + "\n" +
			"8:pids:/docker/" + id1 + "\n" +
			"4:memory:/docker/" + id1 + "\n" +
			"1:cpu:/docker/" + id1 + "\n" +
			"0::/docker/" + id1 + "\n", id1, RuntimeDocker},
		{"docker cgroupfs v1 only, v2 line at root", "" +
			"12:memory:/docker/" + id1 + "\n" +
			"11:cpu,cpuacct:/docker/" + id1 + "\n" +
			"1:name=systemd:/docker/" + id1 + "\n" +
			"0::/\n", id1, RuntimeDocker},
		{"docker cgroupfs v2", "0::/docker/" + id1 + "\n", id1, RuntimeDocker},
		{"docker systemd v2", "0::/system.slice/docker-" + id1 + ".scope\n", id1, RuntimeDocker},
		{"docker systemd v1", "" +
			"11:memory:/system.slice/docker-" + id1 + ".scope\n" +
			"1:name=systemd:/system.slice/docker-" + id1 + ".scope\n" +
			"0::/system.slice/docker-" + id1 + ".scope\n", id1, RuntimeDocker},
		{"docker systemd, container runs systemd", "0::/system.slice/docker-" + id1 + ".scope/init.scope\n", id1, RuntimeDocker},
		{"docker in docker: the inner container", "0::/docker/" + id1 + "/docker/" + id2 + "\n", id2, RuntimeDocker},

		{"containerd systemd v2 (kubelet)",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/cri-containerd-" + id1 + ".scope\n",
			id1, RuntimeContainerd},
		{"containerd systemd v2 guaranteed QoS",
			"0::/kubepods.slice/kubepods-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/cri-containerd-" + id1 + ".scope\n",
			id1, RuntimeContainerd},
		{"containerd systemd v1", "" +
			"10:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/cri-containerd-" + id1 + ".scope\n" +
			"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/cri-containerd-" + id1 + ".scope\n" +
			"0::/\n", id1, RuntimeContainerd},
		{"kubelet cgroupfs v1", "" +
			"11:memory:/kubepods/burstable/pod" + uid + "/" + id1 + "\n" +
			"4:cpu,cpuacct:/kubepods/burstable/pod" + uid + "/" + id1 + "\n", id1, RuntimeContainerd},
		{"kubelet cgroupfs v2 guaranteed", "0::/kubepods/pod" + uid + "/" + id1 + "\n", id1, RuntimeContainerd},
		{"kind / nested node", "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + "0f9b4b6e_6b1c" + ".slice/cri-containerd-" + id1 + ".scope\n", id1, RuntimeContainerd},

		{"cri-o systemd v2",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/crio-" + id1 + ".scope\n",
			id1, RuntimeCRIO},
		{"cri-o systemd v2, container subgroup",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c_4a2a_9d0a_3c2f1e8d7a65.slice/crio-" + id1 + ".scope/container\n",
			id1, RuntimeCRIO},
		{"cri-o cgroupfs v1", "9:memory:/kubepods/besteffort/pod" + uid + "/crio-" + id1 + "\n", id1, RuntimeCRIO},

		{"podman systemd v2", "0::/machine.slice/libpod-" + id1 + ".scope\n", id1, RuntimePodman},
		{"podman systemd v2 with container subgroup", "0::/machine.slice/libpod-" + id1 + ".scope/container\n", id1, RuntimePodman},
		{"podman rootless", "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id1 + ".scope\n", id1, RuntimePodman},
		{"podman cgroupfs v1", "" +
			"7:memory:/libpod_parent/libpod-" + id1 + "\n" +
			"1:name=systemd:/libpod_parent/libpod-" + id1 + "\n", id1, RuntimePodman},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, runtime, ok := ParseCgroupFile(c.content)
			if !ok || id != c.id || runtime != c.runtime {
				t.Fatalf("ParseCgroupFile = %q, %q, %v; want %q, %q, true", id, runtime, ok, c.id, c.runtime)
			}
		})
	}
}

func TestParseCgroupFileNotContainers(t *testing.T) {
	for _, c := range []struct{ name, content string }{
		{"root v2", "0::/\n"},
		{"init.scope", "0::/init.scope\n"},
		{"user session", "0::/user.slice/user-1000.slice/session-3.scope\n"},
		{"system service", "0::/system.slice/containerd.service\n"},
		{"dockerd itself", "0::/system.slice/docker.service\n"},
		{"hybrid host process", "" +
			"9:name=systemd:/\n4:memory:/process_api/5427f7a2f76fe4204b1067e72be6d633\n0::/\n"},
		{"CRI-O conmon", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice/crio-conmon-" + id1 + ".scope\n"},
		{"podman conmon", "0::/machine.slice/libpod-conmon-" + id1 + ".scope\n"},
		{"pod cgroup, no container", "0::/kubepods/burstable/pod" + uid + "\n"},
		{"short id under docker", "0::/docker/e234594215\n"},
		{"upper-case hex is not an ID", "0::/docker/E234594215242C484E48457CEB63E7A6A8517E3C65FBC2D2F426CC94A3E7E598\n"},
		{"bare hex outside any runtime's tree", "0::/custom/" + id1 + "\n"},
		{"docker scope with a short id", "0::/system.slice/docker-abc.scope\n"},
		{"empty", ""},
		{"garbage", "not a cgroup file\n:::\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if id, runtime, ok := ParseCgroupFile(c.content); ok {
				t.Fatalf("ParseCgroupFile = %q, %q, true; want not a container", id, runtime)
			}
		})
	}
}

// The v2 line wins over v1 lines, and the memory line over other v1 lines,
// when they disagree (a process moved in one hierarchy only).
func TestParseCgroupFilePreference(t *testing.T) {
	content := "9:name=systemd:/docker/" + id2 + "\n4:memory:/docker/" + id1 + "\n0::/\n"
	if id, _, _ := ParseCgroupFile(content); id != id1 {
		t.Fatalf("got %s, want the memory line's %s", id, id1)
	}
	content = "4:memory:/docker/" + id1 + "\n0::/system.slice/docker-" + id2 + ".scope\n"
	if id, _, _ := ParseCgroupFile(content); id != id2 {
		t.Fatalf("got %s, want the v2 line's %s", id, id2)
	}
}
