package container

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// warnMissing warns once about each socket in given, the ones the user
// named, that does not exist. A missing socket only costs enrichment;
// failures to reach it later are logged at debug.
func (r *Resolver) warnMissing(given []string) {
	missing := 0
	for _, s := range given {
		fi, err := os.Stat(s)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			err = pe.Err // the path is the endpoint already
		case err == nil && fi.Mode()&os.ModeSocket == 0:
			err = errors.New("not a socket")
		}
		if err == nil {
			continue
		}
		if slices.Contains(r.opts.CRISockets, s) {
			missing++
		}
		r.errMu.Lock()
		first := !r.warned[s]
		r.warned[s] = true
		r.errMu.Unlock()
		if first {
			r.log.Warn("container runtime socket not found; container IDs still come from cgroup paths", "endpoint", s, "err", err)
		}
	}
	if missing > 0 && missing == len(r.opts.CRISockets) {
		// fromCRI's "no CRI socket found" would say it again.
		r.errMu.Lock()
		r.warned[strings.Join(r.opts.CRISockets, " ")] = true
		r.errMu.Unlock()
	}
}

// fail counts an error from source and logs it: at warn the first time
// since the endpoint (a socket path; "" for /proc and cgroups) last
// worked, at debug after that, so an unreachable runtime writes one line,
// not one per container, and each of two broken CRI sockets says so once.
// A runtime endpoint is not asked again for retryInterval, so a hung
// runtime costs one timeout per interval, not one per new container.
func (r *Resolver) fail(source, endpoint string, err error) {
	key := endpoint
	if key == "" {
		key = source
	}
	var sock fileID
	if endpoint != "" {
		sock = socketFile(endpoint)
	}
	r.errMu.Lock()
	r.errs[source]++
	first := !r.warned[key]
	r.warned[key] = true
	if endpoint != "" {
		r.downTil[endpoint] = r.now().Add(r.retryInterval)
		r.downSock[endpoint] = sock
	}
	r.errMu.Unlock()
	attrs := []any{"source", source}
	if endpoint != "" {
		attrs = append(attrs, "endpoint", endpoint)
	}
	attrs = append(attrs, "err", err)
	if first {
		r.log.Warn("container metadata source failed; container IDs still come from cgroup paths", attrs...)
	} else {
		r.log.Debug("container metadata source failed", attrs...)
	}
}

// ok notes that endpoint of source answered.
func (r *Resolver) ok(source, endpoint string) {
	r.errMu.Lock()
	was := r.warned[endpoint]
	r.warned[endpoint] = false
	delete(r.downTil, endpoint)
	delete(r.downSock, endpoint)
	r.errMu.Unlock()
	if was {
		r.log.Info("container metadata source answers again", "source", source, "endpoint", endpoint)
	}
}

// isDown reports whether endpoint failed less than retryInterval ago and
// is the same socket still: a daemon restarted since (dockerd, containerd)
// has made a new one, and the containers started right after it are named
// at once, not retryInterval later.
func (r *Resolver) isDown(endpoint string) bool {
	r.errMu.Lock()
	until, ok := r.downTil[endpoint]
	sock := r.downSock[endpoint]
	r.errMu.Unlock()
	if !ok || !r.now().Before(until) {
		return false
	}
	return socketFile(endpoint) == sock
}

// fileID is a file's identity; zero for none. The modification time is
// part of it: a file system may give a new socket the inode of the one
// just removed (ext4 does), but not the same time.
type fileID struct {
	dev, ino uint64
	mtime    int64
}

// socketFile is the identity of the socket file at path, zero when there
// is none (a daemon that stopped cleanly removed it).
func socketFile(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id
}

// Errors returns how many errors each source has had since the resolver
// was made: "docker", "cri", "proc", "cgroup". Monotonic, never reset.
func (r *Resolver) Errors() map[string]uint64 {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	out := make(map[string]uint64, len(r.errs))
	for k, v := range r.errs {
		out[k] = v
	}
	return out
}
