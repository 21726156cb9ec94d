package identity

import "path/filepath"

// Hook is a container lifecycle hook (Kubernetes preStop): what runs
// before the stop signal, inside the container (exec) or outside it.
type Hook struct {
	Kind    string   `json:"kind"`              // "exec", "http" or "sleep"
	Command []string `json:"command,omitempty"` // exec: the command
	URL     string   `json:"url,omitempty"`     // http: path and port, as the spec gives them
	Seconds int      `json:"seconds,omitempty"` // sleep
}

// RunsAs reports whether a process named comm (the kernel's 15 bytes of a
// program's name) is this exec hook's: the one rule by which an exec into
// the container is taken for its preStop hook.
func (h *Hook) RunsAs(comm string) bool {
	if h == nil || h.Kind != "exec" || len(h.Command) == 0 {
		return false
	}
	name := filepath.Base(h.Command[0])
	if len(name) > 15 {
		name = name[:15]
	}
	return name == comm
}
