package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A secret in a container's environment, which the files hold and
// sigscope must neither keep nor quote.
const fileSecret = "hunter2-secret-value"

var (
	id3 = strings.Repeat("3", 64)
	id4 = strings.Repeat("4", 64)
)

// fakeDaemon makes a runtime daemon in h's /proc: its comm, its command
// line, its pid namespace link (the agent's, "pid:[1]", unless otherNS),
// and files under its root (as the daemon sees them, by absolute path).
func (h *fakeHost) fakeDaemon(pid int, comm string, args []string, otherNS bool, files map[string]string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, strconv.Itoa(pid))
	self := filepath.Join(h.proc, "self", "ns")
	for _, d := range []string{filepath.Join(dir, "ns"), filepath.Join(dir, "root"), self} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			h.t.Fatal(err)
		}
	}
	if _, err := os.Lstat(filepath.Join(self, "pid")); err != nil {
		if err := os.Symlink("pid:[1]", filepath.Join(self, "pid")); err != nil {
			h.t.Fatal(err)
		}
	}
	ns := "pid:[1]"
	if otherNS {
		ns = "pid:[2]"
	}
	must(h.t, os.Symlink(ns, filepath.Join(dir, "ns", "pid")))
	must(h.t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	must(h.t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(append([]string{comm}, args...), "\x00")+"\x00"), 0o644))
	for p, content := range files {
		h.daemonFile(pid, p, content)
	}
}

