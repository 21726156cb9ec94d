package container

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ownPaths drops from a main process's cgroups those it shares with its
// parent, the runtime's shim or monitor: in that hierarchy the runtime made
// no cgroup for the container, so the cgroup names the runtime's processes
// and whatever else runs there, not the container. A cgroup2-only runtime
// on a hybrid host does that: its containers stay in the v1 cgroups of the
// daemon that started them, shared with the host processes there, which
// would otherwise all be taken for the container. When the parent cannot
// be read (it is gone, or /proc is partial), paths are kept as they are.
func (r *Resolver) ownPaths(pid int, paths []cgPath) []cgPath {
	stat, err := r.fs.ReadFile(filepath.Join(r.opts.ProcRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return paths
	}
	ppid := parentPID(string(stat))
	if ppid <= 1 {
		return paths
	}
	data, err := r.fs.ReadFile(filepath.Join(r.opts.ProcRoot, strconv.Itoa(ppid), "cgroup"))
	if err != nil {
		return paths
	}
	parent := splitCgroupFile(string(data)).owned()
	return slices.DeleteFunc(slices.Clone(paths), func(p cgPath) bool { return slices.Contains(parent, p) })
}

// parentPID is the ppid field of /proc/PID/stat, which follows the command
// in parentheses (which may hold any byte, ')' too); 0 when unreadable.
func parentPID(stat string) int {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0
	}
	return ppid
}
