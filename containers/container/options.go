package container

import (
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Defaults for [Options].
const (
	DefaultProcRoot     = "/proc"
	DefaultCgroupRoot   = "/sys/fs/cgroup"
	DefaultDockerSocket = "/var/run/docker.sock"
	DefaultMaxEntries   = 4096
	DefaultTTL          = 5 * time.Minute
	DefaultAPITimeout   = 2 * time.Second
)

// DefaultCRISockets are where the CRI runtimes listen by default:
// containerd, CRI-O, the containerd of k3s and RKE2, and cri-dockerd
// (Docker behind the CRI). Sockets that do not exist are skipped.
var DefaultCRISockets = []string{
	"/run/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/k3s/containerd/containerd.sock",
	"/run/cri-dockerd.sock",
}

// Error sources counted by [Resolver.Errors].
const (
	SourceDocker = "docker" // the Docker Engine API
	SourceCRI    = "cri"    // a CRI endpoint (containerd, CRI-O)
	SourceProc   = "proc"   // /proc reads other than "the process is gone"
	SourceCgroup = "cgroup" // walking the cgroup filesystem
	SourceFiles  = "files"  // a runtime's own files (files.go) that exist and could not be read
)

// Options configure a [Resolver]. Zero values take the defaults.
type Options struct {
	ProcRoot   string // default "/proc"
	CgroupRoot string // where cgroup hierarchies are mounted; default "/sys/fs/cgroup"
	// DockerSocket is the Docker Engine API socket; "" is
	// DefaultDockerSocket. CRISockets are the CRI endpoints asked in
	// order; nil is DefaultCRISockets, empty is none. A "unix://" prefix
	// (the kubelet's form) is accepted. A socket given explicitly that
	// does not exist is warned about once; a default one is a runtime
	// this node does not run.
	DockerSocket string
	CRISockets   []string
	// NoRuntimeAPI turns enrichment off: IDs and runtimes come from cgroup
	// paths only, and nothing is dialled.
	NoRuntimeAPI bool
	// NoRuntimeFiles turns off reading containers' identities from their
	// runtimes' own files (files.go): names then come from the runtimes'
	// APIs only. NoRuntimeAPI turns them off too.
	NoRuntimeFiles bool
	// NoCgroupWatch turns off the inotify watch of the cgroup tree, for a
	// one-shot user (audit) whose processes are all alive. Without it,
	// a process that is gone resolves only if its cgroup is still there
	// or was seen by an earlier walk.
	NoCgroupWatch bool

	MaxEntries int           // bound of each cache (keys, and containers); default 4096
	TTL        time.Duration // how long a resolution is reused, and kept after a container ends; default 5m
	APITimeout time.Duration // per runtime API call; default 2s
	Logger     *slog.Logger  // default slog.Default()

	// recheckInterval and recheckTries bound the asking again about a
	// container without a main pid yet (prefetch.go); 0 takes the
	// defaults. Only the tests shorten them.
	recheckInterval time.Duration
	recheckTries    int
}

// withDefaults fills in the zero values of opts and normalises the runtime
// sockets (no "unix://" prefix, no duplicate). given are the sockets the
// user named explicitly, which are warned about when missing.
func (opts Options) withDefaults() (_ Options, given []string) {
	if opts.ProcRoot == "" {
		opts.ProcRoot = DefaultProcRoot
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = DefaultCgroupRoot
	}
	explicitDocker, explicitCRI := opts.DockerSocket != "", opts.CRISockets != nil
	opts.DockerSocket = strings.TrimPrefix(opts.DockerSocket, "unix://")
	if opts.DockerSocket == "" {
		opts.DockerSocket = DefaultDockerSocket
	}
	if opts.CRISockets == nil {
		opts.CRISockets = DefaultCRISockets
	}
	var cri []string
	for _, s := range opts.CRISockets {
		if s = strings.TrimPrefix(s, "unix://"); s != "" && !slices.Contains(cri, s) {
			cri = append(cri, s)
		}
	}
	opts.CRISockets = cri
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.recheckInterval <= 0 {
		opts.recheckInterval = defaultRecheckInterval
	}
	if opts.recheckTries <= 0 {
		opts.recheckTries = defaultRecheckTries
	}
	if !opts.NoRuntimeAPI {
		if explicitDocker {
			given = append(given, opts.DockerSocket)
		}
		if explicitCRI {
			given = append(given, opts.CRISockets...)
		}
	}
	return opts, given
}
