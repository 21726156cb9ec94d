package testutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultBuildCache is where the pinned builds are cached when
// SIGSCOPE_CACHE is unset.
const DefaultBuildCache = "/var/cache/sigscope"

// BuildCache is the directory of part in the cache of the pinned builds,
// outside any checkout and shared by every clone on the machine: "cluster"
// (test/cluster/build.sh: cluster/bin/runc, ...), "crio"
// (test/crio/build.sh), "kernels" (test/kernels/run.sh). It is
// SIGSCOPE_CACHE (an absolute path), or DefaultBuildCache when that is
// unset, joined with part; the same rule as test/cache.sh's cache_dir for
// the scripts, which build there. The path is as given, not resolved:
// filepath.EvalSymlinks gives what the scripts print and /proc/PID/exe shows.
func BuildCache(part string) (string, error) {
	root := os.Getenv("SIGSCOPE_CACHE")
	if root == "" {
		root = DefaultBuildCache
	}
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("SIGSCOPE_CACHE=%s: want an absolute path", root)
	}
	return filepath.Join(root, part), nil
}
