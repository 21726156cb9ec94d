// Package timeline turns sigscope's event stream into stop episodes, one per
// container stop: the stop signal sent to the container's main process,
// what the kernel did with it (sigvocab.Fate), the SIGKILL escalation, the main
// process's exit, the namespace cascade and the other processes' fates, with
// an outcome (graceful, ignored_by_init, ignored, handler_timeout, killed,
// oom_killed, exited; unfinished when a recording ends mid-stop, or when the
// stop may have begun before tracing did and what is left cannot tell) and a
// fix hint; and, when the kernel counted the container's network
// namespace's connections from the stop signal on, what the stop cost its
// clients (traffic.go), which the episode waits for before it completes.
// docs/timelines.md describes the outcomes and the fields.
//
// The engine is pure: no I/O, no root, and no clock. Time comes from the
// events (and from [Engine.Advance] when a live caller wants to close
// episodes while the stream is quiet), so a recording replayed offline gives
// the same episodes as the live trace did.
//
// Episodes are kept per container and follow its main process: the one
// the runtime started and sends the stop signal to. That is the init of the
// container's pid namespace when it has one of its own, and another process
// when it shares one (docker --pid container:X, a pod that shares its
// process namespace, --pid=host): the [identity.Info] passed with the
// events names the container and its main pid. Without one (no runtime to
// ask, a namespace made by unshare), the pid namespace stands for the
// container and its init is the main process; an episode begun so takes the
// container's ID when a later event names it. Processes of the host belong
// to no episode unless a runtime says they are a container's. A pod's
// sandbox (pause) container makes no episode: its end is a step of the
// pod's open episodes.
//
// An event goes one way through the engine: route → apply → settle →
// finish. [Engine.Add] routes it (route.go): the engine's indexes find the
// episodes it belongs to, or begin one, and give its role there. The
// episode applies it (apply.go): one switch on the event's kind changes its
// state, records the step's facts, and says what the engine must do next
// (settle, wait for the main process, complete), which the engine does
// (engine.go). When an episode completes, it is settled from the kernel's
// record alone (complete.go's completion, then build.go's settle, which
// Finish runs first): its steps in time order, the traffic's counts and
// the readings at the SIGKILL taken, its main process's runtime, its
// preStop hook, the grace the record shows. [Finish] finishes it, once
// (facts.go), as facts → causes → words:
//
//   - facts: what was learnt of it outside the kernel ([Facts]: the
//     resolver's name, the API server's records) is applied;
//   - outcome and causes: the outcome is decided from the facts (decide,
//     outcome.go; facts.killed is the one SIGKILL rule), and the causes
//     beside it (causes.go): why the main process did not act on the stop
//     signal, or still ran at the SIGKILL; what held the preStop hook; what
//     the clients lost and why. The tables of system calls are there;
//   - words: the words (words.go, and words_*.go by family) turn the
//     outcome and the causes into sentences: the steps' texts, the hint,
//     the traffic's verdict and hint, the summary and the endpoint race.
//
// All prose is in the words, the fixes the audit's hints end with
// included, and no rule is. A new stop pattern is a case in apply, a cause
// when it explains something new, and its sentences in the words.
//
// It does not read events, resolve containers or print anything by itself:
// cmd/sigscope feeds it and writes its episodes.
package timeline
