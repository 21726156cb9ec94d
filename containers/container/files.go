package container

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
)

// A container's name never needed its runtime's API: the runtime keeps it
// on disk for as long as the container exists, in the files it reads
// itself. The resolver reads them first, when a container is first seen
// (its cgroup appears, or its first event), and asks the API second: the
// API's answer replaces the files' and adds what they lack (merged). So a
// runtime whose API stalls under load, when stops cluster (a drain, a
// rollout, evictions), costs no container its name. Per runtime (and
// docs/containers.md):
//
//   - Docker: DATA-ROOT/containers/ID/config.v2.json, the daemon's own
//     record of the container (name, image, labels, stop signal and
//     timeout, its main pid once started). DATA-ROOT is the daemon's
//     --data-root (or -g, --graph), else its --config-file's (default
//     /etc/docker/daemon.json) "data-root", else /var/lib/docker.
//   - containerd: the OCI bundle its shim hands runc,
//     STATE/io.containerd.runtime.v2.task/NAMESPACE/ID/config.json, whose
//     annotations the CRI plugin writes (io.kubernetes.cri.container-name,
//     sandbox-name, sandbox-namespace, sandbox-uid, image-name,
//     container-type), and init.pid beside it once runc started it. STATE
//     is containerd's --state, else its --config's (default
//     /etc/containerd/config.toml) state, else /run/containerd. The bundle
//     is removed with the task, soon after the container exits: it is read
//     at the container's start.
//   - CRI-O: ROOT/DRIVER-containers/ID/userdata/config.json (under its run
//     root, then its root), whose annotations carry the kubelet's labels
//     and annotations as CRI-O got them (io.kubernetes.cri-o.Labels,
//     io.kubernetes.cri-o.Annotations: pod, namespace, uid, container name,
//     grace period, preStop hook) and the image's name; its main pid is
//     conmon's pidfile beside it. The roots are crio's --runroot and --root,
//     else its --config (default /etc/crio/crio.conf) and --config-dir
//     (default /etc/crio/crio.conf.d) [crio] runroot and root, else
//     containers-storage's /etc/containers/storage.conf, else
//     /run/containers/storage and /var/lib/containers/storage.
//
// The daemons are found by their command names in /proc (dockerd,
// containerd, crio), and their files read through their own root,
// /proc/PID/root: a daemon in a mount namespace of its own (a runtime in a
// container, the tests' cgroup2-only Docker), and the agent's DaemonSet,
// which mounts none of these directories, see them as the daemon does. A
// kernel that refuses that (no CAP_SYS_PTRACE, an AppArmor profile) leaves
// the paths as the agent's own mounts show them. A container is matched to
// the daemon whose files hold its ID. The daemons are looked for again
// when a container's files are found under none of them, at most once per
// filesRescan: a daemon restarted, or started after the agent.
//
// These files hold the container's whole configuration, its environment
// (secrets) included. Only the keys named here are decoded (encoding/json
// and toml skip the rest without keeping it), the labels and annotations
// are reduced to the kubelet's few that name the container, and no error
// quotes a file's content. Work is bounded per container start (a few
// small reads; a file is read up to maxRuntimeFile), never per signal.

// filesRescan is the least time between two searches of /proc for the
// runtimes' daemons.
const filesRescan = 5 * time.Second

// maxRuntimeFile bounds what is read of one runtime file: a config.v2.json
// with a large environment is tens of kilobytes.
const maxRuntimeFile = 4 << 20

// The containerd CRI plugin's annotations in a container's OCI spec
// (internal/cri/annotations in containerd 1.6 to 2.x).
const (
	criAnnotationType         = "io.kubernetes.cri.container-type" // "container" or "sandbox"
	criAnnotationName         = "io.kubernetes.cri.container-name"
	criAnnotationImage        = "io.kubernetes.cri.image-name"
	criAnnotationPod          = "io.kubernetes.cri.sandbox-name"
	criAnnotationPodNamespace = "io.kubernetes.cri.sandbox-namespace"
	criAnnotationPodUID       = "io.kubernetes.cri.sandbox-uid"
)

