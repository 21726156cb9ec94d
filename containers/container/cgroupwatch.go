//go:build linux

package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxWatches bounds the inotify watches of one resolver: a node has a few
// thousand cgroups; past this (or past fs.inotify.max_user_watches) the
// index falls back to rewalking on a miss.
const maxWatches = 16384

// cgroupWatch keeps a cgroupIndex current with inotify: every directory of
// the watched hierarchies has a watch for subdirectories created and
// removed. mkdir and rmdir on cgroupfs go through the VFS, which notifies,
// whoever makes them (runc, systemd, the kubelet).
//
// Its fields other than f and done are guarded by the index's lock.
type cgroupWatch struct {
	ix      *cgroupIndex
	f       *os.File // the inotify descriptor, non-blocking, in Go's poller
	fd      int
	wds     map[int32]*hierarchyDir
	limited bool // stopped adding watches: the tree is not fully covered
	onNew   func(rel string)
	onErr   func(error)
	done    chan struct{}
}

// hierarchyDir is what a watch descriptor watches.
type hierarchyDir struct {
	h   *hierarchy
	rel string
}

// watch walks every hierarchy putting a watch on each directory, then
// follows changes until close. onNew is called with each directory's path,
// those there now and those created later (never under the index's lock,
// never concurrently); onErr with errors that made the index incomplete.
func (ix *cgroupIndex) watch(onNew func(rel string), onErr func(error)) (*cgroupWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &cgroupWatch{
		ix:    ix,
		f:     os.NewFile(uintptr(fd), "inotify"),
		fd:    fd,
		wds:   make(map[int32]*hierarchyDir),
		onNew: onNew,
		onErr: onErr,
		done:  make(chan struct{}),
	}
	ix.mu.Lock()
	paths, errs := w.rewalkLocked(nil, nil)
	ix.mu.Unlock()
	for _, err := range errs {
		onErr(err)
	}
	for _, p := range paths {
		// A cgroup left empty (a runtime that died, or a pod's leftovers
		// the kubelet has not removed yet) holds no process, so no event
		// can come from it: not worth asking a runtime about. One made
		// from now on is empty at first, and is always passed on.
		if ix.populated(p) {
			onNew(p)
		}
	}
	go w.run()
	return w, nil
}

// populated reports whether the cgroup rel holds a process in some
// hierarchy, or may: false only when every hierarchy that has it says,
// in its cgroup.procs, that it holds none.
func (ix *cgroupIndex) populated(rel string) bool {
	seen := false
	for _, h := range ix.hier {
		if h == nil {
			continue
		}
		procs, err := os.ReadFile(filepath.Join(h.root, rel, "cgroup.procs"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil || len(procs) > 0:
			return true
		}
		seen = true
	}
	return !seen
}

// rewalkLocked walks every hierarchy, watching each directory, and appends
// the paths of all their directories and the walks' errors. Called under the
// index's lock.
func (w *cgroupWatch) rewalkLocked(paths []string, errs []error) ([]string, []error) {
	for _, h := range w.ix.hier {
		if h == nil {
			continue
		}
		if err := w.ix.walkLocked(h, w); err != nil {
			errs = append(errs, err)
		}
		for _, p := range h.live {
			paths = append(paths, p)
		}
	}
	return paths, errs
}

// add puts a watch on h's directory rel. Called under the index's lock.
func (w *cgroupWatch) add(h *hierarchy, rel string) {
	if w.limited {
		return
	}
	if len(w.wds) >= maxWatches {
		w.limited = true
		w.onErr(fmt.Errorf("more than %d cgroup directories: not watching the rest, rewalking on a miss instead", maxWatches))
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(h.root, rel), unix.IN_CREATE|unix.IN_DELETE|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return // removed meanwhile
	case errors.Is(err, unix.ENOSPC):
		w.limited = true
		w.onErr(errors.New("inotify watch limit reached (sysctl fs.inotify.max_user_watches): not watching the rest of the cgroup tree, rewalking on a miss instead"))
		return
	case err != nil:
		w.limited = true
		w.onErr(fmt.Errorf("inotify watch on %s: %w", filepath.Join(h.root, rel), err))
		return
	}
	w.wds[int32(wd)] = &hierarchyDir{h: h, rel: rel}
}

func (w *cgroupWatch) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.onErr(fmt.Errorf("reading inotify events: %w", err))
			}
			return
		}
		for _, p := range w.handle(buf[:n]) {
			w.onNew(p)
		}
	}
}

// handle applies one read's events to the index and returns the paths of
// the directories created.
func (w *cgroupWatch) handle(buf []byte) []string {
	var created []string
	var errs []error
	ix := w.ix
	ix.mu.Lock()
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:4]))
		mask := binary.NativeEndian.Uint32(buf[4:8])
		n := int(binary.NativeEndian.Uint32(buf[12:16]))
		if len(buf) < unix.SizeofInotifyEvent+n {
			break
		}
		name := string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n], "\x00"))
		buf = buf[unix.SizeofInotifyEvent+n:]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			// Events were lost: the tree may hold anything now.
			created, errs = w.rewalkLocked(created, errs)
		case mask&unix.IN_IGNORED != 0:
			delete(w.wds, wd) // the directory is gone, and its watch with it
		case mask&unix.IN_ISDIR == 0:
		case mask&unix.IN_CREATE != 0:
			if d, ok := w.wds[wd]; ok {
				rel := filepath.Join(d.rel, name)
				err := ix.addedLocked(d.h, rel, depthOf(rel), w, func(p string) { created = append(created, p) })
				if err != nil {
					errs = append(errs, err)
				}
			}
		case mask&unix.IN_DELETE != 0:
			if d, ok := w.wds[wd]; ok {
				ix.removedLocked(d.h, filepath.Join(d.rel, name))
			}
		}
	}
	ix.mu.Unlock()
	for _, err := range errs {
		w.onErr(err)
	}
	return created
}

// depthOf is how many directories rel is below its hierarchy's root.
func depthOf(rel string) int {
	return strings.Count(strings.Trim(rel, "/"), "/") + min(1, len(strings.Trim(rel, "/")))
}

// watches says how many directories are watched, and the most that will
// be. Called under the index's lock.
func (w *cgroupWatch) watches() (n, max int) { return len(w.wds), maxWatches }

// close stops the watch and waits for its goroutine.
func (w *cgroupWatch) close() error {
	err := w.f.Close()
	<-w.done
	return err
}
