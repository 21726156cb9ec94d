package main

import (
	"fmt"
	"strings"

	"github.com/sigscope/sigscope/containers/identity"
)

// newContainerFilter reads --container (an ID prefix or a name) and --pod
// (namespace/name) into the one match rule, identity.Filter.
func newContainerFilter(containerArg, podArg string) (identity.Filter, error) {
	f := identity.Filter{Container: containerArg}
	if podArg != "" {
		ns, name, ok := strings.Cut(podArg, "/")
		if !ok || ns == "" || name == "" {
			return f, usageError{fmt.Errorf("--pod %q: want namespace/name", podArg)}
		}
		f.Namespace, f.Pod = ns, name
	}
	return f, nil
}

// matchAny reports whether either container of an event passes f: the
// event's target's, or its sender's.
func matchAny(f identity.Filter, a, b *identity.Info) bool {
	if !f.Active() {
		return true
	}
	return a != nil && f.MatchesInfo(a) || b != nil && f.MatchesInfo(b)
}
