package container

import "github.com/sigscope/sigscope/containers/identity"

// Key is what events carry that identifies a container without a /proc
// read: the pid-namespace inode and the cgroup ids.
type Key struct {
	PidNS      uint32
	CgroupID   uint64 // cgroup v2 id; <= 1 means none
	CgroupV1ID uint64 // cgroup v1 memory controller id; 0 means none
}

// bare reports whether the runtime told nothing about the container: only
// what its cgroup path gives is known.
func bare(i *identity.Info) bool {
	return i.Name == "" && i.Image == "" && i.Pod == "" && len(i.Labels) == 0
}

// named reports whether i names the container: the files or the API said
// more than its cgroup path.
func named(i *identity.Info) bool { return i != nil && !bare(i) }
