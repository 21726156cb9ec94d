package identity

import "strings"

// Filter is the one rule that picks a container by what a user typed: an
// ID prefix or a name (--container, ?container=), and a pod as namespace
// and name (--pod, ?namespace=&pod=). `sigscope trace` and `timeline`
// (live and from a recording) and the agent's /api/v1/episodes, which the
// kubectl plugin and `timeline --server` query, all use it.
type Filter struct {
	Container string // an ID prefix or the runtime's name; "" matches any
	Namespace string // the pod's namespace; "" matches any
	Pod       string // the pod's name; "" matches any
}

// Active reports whether the filter picks anything out.
func (f Filter) Active() bool { return f.Container != "" || f.Namespace != "" || f.Pod != "" }

// Matches reports whether a container passes.
func (f Filter) Matches(c Identity) bool {
	switch {
	case f.Container != "" && c.Name != f.Container && !strings.HasPrefix(c.ID, f.Container),
		f.Namespace != "" && c.Namespace != f.Namespace,
		f.Pod != "" && c.Pod != f.Pod:
		return false
	}
	return true
}

// MatchesInfo is Matches for a resolved container; nil (no container)
// passes only an inactive filter.
func (f Filter) MatchesInfo(c *Info) bool {
	if c == nil {
		return !f.Active()
	}
	return f.Matches(c.Identity)
}
