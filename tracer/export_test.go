package tracer

// WithOOMTIDOnly returns o with OOM events reduced to the victim's thread
// id, as the 1-argument mark_victim reports them (tracer.go).
func WithOOMTIDOnly(o Options) Options {
	o.oomTIDOnly = true
	return o
}

// WithHelperReads returns o with the programs reading as on kernels without
// bpf_rdonly_cast: a helper call for each read at a run-time address.
func WithHelperReads(o Options) Options {
	o.helperReads = true
	return o
}

// WithCompatObject returns o with the programs built for kernels without
// bpf_get_current_task_btf() loaded whatever the kernel has.
func WithCompatObject(o Options) Options {
	o.compat = true
	return o
}
