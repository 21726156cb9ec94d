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
// outcome timeline's. A completed episode is named from the resolver's
// cache once more before it goes out (its runtime may have answered since
// the stop began), and one whose failing runtime is still being asked waits
// for the name a little (up to 10 s), or says why it has none. Replay runs a recording through the engine as
// `sigscope timeline -f` does, for the command and the tests.
package pipeline
