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

// A private CRI-O beside the tests' containerd: its own root, run root,
// socket and runtime state, so that it touches neither containerd's nor
// Docker's containers, nor a CRI-O the machine may run (/var/lib/crio).
const (
	crioRoot  = "/var/lib/sigscope-crio"
	crioState = "/run/sigscope-crio"
	// CRIOSocket is where the tests' CRI-O serves CRI.
	CRIOSocket = crioState + "/crio.sock"
	crioPID    = crioState + "/crio.pid"

	// CRIOPauseImage is CRI-O's sandbox image: busybox with the local
	// cluster's static pause process as /pause, which exits on SIGTERM.
	// CRI-O stops a pause process with SIGTERM and a timeout, so EnsureCRI's
	// image (busybox sleep, which as a namespace init ignores SIGTERM)
	// would hold up every sandbox stop by CRI-O's 30 s.
	CRIOPauseImage = "docker.io/library/sigscope-crio-pause:latest"
)

// CRI-O's image store: vfs, which needs no kernel support beyond plain
// directories and copes with any filesystem under /var/lib.
var crioStore = fmt.Sprintf("[vfs@%s+%s]", filepath.Join(crioRoot, "storage"), filepath.Join(crioState, "storage"))

// EnsureCRIO returns a CRI-O serving CRI on CRIOSocket, starting one when
// none answers: crio and pinns built by test/crio/build.sh (from the Go
// module proxy, cached outside the tree in testutil.BuildCache("crio")/bin,
// which make cluster RUNTIME=crio shares), Debian's conmon and runc, the
// cgroupfs driver, and CRIOPauseImage copied into CRI-O's storage. Its CRI helpers (RunPod, StartPod, ImportImage, ...)
// are EnsureCRI's. Like containerd, it is left running for the next test
// binary; test/crio/down.sh stops it.
func EnsureCRIO(t testing.TB) *CRI {
	t.Helper()
	testutil.RequirePrivileged(t)
	d := dockertest.EnsureDaemon(t) // the images are built by Docker
	unlock, err := dockertest.Lock()
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	defer unlock()
	if crioVersion() != nil {
		bin := buildCRIO(t)
		start := time.Now()
		if err := startCRIO(bin); err != nil {
			t.Fatalf("critest: %v", err)
		}
		t.Logf("critest: CRI-O answered after %v", time.Since(start).Round(time.Millisecond))
	}
	if !crioHasImage(t, CRIOPauseImage) {
		dir := t.TempDir()
		data, err := os.ReadFile(filepath.Join(buildCRIO(t), "pause"))
		if err != nil {
			t.Fatalf("critest: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pause"), data, 0o755); err != nil {
			t.Fatal(err)
		}
		dockertest.BuildBusyboxImageWith(t, "sigscope-crio-pause:latest", dir, "COPY pause /pause\nCMD [\"/pause\"]")
		loadCRIO(t, d, "sigscope-crio-pause:latest")
	}
	conn, err := grpc.NewClient("unix://"+CRIOSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &CRI{Socket: CRIOSocket, conn: conn, RT: runtimeapi.NewRuntimeServiceClient(conn),
		load: func(t testing.TB, tag string) { loadCRIO(t, dockertest.EnsureDaemon(t), tag) }}
}

// crioVersion asks CRIOSocket who it is; an error when nothing answers or
// what answers is no CRI-O.
func crioVersion() error {
	if _, err := os.Stat(CRIOSocket); err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+CRIOSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return err
	}
	if v.GetRuntimeName() != "cri-o" {
		return fmt.Errorf("%s is %q, not cri-o", CRIOSocket, v.GetRuntimeName())
	}
	return nil
}

// buildCRIO runs test/crio/build.sh (a few checks when its binaries are
// cached, minutes when not) and returns the directory of crio, pinns and
// pause: the one it prints, which must be testutil.BuildCache("crio")/bin.
func buildCRIO(t testing.TB) string {
	t.Helper()
	root, err := dockertest.RepoRoot()
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "test", "crio", "build.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("critest: test/crio/build.sh: %v\n%s", err, stderr.String())
	}
	if s := stderr.String(); s != "" {
		t.Logf("critest: test/crio/build.sh (%v):\n%s", time.Since(start).Round(time.Second), s)
	}
	bin := strings.TrimSpace(string(out))
	cache, err := testutil.BuildCache("crio")
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	// The script resolves the cache through symbolic links; so does this.
	want, err := filepath.EvalSymlinks(filepath.Join(cache, "bin"))
	if err != nil || want != bin {
		t.Fatalf("critest: test/crio/build.sh built into %q, not %s (%v)", bin, filepath.Join(cache, "bin"), err)
	}
	return bin
}

// runcClamp is the OCI runtime CRI-O is given: Debian's runc, after
// raising a negative oomScoreAdj in the bundle's config to 0 (the score
// CRI-O and conmon run at here). CRI-O asks -998 for
// every pause process, and root here lacks CAP_SYS_RESOURCE, so runc's
// nsexec could not lower its own oom_score_adj and every sandbox with a
// pause process would fail to start. containerd has an option for this
// (restrict_oom_score_adj, set by EnsureCRI); CRI-O has none. Nothing else
// of the spec changes: cgroups, namespaces and signals are runc's own.
const runcClamp = `#!/bin/sh
prev=
for a in "$@"; do
	if [ "$prev" = --bundle ] || [ "$prev" = -b ]; then
		sed -i -E 's/("oomScoreAdj":[[:space:]]*)-[0-9]+/\10/' "$a/config.json"
	fi
	prev=$a
done
exec %s "$@"
`