// daemonFile writes file p (absolute, as daemon pid sees it).
func (h *fakeHost) daemonFile(pid int, p, content string) {
	h.t.Helper()
	full := filepath.Join(h.proc, strconv.Itoa(pid), "root", p)
	must(h.t, os.MkdirAll(filepath.Dir(full), 0o755))
	must(h.t, os.WriteFile(full, []byte(content), 0o644))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func jsonText(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerRecord is a config.v2.json as Docker 20.10 writes it (the fields
// around the ones read included).
func dockerRecord(t testing.TB, id, name string, running bool, pid int) string {
	return jsonText(t, map[string]any{
		"StreamConfig": map[string]any{},
		"State":        map[string]any{"Running": running, "Paused": false, "Pid": pid, "ExitCode": 0, "StartedAt": "2026-11-28T23:40:02.180017698Z"},
		"ID":           id,
		"Created":      "2026-11-28T23:40:01Z",
		"Path":         "sh",
		"Args":         []string{"-c", "sleep 1000"},
		"Config": map[string]any{
			"Hostname":    id[:12],
			"Env":         []string{"PATH=/bin", "DB_PASSWORD=" + fileSecret},
			"Image":       "shop/web:1.2",
			"Labels":      map[string]string{"team": "shop", LabelPodName: "", "token": fileSecret},
			"StopSignal":  "SIGQUIT",
			"StopTimeout": 7,
		},
		"Image":  "sha256:d8c19a63b2293fe6d6fed357dea0c864a32a9fc19ead72bb575681e4522db630",
		"Name":   "/" + name,
		"Driver": "overlay2",
	})
}

func TestRuntimeFilesDocker(t *testing.T) {
	h := newFakeHost(t)
	// Two daemons: the host's, with the default data root, and one whose
	// data root its --config-file names (the tests' cgroup2 daemon has
	// it on its command line; this covers daemon.json).
	h.fakeDaemon(300, "dockerd", []string{"-H", "unix:///var/run/docker.sock"}, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "web", true, 4321),
	})
	h.fakeDaemon(301, "dockerd", []string{"--config-file=/etc/d2.json"}, false, map[string]string{
		"/etc/d2.json": `{"data-root": "/srv/d2"}`,
		"/srv/d2/containers/" + id2 + "/config.v2.json": dockerRecord(t, id2, "api", false, 0),
	})
	f := newRuntimeFiles(h.proc, h.clock.now)
	info, err := f.read(id1, RuntimeDocker)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Info{Identity: identity.Identity{ID: id1, Runtime: RuntimeDocker, Name: "web", Image: "shop/web:1.2"},
		StopSignal: sigvocab.SIGQUIT, StopTimeout: 7, MainPID: 4321, FromFiles: true}
	if fmt.Sprintf("%+v", *info) != fmt.Sprintf("%+v", want) {
		t.Errorf("docker files:\n %+v\nwant\n %+v", *info, want)
	}
	if strings.Contains(fmt.Sprintf("%#v", info), fileSecret) {
		t.Errorf("the Info keeps what the file's environment or labels held: %#v", info)
	}
	// Stopped: no main pid, though the record names the last one.
	info, err = f.read(id2, RuntimeDocker)
	if err != nil || info.Name != "api" || info.MainPID != 0 {
		t.Errorf("the other daemon's container: %+v, %v", info, err)
	}
	// Not there, or not a container ID: no file, no error.
	for _, id := range []string{strings.Repeat("c", 64), "../../../etc", ""} {
		if _, err := f.read(id, RuntimeDocker); !errors.Is(err, errNoFiles) {
			t.Errorf("read(%q): %v, want errNoFiles", id, err)
		}
	}
	// A record that is not the container's (an ID that differs) names
	// nothing; one that is no JSON is an error that quotes nothing of it.
	h.daemonFile(300, "/var/lib/docker/containers/"+id3+"/config.v2.json", dockerRecord(t, id2, "other", true, 1))
	if _, err := f.read(id3, RuntimeDocker); !errors.Is(err, errNoFiles) {
		t.Errorf("a record of another ID: %v", err)
	}
	h.daemonFile(300, "/var/lib/docker/containers/"+id4+"/config.v2.json", `{"Config": {"Env": "X=`+fileSecret+`"}, "ID": 5}`)
	if _, err := f.read(id4, RuntimeDocker); err == nil || errors.Is(err, errNoFiles) || strings.Contains(err.Error(), fileSecret) {
		t.Errorf("a record of another shape: %v, want an error that names the file only", err)
	}
	// Half-written (CRI-O writes a spec in place): not there yet.
	h.daemonFile(300, "/var/lib/docker/containers/"+id4+"/config.v2.json", `{"Config": {"Env": ["X=`+fileSecret+`"`)
	if _, err := f.read(id4, RuntimeDocker); !errors.Is(err, errNoFiles) {
		t.Errorf("a half-written record: %v, want errNoFiles", err)
	}
}

func TestRuntimeFilesContainerd(t *testing.T) {
	h := newFakeHost(t)
	spec := func(a map[string]string) string {
		return jsonText(t, map[string]any{"ociVersion": "1.2.1",
			"process":     map[string]any{"args": []string{"sh"}, "env": []string{"TOKEN=" + fileSecret}},
			"annotations": a})
	}
	const state = "/run/k8s-containerd"
	task := state + "/io.containerd.runtime.v2.task/k8s.io/"
	h.fakeDaemon(400, "containerd", []string{"--config", "/etc/containerd/k8s.toml"}, false, map[string]string{
		"/etc/containerd/k8s.toml": "version = 3\nroot = \"/var/lib/k\"\nstate = \"" + state + "\"\n[grpc]\naddress = \"/run/k.sock\"\n",
		task + id1 + "/config.json": spec(map[string]string{
			criAnnotationType: "container", criAnnotationName: "app", criAnnotationImage: "shop/app:3",
			criAnnotationPod: "app-0", criAnnotationPodNamespace: "prod", criAnnotationPodUID: uid,
			"io.kubernetes.cri.sandbox-id": id2}),
		task + id1 + "/init.pid": "777\n",
		task + id2 + "/config.json": spec(map[string]string{
			criAnnotationType: "sandbox", criAnnotationPod: "app-0", criAnnotationPodNamespace: "prod", criAnnotationPodUID: uid}),
	})
	// Docker's own containerd (its state under /var/run/docker): no CRI
	// containers there.
	h.fakeDaemon(401, "containerd", []string{"--config", "/var/run/docker/containerd/containerd.toml"}, false, map[string]string{
		"/var/run/docker/containerd/containerd.toml": "state = \"/var/run/docker/containerd/daemon\"\n",
	})
	f := newRuntimeFiles(h.proc, h.clock.now)
	info, err := f.read(id1, RuntimeContainerd)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Info{Identity: identity.Identity{ID: id1, Runtime: RuntimeContainerd, Name: "app", Image: "shop/app:3", Pod: "app-0", Namespace: "prod", PodUID: uid},
		MainPID: 777, FromFiles: true}
	if fmt.Sprintf("%+v", *info) != fmt.Sprintf("%+v", want) {
		t.Errorf("containerd files:\n %+v\nwant\n %+v", *info, want)
	}
	if lacks := info.Lacks(); len(lacks) != 0 {
		t.Errorf("Lacks %v", lacks)
	}
	sb, err := f.read(id2, RuntimeContainerd)
	if err != nil || !sb.Sandbox || sb.Name != SandboxName || sb.Pod != "app-0" || sb.MainPID != 0 {
		t.Errorf("the sandbox: %+v, %v", sb, err)
	}
	if strings.Contains(fmt.Sprintf("%#v %#v", info, sb), fileSecret) {
		t.Error("the Info keeps the spec's environment")
	}
}

func TestRuntimeFilesCRIO(t *testing.T) {
	h := newFakeHost(t)
	labels := jsonText(t, map[string]string{LabelPodName: "web-1", LabelPodNamespace: "shop", LabelPodUID: uid, LabelContainerName: "web", "app": fileSecret})
	annotations := jsonText(t, map[string]string{AnnotationGracePeriod: "45", AnnotationPreStop: `{"sleep":{"seconds":5}}`,
		"kubectl.kubernetes.io/last-applied-configuration": `{"env":"` + fileSecret + `"}`})
	spec := jsonText(t, map[string]any{"process": map[string]any{"env": []string{"K=" + fileSecret}}, "annotations": map[string]string{
		crioAnnotationType: "container", crioAnnotationLabels: labels, crioAnnotationAnnotations: annotations,
		crioAnnotationImageName: "quay.io/shop/web:9", crioAnnotationImage: "sha256:abc", ociStopSignalAnnotation: "SIGINT",
		"io.kubernetes.cri-o.ContainerName": "k8s_web_web-1_shop_" + uid + "_0"}})
	// The run root from a drop-in of --config-dir, which overrides the
	// file; the root from storage.conf.
	h.fakeDaemon(500, "crio", []string{"--config=/etc/c.conf", "--config-dir", "/etc/c.d"}, false, map[string]string{
		"/etc/containers/storage.conf": "[storage]\ndriver = \"vfs\"\ngraphroot = \"/var/lib/cs\"\n",
		"/etc/c.conf":                  "[crio]\nrunroot = \"/run/wrong\"\n[crio.runtime]\nconmon = \"/usr/bin/conmon\"\n",
		"/etc/c.d/10-run.conf":         "[crio]\nrunroot = \"/run/cs\"\n",
		"/run/cs/vfs-containers/" + id1 + "/userdata/config.json": spec,
		"/run/cs/vfs-containers/" + id1 + "/userdata/pidfile":     "888",
		"/var/lib/cs/vfs-containers/" + id2 + "/userdata/config.json": jsonText(t, map[string]any{"annotations": map[string]string{
			crioAnnotationType: "sandbox", crioAnnotationKubeName: "web-1", crioAnnotationNamespace: "shop",
			crioAnnotationLabels: jsonText(t, map[string]string{LabelPodUID: uid})}}),
	})
	f := newRuntimeFiles(h.proc, h.clock.now)
	info, err := f.read(id1, RuntimeCRIO)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "web" || info.Pod != "web-1" || info.Namespace != "shop" || info.PodUID != uid || info.Image != "quay.io/shop/web:9" ||
		info.GracePeriod != 45 || info.PreStop == nil || info.PreStop.Kind != "sleep" || info.StopSignal != sigvocab.SIGINT ||
		info.MainPID != 888 || !info.FromFiles || info.Runtime != RuntimeCRIO || info.Labels != nil || info.Annotations != nil {
		t.Errorf("cri-o files: %+v", *info)
	}
	if strings.Contains(fmt.Sprintf("%#v", info), fileSecret) {
		t.Error("the Info keeps what the labels, annotations or environment held")
	}
	sb, err := f.read(id2, RuntimeCRIO)
	if err != nil || !sb.Sandbox || sb.Pod != "web-1" || sb.Namespace != "shop" || sb.Name != SandboxName {
		t.Errorf("the sandbox: %+v, %v", sb, err)
	}
}

// A daemon in another pid namespace than the agent's (a runtime nested in
// a container) has pids the events do not carry: its files name the
// container, not its main process.
func TestRuntimeFilesOtherPidNamespace(t *testing.T) {
	h := newFakeHost(t)
	h.fakeDaemon(600, "dockerd", nil, true, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "nested", true, 12),
	})
	info, err := newRuntimeFiles(h.proc, h.clock.now).read(id1, RuntimeDocker)
	if err != nil || info.Name != "nested" || info.MainPID != 0 {
		t.Errorf("%+v, %v: want the name without the other namespace's pid", info, err)
	}
}

