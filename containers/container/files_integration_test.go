package container

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/critest"
	"github.com/sigscope/sigscope/test/testutil"
)

// The runtimes' own files, as the real runtimes write them: what they say
// of a running container is what their APIs say, and nothing of its
// environment is kept.

// filesAgree checks what the files said (got) against the API's answer.
func filesAgree(t *testing.T, got, api *identity.Info) {
	t.Helper()
	if !got.FromFiles || got.ID != api.ID || got.Name != api.Name || got.Image != api.Image || got.Runtime != api.Runtime ||
		got.Pod != api.Pod || got.Namespace != api.Namespace || got.PodUID != api.PodUID || got.MainPID != api.MainPID || got.Sandbox != api.Sandbox {
		t.Errorf("the files say\n %+v\nthe API\n %+v", *got, *api)
	}
	if strings.Contains(fmt.Sprintf("%#v", got), fileSecret) {
		t.Errorf("the Info read from the files keeps the container's environment: %#v", got)
	}
}

// On each daemon (forDaemon): the cgroup2-only one runs in a mount
// namespace of its own, with its own data root, and its records are read
// through its root.
func TestRealDockerFiles(t *testing.T) {
	forDaemon(t, func(t *testing.T, d testDaemon) {
		img := d.image(t)
		name := fmt.Sprintf("sigscope-files-%d", os.Getpid())
		id := d.RunContainer(t, "--name", name, "--stop-timeout", "7", "--stop-signal", "SIGQUIT",
			"-e", "DB_PASSWORD="+fileSecret, "--label", "token="+fileSecret, img, "sleep", "1000")
		ans, err := newDockerClient(d.Socket).describe(context.Background(), runtimeRef{id: id})
		if err != nil {
			t.Fatal(err)
		}
		files := newRuntimeFiles("/proc", time.Now)
		got, err := files.read(id, RuntimeDocker)
		if err != nil {
			t.Fatalf("the files of %s: %v", name, err)
		}
		filesAgree(t, got, ans.info)
		if got.StopTimeout != 7 || got.StopSignal != ans.info.StopSignal || got.Labels != nil {
			t.Errorf("stop settings %d %v, labels %v: want 7, %v, none", got.StopTimeout, got.StopSignal, got.Labels, ans.info.StopSignal)
		}
		// Renamed: the files follow (Docker rewrites its record).
		if out, err := d.DockerErr("rename", name, name+"-renamed"); err != nil {
			t.Fatalf("docker rename: %v\n%s", err, out)
		}
		if got, err = files.read(id, RuntimeDocker); err != nil || got.Name != name+"-renamed" {
			t.Errorf("after docker rename: %+v, %v", got, err)
		}
	})
}

func TestRealCRIFiles(t *testing.T) { forEachCRI(t, testRealCRIFiles) }

func testRealCRIFiles(t *testing.T, rt criRuntime, c *critest.CRI) {
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	uid := fmt.Sprintf("%s-0000-4000-8000-%012d", rt.uid, os.Getpid()+1)
	ids := c.StartPod(t, critest.Pod{
		Name: "files-0", Namespace: "prod", UID: uid, Container: "app",
		Image: img, Command: []string{"sh", "-c", "sleep 1000"}, GracePeriod: 45, OwnPIDNamespace: true,
	})
	cri := newCRIClient(c.Socket)
	defer cri.close()
	files := newRuntimeFiles("/proc", time.Now)
	for _, id := range []string{ids.Container, ids.Sandbox} {
		var ans *runtimeAnswer
		// The container's main pid comes once it started. CRI-O runs no
		// pause process for a pod whose containers have pid namespaces of
		// their own: its sandbox has no pid.
		if !testutil.Poll(20*time.Millisecond, func() bool {
			var err error
			ans, err = cri.describe(context.Background(), runtimeRef{id: id})
			return err == nil && (ans.info.MainPID != 0 || id == ids.Sandbox && rt.name == RuntimeCRIO)
		}) {
			t.Fatalf("the API gives no main pid for %s: %+v", id, ans)
		}
		got, err := files.read(id, rt.name)
		if err != nil {
			t.Fatalf("the files of %s: %v", identity.ShortID(id), err)
		}
		t.Logf("%s files: %+v", rt.name, *got)
		filesAgree(t, got, ans.info)
		if rt.name == RuntimeCRIO && !got.Sandbox && got.GracePeriod != 45 {
			t.Errorf("CRI-O's files carry the kubelet's annotations: grace %d, want 45", got.GracePeriod)
		}
	}
}