// CRI-O's annotations in a container's OCI spec (internal/annotations and
// pkg/annotations in cri-o 1.2x to 1.34).
const (
	crioAnnotationType        = "io.kubernetes.cri-o.ContainerType" // "container" or "sandbox"
	crioAnnotationLabels      = "io.kubernetes.cri-o.Labels"        // the CRI labels, as JSON
	crioAnnotationAnnotations = "io.kubernetes.cri-o.Annotations"   // the CRI annotations, as JSON
	crioAnnotationImageName   = "io.kubernetes.cri-o.ImageName"
	crioAnnotationImage       = "io.kubernetes.cri-o.Image"
	crioAnnotationKubeName    = "io.kubernetes.cri-o.KubeName" // a sandbox's pod name
	crioAnnotationNamespace   = "io.kubernetes.pod.namespace"
)

// kubeKeys are the labels and annotations of the kubelet the files' are
// reduced to: what names a container and says how it is stopped.
var kubeKeys = []string{LabelPodName, LabelPodNamespace, LabelPodUID, LabelContainerName, AnnotationGracePeriod, AnnotationPreStop, LabelDockerType}

// runtimeDaemon is one runtime daemon found in /proc, and where its
// containers' files are.
type runtimeDaemon struct {
	runtime string // RuntimeDocker, RuntimeContainerd or RuntimeCRIO
	pid     int
	// root prefixes every path of the daemon's: procRoot/PID/root, or ""
	// when the kernel refused it (the agent's own mounts then).
	root string
	// dirs: Docker's data root; containerd's state directory; CRI-O's
	// run root and root. As the daemon sees them.
	dirs []string
	// hostPIDs: the daemon is in the agent's pid namespace, so the pids its
	// files hold are the ones the kernel's events carry.
	hostPIDs bool
}

// runtimeFiles reads containers' identities from their runtimes' files.
// Safe for concurrent use.
type runtimeFiles struct {
	procRoot string
	now      func() time.Time
	log      *slog.Logger // nil: silent

	mu      sync.Mutex
	daemons []runtimeDaemon
	scanned time.Time // the last search of /proc; zero: never
	scans   int       // for tests
	reads   int       // for tests: the reads of a container's files
	// said: the daemons logged, by runtime, pid and directories: each
	// once, when first found (few: a node runs one to three).
	said map[string]bool
}

func newRuntimeFiles(procRoot string, now func() time.Time) *runtimeFiles {
	return &runtimeFiles{procRoot: procRoot, now: now, said: make(map[string]bool)}
}

// maxSaid bounds the daemons remembered as logged.
const maxSaid = 64

// sayFound logs, once each, the daemons a search found: which runtime's
// files are read, where, and how they are reached.
func (f *runtimeFiles) sayFound(ds []runtimeDaemon) {
	if f.log == nil {
		return
	}
	for _, d := range ds {
		key := fmt.Sprint(d.runtime, d.pid, d.dirs)
		if f.said[key] || len(f.said) >= maxSaid {
			continue
		}
		f.said[key] = true
		via := d.root
		if via == "" {
			via = "the agent's own mounts (the daemon's /proc/PID/root refused)"
		}
		f.log.Info("container names are read from the runtime's files first", "runtime", d.runtime, "pid", d.pid, "dirs", d.dirs, "through", via)
	}
}

// errNoFiles: no daemon of the runtime has files of the container.
var errNoFiles = errors.New("no runtime file names it")

