// Package apiv1 holds the types of the node agent's HTTP API v1 that are
// not episodes or audits (those are timeline.Episode and audit.Result), so
// that clients such as kubectl-sigscope use them without the agent itself.
// docs/api.md documents the API.
package apiv1
