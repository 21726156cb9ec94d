package container

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
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
// the cgroup filesystem (kernfs; 64 bits with a generation, never reused
// while the system runs), so the index is a walk of the hierarchy recording
// each directory's inode.
//
// A container's cgroup is removed milliseconds after its last process
// exits (docker rm -f: ~50 ms after the command started, measured here),
// often before the reader has seen the exit; so the index must know a
// cgroup before it goes. With a watch (see cgroupwatch.go) it learns each
// directory as it is created and keeps removed ones in a bounded LRU. A
// miss still rewalks the tree, at most once per minRewalk, for when there
// is no watch or it could not cover the whole tree; the walk merges: what
// vanished since the last walk is kept too.
type cgroupIndex struct {
	hier      [2]*hierarchy // 0: cgroup2, 1: the v1 memory controller; nil when not mounted
	minRewalk time.Duration
	keepGone  time.Duration // how long a removed cgroup is remembered
	maxGone   int           // how many removed cgroups each hierarchy remembers
	now       func() time.Time

	mu    sync.Mutex
	walks int // how many full walks were made, for tests
}

// hierarchy is one mounted cgroup tree.
type hierarchy struct {
	root     string
	live     map[uint64]string // id -> path relative to root, as walked or watched
	ids      map[string]uint64 // the inverse of live, for removals
	gone     *simplelru.LRU[uint64, goneCgroup]
	lastWalk time.Time
}

// goneCgroup is a removed cgroup: its path, and when it was seen gone.
type goneCgroup struct {
	path string
	at   time.Time
}

// newCgroupIndex finds the hierarchies under root: a pure v2 host mounts
// cgroup2 at root itself; a hybrid host mounts it at root/unified and the
// v1 controllers beside it. Removed cgroups are remembered for keepGone,
// at most maxGone of them per hierarchy.
func newCgroupIndex(root string, maxGone int, keepGone time.Duration, now func() time.Time) *cgroupIndex {
	ix := &cgroupIndex{minRewalk: time.Second, keepGone: keepGone, maxGone: maxGone, now: now}
	newHier := func(root string) *hierarchy {
		return &hierarchy{root: root, live: map[uint64]string{}, ids: map[string]uint64{}, gone: newLRU[uint64, goneCgroup](maxGone)}
	}
	if fileExists(filepath.Join(root, "cgroup.controllers")) {
		ix.hier[0] = newHier(root)
		return ix
	}
	if fileExists(filepath.Join(root, "unified", "cgroup.controllers")) {
		ix.hier[0] = newHier(filepath.Join(root, "unified"))
	}
	if fi, err := os.Stat(filepath.Join(root, "memory")); err == nil && fi.IsDir() {
		ix.hier[1] = newHier(filepath.Join(root, "memory"))
	}
	return ix
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// of is the v1 memory hierarchy when v1, else cgroup2; nil when not
// mounted.
func (ix *cgroupIndex) of(v1 bool) *hierarchy {
	if v1 {
		return ix.hier[1]
	}
	return ix.hier[0]
}

// find returns the path, relative to its hierarchy's root, of the cgroup
// whose id is id: in the v1 memory hierarchy when v1, else in cgroup2; and
// when it has been removed, since when.
func (ix *cgroupIndex) find(id uint64, v1 bool) (path string, goneAt time.Time, ok bool, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	h := ix.of(v1)
	if h == nil {
		return "", time.Time{}, false, nil
	}
	if p, ok := h.live[id]; ok {
		return p, time.Time{}, true, nil
	}
	if g, ok := h.gone.Get(id); ok && ix.now().Sub(g.at) < ix.keepGone {
		return g.path, g.at, true, nil
	}
	if d := ix.now().Sub(h.lastWalk); !h.lastWalk.IsZero() && d >= 0 && d < ix.minRewalk {
		return "", time.Time{}, false, nil
	}
	err = ix.walkLocked(h, nil)
	path, ok = h.live[id]
	return path, time.Time{}, ok, err
}

// idOf returns the id of the live cgroup at path (relative to its
// hierarchy's root, as /proc/PID/cgroup gives it), when the index knows it.
func (ix *cgroupIndex) idOf(path string, v1 bool) (uint64, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	h := ix.of(v1)
	if h == nil {
		return 0, false
	}
	id, ok := h.ids[path]
	return id, ok
}

// walkLocked rewalks h and merges: cgroups that vanished since the last
// walk move to h.gone. With w, each directory gets a watch as it is walked.
func (ix *cgroupIndex) walkLocked(h *hierarchy, w *cgroupWatch) error {
	h.lastWalk = ix.now()
	ix.walks++
	old := h.live
	h.live, h.ids = make(map[uint64]string, len(old)), make(map[string]uint64, len(old))
	err := walkCgroups(h.root, "/", 0, func(rel string, id uint64) {
		h.live[id], h.ids[rel] = rel, id
		if w != nil {
			w.add(h, rel)
		}
	})
	for id, p := range old {
		if _, ok := h.live[id]; !ok {
			h.gone.Add(id, goneCgroup{p, h.lastWalk})
		}
	}
	return err
}

// addedLocked records a directory created in h at rel, at depth, and what
// was created inside it before its watch was in place; it calls fn for
// each.
func (ix *cgroupIndex) addedLocked(h *hierarchy, rel string, depth int, w *cgroupWatch, fn func(rel string)) error {
	return walkCgroups(h.root, rel, depth, func(rel string, id uint64) {
		if old, ok := h.ids[rel]; ok && old != id {
			// The same path made again (a restarted container): the old
			// directory is gone even if its removal was not seen.
			delete(h.live, old)
			h.gone.Add(old, goneCgroup{rel, ix.now()})
		}
		h.live[id], h.ids[rel] = rel, id
		fn(rel)
		w.add(h, rel)
	})
}

// removedLocked moves the cgroup at rel to h.gone.
func (ix *cgroupIndex) removedLocked(h *hierarchy, rel string) {
	id, ok := h.ids[rel]
	if !ok {
		return
	}
	delete(h.ids, rel)
	delete(h.live, id)
	h.gone.Add(id, goneCgroup{rel, ix.now()})
}

// walkCgroups visits every directory under root/start (start being at
// depth below root), breadth first and within the walk bounds, calling fn
// with its path relative to root and its inode. Directories vanish while it
// runs (a container ending): those are skipped, not errors.
func walkCgroups(root, start string, depth int, fn func(rel string, id uint64)) error {
	type dir struct {
		rel   string
		depth int
	}
	queue := []dir{{start, depth}}
	var firstErr error
	note := func(err error) {
		if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
			firstErr = err
		}
	}
	for n := 0; len(queue) > 0 && n < walkMaxDirs; n++ {
		d := queue[0]
		queue = queue[1:]
		full := filepath.Join(root, d.rel)
		var st syscall.Stat_t
		if err := syscall.Stat(full, &st); err != nil {
			note(err)
			continue
		}
		fn(d.rel, st.Ino)
		if d.depth >= walkMaxDepth {
			continue
		}
		entries, err := os.ReadDir(full)
		if err != nil {
			note(err)
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				queue = append(queue, dir{filepath.Join(d.rel, e.Name()), d.depth + 1})
			}
		}
	}
	return firstErr
}
