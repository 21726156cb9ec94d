// Package audit predicts, before any stop, how each running container will
// react to its stop signal. It reads the state of the container's main
// process (the one the runtime signals: the pid-namespace init, or another
// process when the container shares a pid namespace) and asks
// tracer.PredictFate what the kernel will do with the signal, then adds what
// the process does with a queued one (a handler, a sigtimedwait, a signalfd).
//
// The state comes from the kernel first (tracer.ReadTaskStates, a BPF task
// iterator) and from /proc when the iterator cannot load; each result says
// which. /proc lacks real_blocked: it cannot see a process waiting in
// sigtimedwait() (tini, docker-init) and predicts such an init drops the
// signal.
//
// It owns the prediction and its hint. The kernel's rules are tracer's (fate.go),
// container listing and /proc parsing are package container's, and the
// outcome words are the timeline's.
package audit
