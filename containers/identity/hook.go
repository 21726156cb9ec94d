package identity

// Hook is a container lifecycle hook (Kubernetes preStop): what runs
// before the stop signal, inside the container (exec) or outside it.
type Hook struct {
	Kind    string   `json:"kind"`              // "exec", "http" or "sleep"
	Command []string `json:"command,omitempty"` // exec: the command
	URL     string   `json:"url,omitempty"`     // http: path and port, as the spec gives them
	Seconds int      `json:"seconds,omitempty"` // sleep
}
