package main

import (
	"fmt"
	"strings"

	"github.com/sigscope/sigscope/container"
)

// containerFilter matches --container (an ID prefix or a name) and --pod
// (namespace/name).
type containerFilter struct {
	container string
	namespace string
	pod       string
}

func newContainerFilter(containerArg, podArg string) (containerFilter, error) {
	f := containerFilter{container: containerArg}
	if podArg != "" {
		ns, name, ok := strings.Cut(podArg, "/")
		if !ok || ns == "" || name == "" {
			return f, usageError{fmt.Errorf("--pod %q: want namespace/name", podArg)}
		}
		f.namespace, f.pod = ns, name
	}
	return f, nil
}

func (f containerFilter) active() bool { return f.container != "" || f.pod != "" }

// matchAny reports whether either container passes the filter.
func (f containerFilter) matchAny(a, b *container.Info) bool {
	return f.match(a) || (b != nil && f.match(b))
}

func (f containerFilter) match(c *container.Info) bool {
	if !f.active() {
		return true
	}
	if c == nil {
		return false
	}
	if f.container != "" && !strings.HasPrefix(c.ID, f.container) && c.Name != f.container {
		return false
	}
	if f.pod != "" && (c.Namespace != f.namespace || c.Pod != f.pod) {
		return false
	}
	return true
}