// read returns what the files of container id's runtime say of it, or
// errNoFiles. The Info's Runtime is the daemon's.
func (f *runtimeFiles) read(id, runtime string) (*identity.Info, error) {
	if !safeID(id) {
		return nil, errNoFiles
	}
	switch runtime {
	case RuntimeDocker, RuntimeContainerd, RuntimeCRIO:
	default:
		return nil, errNoFiles
	}
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	for try := 0; try < 2; try++ {
		ds, fresh := f.daemonsOf(runtime, try > 0)
		var firstErr error
		for _, d := range ds {
			info, err := d.read(id)
			if err == nil {
				return info, nil
			}
			if !errors.Is(err, errNoFiles) && firstErr == nil {
				firstErr = err
			}
		}
		if firstErr != nil {
			return nil, firstErr
		}
		if fresh {
			break
		}
	}
	return nil, errNoFiles
}

// daemonsOf returns the known daemons of runtime, searching /proc first
// when it never was, or when again is set and the last search is older
// than filesRescan. fresh: the daemons come from a search just made (or
// one that may not be made again yet).
func (f *runtimeFiles) daemonsOf(runtime string, again bool) (_ []runtimeDaemon, fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.scanned.IsZero() || again && now.Sub(f.scanned) >= filesRescan {
		f.daemons = f.scan()
		f.scanned, fresh = now, true
		f.scans++
		f.sayFound(f.daemons)
	} else if again {
		fresh = true // not yet: as good as fresh
	}
	var out []runtimeDaemon
	for _, d := range f.daemons {
		if d.runtime == runtime {
			out = append(out, d)
		}
	}
	return out, fresh
}

// read reads container id's files under d, or says errNoFiles.
func (d *runtimeDaemon) read(id string) (*identity.Info, error) {
	var info *identity.Info
	var err error
	switch d.runtime {
	case RuntimeDocker:
		info, err = d.readDocker(id)
	case RuntimeContainerd:
		info, err = d.readContainerd(id)
	case RuntimeCRIO:
		info, err = d.readCRIO(id)
	default:
		return nil, errNoFiles
	}
	if err != nil {
		return nil, err
	}
	if !d.hostPIDs {
		info.MainPID = 0 // a pid of another namespace than the events'
	}
	info.ID, info.FromFiles = id, true
	return info, nil
}

// notFound turns a file's absence into errNoFiles, and any other failure
// into an error that names the file and not its content.
func notFound(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return errNoFiles
	}
	return fmt.Errorf("runtime file %s: %w", p, err)
}

// decodeFile decodes the JSON file p (b) into v. A file that is no JSON
// at all is one its runtime is writing (CRI-O writes a spec in place) or
// has left half-written: not there yet, errNoFiles. One of another shape
// is an error, said without the decoder's message, which may quote it.
func decodeFile(p string, b []byte, v any) error {
	if !json.Valid(b) {
		return errNoFiles
	}
	if json.Unmarshal(b, v) != nil {
		return fmt.Errorf("runtime file %s: not the JSON expected", p)
	}
	return nil
}

func (d *runtimeDaemon) readDocker(id string) (*identity.Info, error) {
	p := filepath.Join(d.dirs[0], "containers", id, "config.v2.json")
	b, err := d.readFile(p)
	if err != nil {
		return nil, notFound(p, err)
	}
	// config.v2.json is the daemon's container record, whose fields the
	// Engine API's inspect copies under the same names (its "ID" is the
	// inspect's "Id": encoding/json matches either). Its Config.Env is
	// skipped, never decoded.
	var ins dockerInspect
	if err := decodeFile(p, b, &ins); err != nil {
		return nil, err
	}
	if ins.ID != id {
		return nil, errNoFiles
	}
	ins.Config.Labels = kubeOnly(ins.Config.Labels)
	info := ins.info()
	if !ins.State.Running {
		info.MainPID = 0
	}
	info.Labels = nil
	return info, nil
}

// ociAnnotations is what is decoded of an OCI runtime spec (config.json):
// its annotations, and nothing of its process (environment, arguments).
type ociAnnotations struct {
	Annotations map[string]string `json:"annotations"`
}

func (d *runtimeDaemon) readSpec(p string) (map[string]string, error) {
	b, err := d.readFile(p)
	if err != nil {
		return nil, notFound(p, err)
	}
	var spec ociAnnotations
	if err := decodeFile(p, b, &spec); err != nil {
		return nil, err
	}
	return spec.Annotations, nil
}

