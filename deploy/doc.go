// Package deploy holds no code: it is the home of the Kubernetes deployment
// (the Helm chart in chart/sigscope, the manifests rendered from it in
// manifests/, the image's Dockerfile, the Prometheus alerting rules in
// prometheus/) and of the tests that check them
// without a cluster or root.
//
// The tests decode every rendered object strictly into k8s.io/api types and
// check the security settings the chart promises: hostPID, all capabilities
// dropped and only the documented ones added back (each with a comment in the
// template saying why), no privilege escalation, a read-only root filesystem,
// every host path mounted read-only, probes, tolerations, resources, and RBAC
// only with --kube-events. They render the chart again with helm (pinned in
// render.sh, run from the Go module proxy) to catch a stale manifest, run the
// Dockerfile's `go build` line to check the binary is static, and check that
// the Grafana dashboard in docs/ queries only documented metrics and links
// the alerts that read them. The Prometheus alerting rules in prometheus/
// are checked here too: each alert documented in docs/alerts.md and
// unit-tested firing and not, promtool run on them and on the chart's
// PrometheusRule, which embeds a copy of the file. The krew archives and the
// image carry the repository's LICENSE.
//
// What the agent does on a node is not tested here: cmd/sigscope and the
// agent package own that.
package deploy
