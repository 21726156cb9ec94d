//go:build !linux

package tracer

// NewClock has no CLOCK_BOOTTIME to read off Linux: the tracer runs on
// Linux only, and this lets the package's types (events, signals, fates)
// build elsewhere for the clients that decode them (kubectl-sigscope).
func NewClock() Clock { return Clock{} }
