// Package textsafe makes untrusted strings (task comms, cgroup paths,
// container names: anything a process can set) safe to show. [Terminal]
// escapes them for a terminal, so control bytes cannot move the cursor or
// forge lines; [UTF8] makes them valid UTF-8 for JSON and metric labels
// while keeping every original byte recoverable; [AppendJSON] writes that
// form straight into a JSON buffer, as encoding/json would, without
// allocating, for the encoders that run per event.
//
// It owns no I/O; callers pick the function that fits their output.
package textsafe
