// Package kubeplugin is `kubectl sigscope`: one cluster-wide view of the
// node agents' stop episodes and audits. It finds the agent pods of the
// DaemonSet and reads each agent's HTTP API (docs/api.md) through the API
// server's pod proxy, with the user's kubeconfig and RBAC only, so it needs
// no network path to the nodes. An agent that cannot be read is named, and
// the others still answer.
//
// It owns the plugin's commands, finding the agents (apiserver.go lists pods
// and nodes, decoding the fields it reads, rather than link client-go's
// clientset) and merging their answers. Episodes and audits are the
// timeline's and the audit's types; it links no BPF loader
// (cmd/kubectl-sigscope's deps_test.go).
package kubeplugin
