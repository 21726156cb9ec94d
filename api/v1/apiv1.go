package v1

import "time"

// Version is the API's version, the path's /api/v1.
const Version = "v1"

// Info is GET /api/v1/info: who this agent is and what its episode ring
// holds, so that a client can tell a window it cannot fully see.
type Info struct {
	APIVersion string    `json:"api_version"`
	Node       string    `json:"node,omitempty"`
	Version    string    `json:"version,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	Ready      bool      `json:"ready"`
	Kubernetes bool      `json:"kubernetes"` // stop reasons and owners from the API server
	Episodes   struct {
		Kept     int       `json:"kept"`
		Capacity int       `json:"capacity"`
		Evicted  uint64    `json:"evicted"`            // older episodes pushed out of the ring
		OldestAt time.Time `json:"oldest_at,omitzero"` // the earliest start among the kept episodes
		// EvictedUntil is the latest start among the episodes pushed
		// out: a window that begins before it is missing some.
		EvictedUntil time.Time `json:"evicted_until,omitzero"`
		LastID       uint64    `json:"last_id"`
		// Reloaded is how many of the kept episodes the agent read back
		// from its node journal at start: from before StartedAt, by an
		// agent that ran before it.
		Reloaded int `json:"reloaded,omitempty"`
		// Journal: a window (since) that reaches before the kept episodes
		// is answered from the node journal too, as far as it goes back
		// (an agent with --journal-dir); pushed-out episodes are then
		// missing only where the journal rotated them away.
		Journal bool `json:"journal,omitempty"`
	} `json:"episodes"`
}
