// Package timeline turns sigscope's event stream into stop episodes, one per
// container stop: the stop signal sent to the container's PID 1, what the
// kernel did with it, the SIGKILL escalation, the init's exit, the namespace
// cascade and the other processes' fates, with an outcome (graceful,
// ignored_by_init, handler_timeout, killed, oom_killed, exited; unfinished
// when a recording ends mid-stop) and a fix hint.
// docs/timelines.md describes the outcomes and the fields.
//
// The engine is pure: no I/O, no root, and no clock. Time comes from the
// events (and from [Engine.Advance] when a live caller wants to close
// episodes while the stream is quiet), so a recording replayed offline gives
// the same episodes as the live trace did.
//
// Episodes are kept per pid namespace, not per container ID: the kernel facts
// an episode is made of (PID 1, the cascade its exit triggers) are facts of a
// pid namespace, and a container has one. This way events whose container
// could not be resolved still join their container's episode, and namespaces
// made by unshare or an unknown runtime get episodes too. The
// [container.Info] passed with the events only names the episode. Processes
// of the host's pid namespace are ignored, containers run with the host's pid
// namespace (docker --pid=host) included: they have no PID 1 of their own.
//
// It does not read events, resolve containers or print anything by itself:
// cmd/sigscope feeds it and writes its episodes.
package timeline
