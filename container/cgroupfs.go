package container

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Bounds of one walk of a cgroup hierarchy: a node has a few thousand
// cgroups at most; these keep a pathological tree from costing more than a
// bounded, rare pause.
const (
	walkMaxDirs  = 100000
	walkMaxDepth = 16
)

// cgroupIndex maps cgroup ids to paths, for processes that are gone by the
// time their event is looked up. A cgroup id is its directory's inode in
// the cgroup filesystem (kernfs), so the index is a walk of the hierarchy
// recording each directory's inode. It is rebuilt only when an id is not in
// it and the last walk is older than minRewalk, so a stream of unknown ids
// costs at most one walk per interval.
type cgroupIndex struct {
	v2Root string // cgroup2 mount; "" when none
	v1Root string // v1 memory controller mount; "" when none

	minRewalk time.Duration
	now       func() time.Time

	mu     sync.Mutex
	walks  int // how many walks were made, for tests
	v2     map[uint64]string
	v1     map[uint64]string
	v2Walk time.Time
	v1Walk time.Time
}

// newCgroupIndex finds the hierarchies under root: a pure v2 host mounts
// cgroup2 at root itself; a hybrid host mounts it at root/unified and the
// v1 controllers beside it.
func newCgroupIndex(root string, now func() time.Time) *cgroupIndex {
	ix := &cgroupIndex{minRewalk: time.Second, now: now}
	if fileExists(filepath.Join(root, "cgroup.controllers")) {
		ix.v2Root = root
		return ix
	}
	if fileExists(filepath.Join(root, "unified", "cgroup.controllers")) {
		ix.v2Root = filepath.Join(root, "unified")
	}
	if fi, err := os.Stat(filepath.Join(root, "memory")); err == nil && fi.IsDir() {
		ix.v1Root = filepath.Join(root, "memory")
	}
	return ix
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// find returns the path, relative to its hierarchy's root, of the cgroup
// whose id is id: in the v1 memory hierarchy when v1, else in cgroup2.
func (ix *cgroupIndex) find(id uint64, v1 bool) (string, bool, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	m, last, root := &ix.v2, &ix.v2Walk, ix.v2Root
	if v1 {
		m, last, root = &ix.v1, &ix.v1Walk, ix.v1Root
	}
	if root == "" {
		return "", false, nil
	}
	if p, ok := (*m)[id]; ok {
		return p, true, nil
	}
	now := ix.now()
	if !last.IsZero() && now.Sub(*last) < ix.minRewalk {
		return "", false, nil
	}
	*last = now
	ix.walks++
	idx, err := walkCgroups(root)
	*m = idx
	p, ok := idx[id]
	return p, ok, err
}

// walkCgroups records the inode of every directory under root, breadth
// first and within the walk bounds. Directories vanish while it runs (a
// container ending): those are skipped, not errors.
func walkCgroups(root string) (map[uint64]string, error) {
	idx := make(map[uint64]string)
	type dir struct {
		rel   string
		depth int
	}
	queue := []dir{{"/", 0}}
	var firstErr error
	for len(queue) > 0 && len(idx) < walkMaxDirs {
		d := queue[0]
		queue = queue[1:]
		full := filepath.Join(root, d.rel)
		var st syscall.Stat_t
		if err := syscall.Stat(full, &st); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
				firstErr = err
			}
			continue
		}
		idx[st.Ino] = d.rel
		if d.depth >= walkMaxDepth {
			continue
		}
		entries, err := os.ReadDir(full)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				queue = append(queue, dir{filepath.Join(d.rel, e.Name()), d.depth + 1})
			}
		}
	}
	return idx, firstErr
}