// readPID reads a pid file (init.pid, conmon's pidfile): 0 when it is
// missing (not started yet) or unreadable.
func (d *runtimeDaemon) readPID(p string) int {
	b, err := d.readFile(p)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func (d *runtimeDaemon) readContainerd(id string) (*identity.Info, error) {
	tasks := filepath.Join(d.dirs[0], "io.containerd.runtime.v2.task")
	nss, err := os.ReadDir(d.path(tasks))
	if err != nil {
		return nil, notFound(tasks, err)
	}
	for _, ns := range nss {
		bundle := filepath.Join(tasks, ns.Name(), id)
		a, err := d.readSpec(filepath.Join(bundle, "config.json"))
		if errors.Is(err, errNoFiles) {
			continue
		}
		if err != nil {
			return nil, err
		}
		info := &identity.Info{Identity: identity.Identity{Runtime: RuntimeContainerd,
			Name: a[criAnnotationName], Image: a[criAnnotationImage],
			Pod: a[criAnnotationPod], Namespace: a[criAnnotationPodNamespace], PodUID: a[criAnnotationPodUID]},
			StopSignal: identity.ParseStopSignal(a[ociStopSignalAnnotation]),
			MainPID:    d.readPID(filepath.Join(bundle, "init.pid")),
		}
		if a[criAnnotationType] == "sandbox" {
			info.Sandbox, info.Name, info.Image = true, SandboxName, ""
		}
		return info, nil
	}
	return nil, errNoFiles
}

func (d *runtimeDaemon) readCRIO(id string) (*identity.Info, error) {
	for _, root := range d.dirs {
		drivers, err := os.ReadDir(d.path(root))
		if err != nil {
			continue
		}
		for _, drv := range drivers {
			if !drv.IsDir() || !strings.HasSuffix(drv.Name(), "-containers") {
				continue
			}
			userdata := filepath.Join(root, drv.Name(), id, "userdata")
			a, err := d.readSpec(filepath.Join(userdata, "config.json"))
			if errors.Is(err, errNoFiles) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return crioInfo(a, d.readPID(filepath.Join(userdata, "pidfile"))), nil
		}
	}
	return nil, errNoFiles
}

// crioInfo maps the annotations CRI-O writes into a container's spec.
func crioInfo(a map[string]string, pid int) *identity.Info {
	labels, annotations := jsonMap(a[crioAnnotationLabels]), jsonMap(a[crioAnnotationAnnotations])
	info := &identity.Info{Identity: identity.Identity{Runtime: RuntimeCRIO,
		Image: cmpOr(a[crioAnnotationImageName], a[crioAnnotationImage])},
		StopSignal: identity.ParseStopSignal(a[ociStopSignalAnnotation]),
		MainPID:    pid,
	}
	applyKubernetes(info, labels, annotations)
	if a[crioAnnotationType] == "sandbox" {
		info.Sandbox, info.Name, info.Image = true, SandboxName, ""
		info.Pod = cmpOr(info.Pod, a[crioAnnotationKubeName])
		info.Namespace = cmpOr(info.Namespace, a[crioAnnotationNamespace])
	}
	return info
}

// jsonMap decodes a JSON object of strings, keeping the kubelet's keys
// only; nil when it is not one.
func jsonMap(s string) map[string]string {
	var m map[string]string
	if s == "" || json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return kubeOnly(m)
}

// kubeOnly is m reduced to kubeKeys: the rest is not sigscope's to keep.
func kubeOnly(m map[string]string) map[string]string {
	var out map[string]string
	for _, k := range kubeKeys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(kubeKeys))
			}
			out[k] = v
		}
	}
	return out
}

// safeID reports whether id can name a directory under a runtime's
// root: a container ID as runtimes make them, never a path.
func safeID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	return !strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	})
}
