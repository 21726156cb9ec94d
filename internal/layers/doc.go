// Package layers holds the repository's layout as a rule, and the test
// that keeps the code to it. It has no code of its own.
//
// The folders, in the order a signal travels through them (the design
// card's bpf/, tracer/, exporter/ and cmd/, with the resolution and episode
// stages between tracer and exporter, and api/ for outside code):
//
//	bpf/         the eBPF programs (C): where the kernel decides a signal's fate
//	tracer/      the vocabulary of events (sigvocab), the loader and ring reader
//	             that turn the kernel's records into events (tracer), a task's
//	             signal state from /proc (procsig)
//	containers/  which container, pod and runtime a process belongs to
//	             (container: the resolver and runtime clients; identity: the
//	             type; langrt; kubeclient)
//	episodes/    events grouped into stop episodes with a verdict (timeline),
//	             the pipeline that feeds it, why the kubelet stopped a pod
//	             (kubemeta), the audit of running containers
//	api/         the agent's HTTP API types, the only folder meant for code
//	             outside this repository
//	exporter/    where episodes and counters go: the sink every asynchronous
//	             output shares, the journal, Kubernetes Events, OTLP logs,
//	             Prometheus metrics
//	cmd/         the commands: sigscope (and its node agent),
//	             kubectl-sigscope (and its plugin) and bench (the benchmark)
//
// internal/ is the ground under all of them: escaping of untrusted strings
// (textsafe) and the retry backoff (retry), which import nothing of the
// product. test/ (the end-to-end tests, the harnesses they and the
// packages' own tests share: testutil, dockertest, critest; the scripts
// that build the cluster, CRI-O and the kernels) and deploy/ stand on top:
// they may use anything, and no stage imports them outside its tests.
//
// The rule (layers_test.go): a package imports only packages of its own
// folder or of a folder earlier in the list, so no import runs up from a
// stage to one that comes after it; tests are free.
package layers
