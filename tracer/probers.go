package tracer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ProberNames are the command names of the processes whose connections to
// a container are its probes, not its clients' requests: the kubelet, and
// the binaries that run it inside themselves (k3s's server and agent,
// MicroK8s' kubelite). The kubelet opens every HTTP, TCP and gRPC probe's
// socket itself, on the container's node, so its connections are told by
// the process that made them, never by their source address: the node's
// address is also where NodePort clients (after kube-proxy's SNAT),
// host-network ingress controllers and a client on the node come from.
var ProberNames = []string{"kubelet", "kubelite", "k3s", "k3s-server", "k3s-agent"}

// FindProbers lists the processes under procRoot (/proc) whose command
// name is one of ProberNames, sorted. A process that ends while it reads
// is skipped.
func FindProbers(procRoot string) ([]uint32, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var pids []uint32
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil {
			continue
		}
		if slices.Contains(ProberNames, strings.TrimSpace(string(comm))) {
			pids = append(pids, uint32(pid))
		}
	}
	slices.Sort(pids)
	return pids, nil
}