// The daemons are looked for again when a container's files are under
// none of them, at most once per filesRescan.
func TestRuntimeFilesRescan(t *testing.T) {
	h := newFakeHost(t)
	f := newRuntimeFiles(h.proc, h.clock.now)
	if _, err := f.read(id1, RuntimeDocker); !errors.Is(err, errNoFiles) {
		t.Fatal(err)
	}
	h.fakeDaemon(700, "dockerd", nil, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "late", true, 1),
	})
	scans := f.scans
	if _, err := f.read(id1, RuntimeDocker); !errors.Is(err, errNoFiles) || f.scans != scans {
		t.Fatalf("within %v of the last search: %v, %d searches (want none)", filesRescan, err, f.scans-scans)
	}
	h.clock.advance(filesRescan)
	info, err := f.read(id1, RuntimeDocker)
	if err != nil || info.Name != "late" || f.scans != scans+1 {
		t.Fatalf("after %v: %+v, %v, %d searches", filesRescan, info, err, f.scans-scans)
	}
	// Found among the known daemons: no search.
	h.clock.advance(filesRescan)
	if _, err := f.read(id1, RuntimeDocker); err != nil || f.scans != scans+1 {
		t.Fatalf("a known daemon's container: %v, %d searches", err, f.scans-scans)
	}
}

