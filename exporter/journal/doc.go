// Package journal is the node journal of `sigscope serve --journal-dir`:
// every completed episode appended as one line of the API's episode JSON
// to size-bounded, rotated files on the node, and read back when the agent
// starts (so that /api/v1/episodes outlives a restart) and by `sigscope
// timeline -f`.
//
// It owns the files (their names, rotation, the bound of Files × FileSize,
// the lock that keeps a second agent out), the writing of one line, the
// reading of a journal that power loss cut mid-line, and the journal's
// metrics (a prometheus.Collector). The writer's queue, its worker
// ([Journal.Run], in the agent's errgroup), the backoff between failed
// writes and the counts are package sink's, shared with the other
// outputs; a line that failed stays in the worker's hand until the disk
// takes it, since a write fails for the disk, never for its line. It does
// not own the episode JSON (timeline's MarshalJSON and UnmarshalJSON) nor
// its line (apiv1.EpisodeLine: a journal line is the object the API
// serves), the episode ids (the agent's ring gives them and continues from
// [Journal.Loaded]'s last id), nor where episodes come from.
package journal
