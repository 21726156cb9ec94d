package main

import (
	"log/slog"
	"runtime/debug"
)

// releaseMemory gives memory back to the kernel after each of the agent's
// audits (agent.Options.Audited); first is the end of start-up.
//
// Loading BPF programs parses the kernel's BTF, which leaves 3-5 MB of
// garbage: at start-up (the tracer), and when the agent's task iterator is
// loaded, at the first audit that has containers to read (it is then kept
// loaded: tracer.TaskIter) or again when a node's containers outgrow its
// map. The runtime would return those pages only gradually, and not before
// its next collection, which an idle agent, allocating little, may not reach
// for minutes: it would idle at the loads' high-water mark. Which audit
// followed a load is not worth tracking: a collection and a scavenge of a
// heap of about 2 MB live cost about a millisecond, every AuditInterval
// (30 s).
func releaseMemory(first bool, log *slog.Logger) {
	debug.FreeOSMemory()
	if first {
		log.Debug("start-up memory released")
	}
}