// stallingSocket accepts connections and never answers: a runtime API
// that stalls. It returns the socket's path, and a function that ends the
// stall, closing what it held (a resolver's Close waits for its requests).
func stallingSocket(t *testing.T) (string, func()) {
	t.Helper()
	p := socketPath(t, "stalled.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	return p, func() {
		l.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	}
}

// lookupWithin is r.Lookup(p), failing the test when it has not returned
// within bound: a lookup that waits on a stalled API.
func lookupWithin(t *testing.T, r *Resolver, p *sigvocab.Process, bound time.Duration) *identity.Info {
	t.Helper()
	done := make(chan *identity.Info, 1)
	go func() { done <- r.Lookup(p) }()
	select {
	case info := <-done:
		return info
	case <-time.After(bound):
		t.Fatalf("Lookup has not returned after %v: it waits for the stalled API", bound)
		return nil
	}
}

// With the runtime's API stalled, a container whose cgroup appears is
// named from its runtime's files at once: no lookup waits for the API.
func TestNamedFromFilesWhileAPIStalls(t *testing.T) {
	h := newFakeHost(t)
	h.fakeDaemon(300, "dockerd", nil, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "web", true, 4321),
	})
	stalled, unstall := stallingSocket(t)
	// An API call would wait 10 minutes; a lookup is given 30 s, to stop
	// a hang, not to time it.
	r := h.resolver(Options{DockerSocket: stalled, CRISockets: []string{}, APITimeout: 10 * time.Minute})
	t.Cleanup(unstall)                         // before the resolver's Close, which waits for its requests
	p := h.dockerProcess(100, 4026532100, id1) // the watch sees its cgroup appear
	testutil.WaitFor(t, "the container named from its files", func() bool {
		info, _ := r.Known(id1)
		return info != nil && info.Name == "web"
	})
	info := lookupWithin(t, r, p, 30*time.Second)
	if info == nil || info.Name != "web" || info.Image != "shop/web:1.2" || !info.FromFiles || info.MainPID != 4321 {
		t.Fatalf("Lookup = %+v, want the files' identity", info)
	}
	// The API is asked in the background (the watch's prefetch), and
	// stays asked while it stalls: the answer will replace the files'.
	testutil.WaitFor(t, "the API asked about the container", func() bool { return r.Asking(id1) })
	if logs := h.logs.String(); !strings.Contains(logs, "read from the runtime's files first") || !strings.Contains(logs, "runtime=docker pid=300") {
		t.Errorf("the daemon found is not logged:\n%s", logs)
	}
	// A container first met by a lookup (its cgroup made before the
	// resolver started) is named from its files too.
	h.fakeDaemon(301, "dockerd", []string{"--data-root", "/d2"}, false, map[string]string{
		"/d2/containers/" + id2 + "/config.v2.json": dockerRecord(t, id2, "api", true, 99),
	})
	h.clock.advance(filesRescan)
	q := h.dockerProcess(101, 4026532101, id2)
	if info := lookupWithin(t, r, q, 30*time.Second); info == nil || info.Name != "api" || !info.FromFiles {
		t.Fatalf("Lookup = %+v, want the files' identity", info)
	}
}

