// Package audit predicts, before any stop, how each running container will
// react to its stop signal. It reads the state of the container's main
// process (the one the runtime signals: the pid-namespace init, or another
// process when the container shares a pid namespace) and asks
// sigvocab.PredictFate what the kernel will do with the signal, then adds what
// the process does with a queued one (a handler, a sigtimedwait, a signalfd).
//
// A handler is not always a graceful stop. The kernel source also reads
// whether it is one-shot (SA_RESETHAND), and the main process's language
// runtime is recognised (containers/langrt): a one-shot handler that
// re-raises the signal (Node.js's own, when the application registers
// none) sends a namespace init a signal the kernel drops, so such an init
// is predicted ignored_by_init; the Go runtime's handler ends an init at
// once (exit 2) even then. Hints that tell the user to handle the signal
// name the runtime's own way (langrt's fixes).
//
// The state comes from the kernel first (tracer.ReadTaskStates, a BPF task
// iterator, which the caller passes in [Options]: this package links no
// BPF loader, so that kubectl-sigscope can read its [Result]) and from
// /proc when the iterator cannot load; each result says which. /proc lacks
// real_blocked: it cannot see a process waiting in sigtimedwait() (tini,
// docker-init) and predicts such an init drops the signal; and it shows no
// sa_flags, so for Node.js a handler is taken for the runtime's own
// (inferred from the runtime, and the hint says so).
//
// It owns the prediction and its hint, kept apart as in the timeline:
// [Predict] decides a typed [Prediction] (predict.go: the outcome, the
// kernel's fate and the [Cause]), and its words ([Prediction.Hint],
// words.go) turn the cause into the hint. The kernel's rules are
// tracer/sigvocab's (fate.go, and its words, Fate.Reason), reading the
// kernel is tracer's, container listing and /proc parsing are package
// container's, and the outcome words, the main process's name
// (timeline.MainRole) and the fixes a hint ends with are the timeline's
// (timeline.HandleFix, StopSignalFix, CleanExitFix: the words the
// episodes' hints use), so a prediction and the stop it predicts name one
// fix, worded once.
package audit
