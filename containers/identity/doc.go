// Package identity is what sigscope knows of a container, without the
// means of asking: the one identity type ([Identity]: ID, name, image,
// runtime, pod, namespace, pod UID; its short ID, display name and order),
// what the runtime said about the container besides ([Info]: its main
// process, whether it is a pod's sandbox, its stop settings, a preStop
// [Hook]), its JSON in sigscope's outputs ([Summary], read by its tags and
// written by one hand-written writer: [Info.AppendJSON] for `trace -o
// json`, [Summary.MarshalJSON] for the rest), the rule that picks a container
// by what a user typed ([Filter]), a running container with its main pid
// ([Running]) and the stop signals the runtimes said they sent
// ([StopHistory]).
//
// Package container fills these in from cgroups and the runtimes' APIs;
// the timeline, the audit, the outputs and the kubectl plugin read them.
// It is a leaf apart from container so that what only reads identities
// (the plugin, built for macOS too) links none of the runtimes' clients:
// no gRPC, no CRI API (cmd/kubectl-sigscope/deps_test.go). It reads no
// file and asks nothing.
package identity
