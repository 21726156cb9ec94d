package critest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// A private containerd with its CRI plugin on, apart from the one dockerd
// runs (which has CRI off and lives under /run/docker): its own root,
// state and socket, so it never touches Docker's containers.
const (
	criRoot   = "/var/lib/sigscope-containerd"
	criState  = "/run/sigscope-containerd"
	CRISocket = criState + "/containerd.sock"

	// PauseImage is the sandbox ("pause") image the private containerd is
	// configured with: a busybox image that sleeps, imported from Docker
	// because registry.k8s.io is not reachable.
	PauseImage = "docker.io/library/sigscope-pause:latest"
)

// CRI is a runtime serving the CRI API (EnsureCRI's containerd,
// EnsureCRIO's CRI-O), for tests that play kubelet.
type CRI struct {
	Socket string
	conn   *grpc.ClientConn
	RT     runtimeapi.RuntimeServiceClient
	// load copies a Docker image into the runtime's store; nil: containerd's
	// import.
	load func(t testing.TB, tag string)
}

// EnsureCRI returns a containerd serving CRI on CRISocket, starting one
// (with docker.io's containerd) when none answers, and imports the pause
// image into it. Like the Docker daemon, it is left running.
func EnsureCRI(t testing.TB) *CRI {
	t.Helper()
	testutil.RequirePrivileged(t)
	d := dockertest.EnsureDaemon(t) // for containerd, runc, and the images
	unlock, err := dockertest.Lock()
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	defer unlock()
	if ctr("version") != nil {
		if _, err := exec.LookPath("containerd"); err != nil {
			dockertest.AptInstall(t, "containerd")
		}
		start := time.Now()
		if err := startContainerd(); err != nil {
			t.Fatalf("critest: %v", err)
		}
		t.Logf("critest: containerd (CRI) answered after %v", time.Since(start).Round(time.Millisecond))
	}
	if !hasImage(PauseImage) {
		dockertest.BuildBusyboxImage(t, "sigscope-pause:latest", `CMD ["sleep", "2147483647"]`)
		importImage(t, d, "sigscope-pause:latest")
	}
	conn, err := grpc.NewClient("unix://"+CRISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &CRI{Socket: CRISocket, conn: conn, RT: runtimeapi.NewRuntimeServiceClient(conn)}
}

func ctr(args ...string) error {
	out, err := exec.Command("ctr", append([]string{"--address", CRISocket}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %v: %v: %s", args, err, out)
	}
	return nil
}

func hasImage(ref string) bool {
	out, err := exec.Command("ctr", "--address", CRISocket, "-n", "k8s.io", "images", "list", "-q").Output()
	return err == nil && strings.Contains(string(out), ref)
}

// importImage copies a Docker image into containerd's Kubernetes namespace.
func importImage(t testing.TB, d *dockertest.Daemon, tag string) {
	t.Helper()
	tar := filepath.Join(t.TempDir(), "image.tar")
	d.Docker(t, "save", "--output", tar, tag)
	if err := ctr("-n", "k8s.io", "images", "import", tar); err != nil {
		t.Fatalf("critest: %v", err)
	}
}

// ImportImage builds tag as BuildBusyboxImage does and makes it available
// to CRI containers as docker.io/library/<tag>, the name it is returned as.
func (c *CRI) ImportImage(t testing.TB, tag, extraDockerfileLines string) string {
	t.Helper()
	dockertest.BuildBusyboxImage(t, tag, extraDockerfileLines)
	if c.load != nil {
		c.load(t, tag)
	} else {
		importImage(t, dockertest.EnsureDaemon(t), tag)
	}
	return "docker.io/library/" + tag
}

func startContainerd() error {
	if err := os.MkdirAll(criRoot, 0o700); err != nil {
		return err
	}
	config := filepath.Join(criRoot, "config.toml")
	// cgroupfs driver, as docker here; no CNI: pods use the host network.
	// restrict_oom_score_adj: the kubelet asks -998 for sandboxes, and
	// root on these VMs may not lower oom_score_adj (runc init then dies
	// with "can't get final child's PID from pipe").
	toml := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
`, criRoot, criState, CRISocket, PauseImage)
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		return err
	}
	return dockertest.StartDaemonWait("containerd", CRISocket, "", testutil.Bound, func() error { return ctr("version") },
		"containerd", "--config", config)
}

// Pod is what the kubelet would say about a pod and one container.
type Pod struct {
	Name, Namespace, UID string
	Container            string
	Image                string   // as returned by ImportImage
	Command              []string // the container's command line
	GracePeriod          int      // seconds; the kubelet's annotation
	// OwnPIDNamespace gives the container a pid namespace of its own, as
	// the kubelet does for a pod without shareProcessNamespace; unset, the
	// pod's containers share the sandbox's (CRI's default mode, POD).
	OwnPIDNamespace bool
}

// RunPod creates a pod sandbox and starts one container in it as the
// kubelet would: the io.kubernetes.* labels and annotations, a cgroup
// parent in the kubelet's cgroupfs layout (/kubepods/besteffort/pod<uid>),
// host network (no CNI here). It returns the container's ID; the pod is
// removed at cleanup.
func (c *CRI) RunPod(t testing.TB, p Pod) string {
	t.Helper()
	return c.StartPod(t, p).Container
}

// PodIDs are the CRI ids of what StartPod made.
type PodIDs struct {
	Sandbox   string // the pod sandbox (its pause container)
	Container string
}

// StartPod is RunPod, returning the sandbox's id too.
func (c *CRI) StartPod(t testing.TB, p Pod) PodIDs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	podLabels := map[string]string{
		"io.kubernetes.pod.name":      p.Name,
		"io.kubernetes.pod.namespace": p.Namespace,
		"io.kubernetes.pod.uid":       p.UID,
	}
	pidMode := runtimeapi.NamespaceMode_POD
	if p.OwnPIDNamespace {
		pidMode = runtimeapi.NamespaceMode_CONTAINER
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		Labels:   podLabels,
		Annotations: map[string]string{
			"kubernetes.io/config.source": "sigscope-test",
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/besteffort/pod" + p.UID,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: pidMode},
			},
		},
	}
	sb, err := c.RT.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	podID := sb.GetPodSandboxId()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.RT.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID})
		_, _ = c.RT.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID})
	})
	labels := map[string]string{"io.kubernetes.container.name": p.Container}
	for k, v := range podLabels {
		labels[k] = v
	}
	created, err := c.RT.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: podID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: p.Container},
			// The name the pod spec gives, as the kubelet passes it too:
			// CRI-O refuses a container without it.
			Image:   &runtimeapi.ImageSpec{Image: p.Image, UserSpecifiedImage: p.Image},
			Command: p.Command,
			Labels:  labels,
			Annotations: map[string]string{
				"io.kubernetes.container.restartCount":     "0",
				"io.kubernetes.pod.terminationGracePeriod": fmt.Sprint(p.GracePeriod),
			},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: pidMode},
			}},
		},
		SandboxConfig: sbConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	id := created.GetContainerId()
	// Killed at once, as containerd's StopPodSandbox would: CRI-O's would
	// wait its 30 s for a container that ignores SIGTERM.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
	})
	if _, err := c.RT.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return PodIDs{Sandbox: podID, Container: id}
}

// SandboxPID is the host pid of a pod sandbox's pause process, from the
// verbose PodSandboxStatus as containerd writes it ({"pid": N, ...}).
func (c *CRI) SandboxPID(t testing.TB, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound)
	defer cancel()
	resp, err := c.RT.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	return verbosePID(t, resp.GetInfo())
}

// ContainerPID is the host pid of a container's main process, from the
// verbose ContainerStatus.
func (c *CRI) ContainerPID(t testing.TB, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound)
	defer cancel()
	resp, err := c.RT.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return verbosePID(t, resp.GetInfo())
}

func verbosePID(t testing.TB, info map[string]string) int {
	t.Helper()
	var v struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(info["info"]), &v); err != nil || v.PID <= 0 {
		t.Fatalf("no pid in the verbose info (%v): %.300s", err, info["info"])
	}
	return v.PID
}
