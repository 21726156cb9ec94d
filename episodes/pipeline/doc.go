// Package pipeline is sigscope's one live path from the kernel to the user:
// the tracer's events, each with the containers of its target and sender
// from the resolver, fed to the timeline engine, whose episodes come out as
// they complete. `sigscope trace`, `sigscope timeline` and `sigscope serve`
// all run it, so an event is resolved and an episode decided the same way
// whichever command shows it.
//
// It owns the order of things (resolve, then show the event, then feed the
// engine; complete quiet episodes when the ring is drained; flush at the
// end), not their rules: the fate of a signal is tracer/sigvocab's, a
// container's identity container's (the type, containers/identity's), an
// outcome timeline's. The live engine hands out settled episodes; the
// pipeline gathers what was learnt of each outside the kernel (the name
// the resolver knows now: its runtime may have answered since the stop
// began; the API server's record of its pod, kubemeta's) and
// timeline.Finish finishes it (handOver). One whose failing runtime is
// still being asked waits for the name a little (up to 10 s: naming.go),
// or says why it has none. The counts of a stop's connections begun from a
// preStop hook follow timeline.HookCounts' rules (hooks.go). Replay runs a
// recording through the engine as `sigscope timeline -f` does, for the
// command and the tests.
package pipeline