func startCRIO(bin string) error {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return fmt.Errorf("CRI-O needs runc (Debian's runc package): %w", err)
	}
	conmon, err := exec.LookPath("conmon")
	if err != nil {
		return fmt.Errorf("CRI-O needs conmon (Debian's conmon package): %w", err)
	}
	for _, dir := range []string{crioRoot, crioState, filepath.Join(crioRoot, "conf.d"), filepath.Join(crioRoot, "cni")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	clamp := filepath.Join(crioRoot, "runc")
	if err := os.WriteFile(clamp, []byte(fmt.Sprintf(runcClamp, runc)), 0o755); err != nil {
		return err
	}
	policy := filepath.Join(crioRoot, "policy.json")
	// Images come from Docker, unsigned, through skopeo: accept them.
	if err := os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`+"\n"), 0o600); err != nil {
		return err
	}
	config := filepath.Join(crioRoot, "crio.conf")
	if err := os.WriteFile(config, []byte(crioConfig(bin, clamp, conmon, policy)), 0o600); err != nil {
		return err
	}
	// --config-dir: an empty one, not /etc/crio/crio.conf.d.
	return dockertest.StartDaemonWait("crio", CRIOSocket, crioPID, 60*time.Second, crioVersion,
		filepath.Join(bin, "crio"), "--config", config, "--config-dir", filepath.Join(crioRoot, "conf.d"))
}

// crioConfig is the whole configuration: every path CRI-O would otherwise
// take under /var/lib/crio, /var/run/crio or /etc is the harness's own.
// cgroupfs, as Docker and the tests' containerd here; conmon in the pod's
// cgroup (crio-conmon-<id>) as CRI-O's default; drop_infra_ctr left at its
// default (true): a pod without a shared pid namespace runs no pause
// process. No CNI configuration: pods use the host network. NRI and the
// metrics server are off (NRI's socket would be shared with any other
// runtime's).
func crioConfig(bin, runc, conmon, policy string) string {
	return fmt.Sprintf(`[crio]
root = %q
runroot = %q
storage_driver = "vfs"
log_dir = %q
version_file = %q
version_file_persist = %q
clean_shutdown_file = %q

[crio.api]
listen = %q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
container_exits_dir = %q
container_attach_socket_dir = %q
namespaces_dir = %q
pinns_path = %q
hooks_dir = []
irqbalance_config_restore_file = "disable"

[crio.runtime.runtimes.runc]
runtime_path = %q
runtime_type = "oci"
runtime_root = %q
monitor_path = %q
monitor_cgroup = "pod"

[crio.image]
pause_image = %q
pause_command = ""
signature_policy = %q

[crio.network]
network_dir = %q
plugin_dirs = ["/usr/lib/cni"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`,
		filepath.Join(crioRoot, "storage"), filepath.Join(crioState, "storage"), filepath.Join(crioRoot, "pods"),
		filepath.Join(crioState, "version"), filepath.Join(crioRoot, "version"), filepath.Join(crioRoot, "clean.shutdown"),
		CRIOSocket,
		filepath.Join(crioState, "exits"), filepath.Join(crioState, "attach"), filepath.Join(crioState, "ns"),
		filepath.Join(bin, "pinns"),
		runc, filepath.Join(crioState, "runc"), conmon,
		CRIOPauseImage, policy, filepath.Join(crioRoot, "cni"))
}

// crioHasImage asks CRI-O's image service whether ref is in its storage.
func crioHasImage(t testing.TB, ref string) bool {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+CRIOSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := runtimeapi.NewImageServiceClient(conn).ImageStatus(ctx,
		&runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("CRI-O ImageStatus %s: %v", ref, err)
	}
	return resp.GetImage() != nil
}

// loadCRIO copies Docker's image tag into CRI-O's storage as
// docker.io/library/<tag>: `docker save`, then skopeo from that archive
// to containers-storage (CRI-O cannot import, and no registry is reachable
// to pull from). containers/storage's locks let skopeo write while CRI-O
// runs, and CRI-O sees the image at its next look.
func loadCRIO(t testing.TB, d *dockertest.Daemon, tag string) {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		dockertest.AptInstall(t, "skopeo")
	}
	tar := filepath.Join(t.TempDir(), "image.tar")
	d.Docker(t, "save", "--output", tar, tag)
	dst := "containers-storage:" + crioStore + "docker.io/library/" + tag
	policy := filepath.Join(crioRoot, "policy.json")
	out, err := exec.Command("skopeo", "--policy", policy, "copy", "--quiet", "docker-archive:"+tar, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("critest: skopeo copy to %s: %v\n%s", dst, err, out)
	}
}

// SandboxPIDIfAny is SandboxPID, or 0 for a sandbox that runs no process:
// CRI-O's sandbox of a pod that shares no pid namespace (drop_infra_ctr)
// is only namespaces, and its verbose status has no pid.
func (c *CRI) SandboxPIDIfAny(t testing.TB, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.RT.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	var v struct {
		PID *int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &v); err != nil {
		t.Fatalf("verbose PodSandboxStatus: %v: %.300s", err, resp.GetInfo()["info"])
	}
	if v.PID == nil {
		return 0
	}
	return verbosePID(t, resp.GetInfo())
}
