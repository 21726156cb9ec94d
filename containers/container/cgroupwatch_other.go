//go:build !linux

package container

import "errors"

// cgroupWatch follows cgroupfs with inotify on Linux only; elsewhere the
// package builds for the clients that decode its types, and a resolver
// there has no watch (its cgroup lookups fall back to walking).
type cgroupWatch struct{}

func (ix *cgroupIndex) watch(func(rel string), func(error)) (*cgroupWatch, error) {
	return nil, errors.New("cgroup watch: needs Linux (inotify)")
}

func (w *cgroupWatch) add(*hierarchy, string) {}

func (w *cgroupWatch) close() error { return nil }

func (w *cgroupWatch) watches() (n, max int) { return 0, 0 }
