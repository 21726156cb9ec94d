// Package v1 (imported as apiv1) holds the types of the node agent's HTTP API v1 that are
// not episodes or audits (those are timeline.Episode and audit.Result), so
// that clients such as kubectl-sigscope use them without the agent itself:
// /api/v1/info's answer, and the queries of /api/v1/episodes and
// /api/v1/audit, which the agent parses and the clients write with the same
// type (query.go); and an episode's encoding as the API writes it
// ([EpisodeLine]), which the node journal writes too.
// docs/api.md documents the API.
package v1
