package tracer

// WithOOMTIDOnly returns o with OOM events reduced to the victim's thread
// id, as the 1-argument mark_victim reports them (tracer.go).
func WithOOMTIDOnly(o Options) Options {
	o.oomTIDOnly = true
	return o
}