// The API's answer replaces the files' (a docker rename, and what the
// files lack), and the files never replace the API's.
func TestFilesThenAPI(t *testing.T) {
	h := newFakeHost(t)
	h.fakeDaemon(300, "dockerd", nil, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "old-name", true, 4321),
	})
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "new-name", map[string]string{AnnotationGracePeriod: "45"}, "", nil, 4321)})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	p := h.dockerProcess(100, 4026532100, id1)
	testutil.WaitFor(t, "the API's answer", func() bool {
		info := r.Lookup(p)
		return info != nil && info.Name == "new-name"
	})
	info := r.Lookup(p)
	if info.FromFiles || info.GracePeriod != 45 {
		t.Errorf("after the API answered: %+v", info)
	}
	if m := merged(info, true, &identity.Info{Identity: identity.Identity{ID: id1, Name: "old-name"}, MainPID: 4321, FromFiles: true}); m != info {
		t.Errorf("the files replaced the API's answer: %+v", m)
	}
	restarted := merged(info, true, &identity.Info{Identity: identity.Identity{ID: id1, Name: "old-name"}, MainPID: 5000, FromFiles: true})
	if restarted.Name != "new-name" || restarted.MainPID != 5000 || restarted.FromFiles {
		t.Errorf("a restart the files saw: %+v, want the API's answer with the new main pid", restarted)
	}
	if m := merged(&identity.Info{Identity: identity.Identity{ID: id1, Name: "x"}, FromFiles: true}, false, &identity.Info{Identity: identity.Identity{ID: id1}}); m.Name != "x" {
		t.Errorf("an API that failed unnamed what the files named: %+v", m)
	}
}

// NoRuntimeFiles: names come from the API only.
func TestNoRuntimeFiles(t *testing.T) {
	h := newFakeHost(t)
	h.fakeDaemon(300, "dockerd", nil, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "web", true, 4321),
	})
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{}, NoRuntimeFiles: true})
	if info := r.Lookup(h.dockerProcess(100, 4026532100, id1)); info == nil || info.Name != "" {
		t.Errorf("Lookup = %+v, want no name", info)
	}
}

// A container that exited while its runtime's API failed (no main pid in
// its files) is not read again every time the API is asked again: as many
// times as the runtime is asked for a main pid.
func TestFilesReadBounded(t *testing.T) {
	h := newFakeHost(t)
	h.fakeDaemon(300, "dockerd", nil, false, map[string]string{
		"/var/lib/docker/containers/" + id1 + "/config.v2.json": dockerRecord(t, id1, "exited", false, 0),
	})
	d := startFakeDocker(t, nil)
	d.failing.Store(true)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	if info := r.Lookup(h.dockerProcess(100, 4026532100, id1)); info == nil || info.Name != "exited" {
		t.Fatalf("Lookup = %+v", info)
	}
	for range 100 {
		if en := r.enrich(id1, RuntimeDocker); en.info.Name != "exited" || en.complete {
			t.Fatalf("enrich = %+v", en)
		}
	}
	r.files.mu.Lock()
	reads := r.files.reads
	r.files.mu.Unlock()
	if max := 2 + r.opts.recheckTries; reads > max {
		t.Errorf("%d reads of the files for 100 asks, want at most %d", reads, max)
	}
}
