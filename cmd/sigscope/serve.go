package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/sigscope/sigscope/cmd/sigscope/agent"
	"github.com/sigscope/sigscope/containers/kubeclient"
	"github.com/sigscope/sigscope/exporter/otlplog"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func newServeCmd() *cobra.Command {
	var (
		opts        agent.Options
		signals     string
		listen      []string
		kubeconfig  string
		auditEvery  time.Duration
		maxEpisodes int
		rt          runtimeFlags
		jf          journalFlags
		otlp        otlplog.Options
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the node agent: Prometheus metrics, stop episodes and audits over HTTP",
		Long: `Trace continuously and serve, on ` + agent.DefaultListenAddress + ` by default:
  /metrics           Prometheus metrics (docs/metrics.md)
  /healthz, /readyz  liveness; readiness once the BPF programs are attached
  /api/v1/info       the agent: node, version, what its episode ring holds
  /api/v1/episodes   recent stop episodes (?namespace= &pod= &container= &outcome= &owner=
                     &since= &until= &before= &limit=; docs/api.md)
  /api/v1/audit      every running container's stop prediction (?namespace= &pod=)

TLS and basic auth come from --web.config.file (the exporter-toolkit format that
Prometheus exporters share). With --kube-events, Warning events are posted on
pods whose main process never acted on the stop signal or that were SIGKILLed after their
grace period (in-cluster credentials, or --kubeconfig); while the API server
does not answer they wait in a bounded queue and are retried, and
sigscope_kube_events_total counts what was sent, failed or dropped.

With --journal-dir every completed episode is also appended, as the JSON line
/api/v1/episodes serves for it, to a journal of rotated files bounded by
--journal-files × --journal-file-size (default 8 × 7M = 56 MiB): read back at
start, so that episodes and their ids outlive a restart, and readable with
"sigscope timeline -f DIR". A full or read-only disk never stops tracing
(sigscope_journal_errors_total; docs/deploy.md).

With --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT),
one OpenTelemetry log record per completed stop episode is sent over OTLP/HTTP
(protobuf) or gRPC (--otlp-protocol, OTEL_EXPORTER_OTLP_PROTOCOL); headers, TLS
and timeout come from the standard OTEL_EXPORTER_OTLP_* variables
(docs/otlp.md). While the collector does not answer, records wait in a bounded
queue and are retried; sigscope_otlp_log_records_{sent,failed,dropped}_total
count them.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sigs, err := sigvocab.ParseSignalSet(signals)
			if err != nil {
				return usageError{fmt.Errorf("--signals: %w", err)}
			}
			opts.Signals = sigs
			opts.ListenAddresses = listen
			opts.AuditInterval = auditEvery
			opts.MaxEpisodes = maxEpisodes
			if err := jf.apply(&opts); err != nil {
				return err
			}
			ro := rt.options()
			opts.DockerSocket, opts.CRISockets, opts.NoRuntimeFiles = ro.DockerSocket, ro.CRISockets, ro.NoRuntimeFiles
			opts.Logger = slog.Default()
			opts.Audited = func(first bool) { releaseMemory(first, opts.Logger) }
			opts.Version, opts.Revision = buildVersion()
			if opts.KubeEvents {
				if opts.NodeName == "" {
					return usageError{fmt.Errorf("--kube-events needs --node-name (or NODE_NAME from the downward API)")}
				}
				if opts.KubeClient, err = kubeClient(kubeconfig); err != nil {
					return fmt.Errorf("kubernetes client: %w", err)
				}
			}
			if otlplog.Configured(otlp.Endpoint) {
				if otlp.Protocol, err = otlplog.ResolveProtocol(otlp.Protocol); err != nil {
					return usageError{err}
				}
				if otlp.Endpoint != "" {
					if _, err := otlplog.EndpointURL(otlp.Endpoint, otlp.Protocol); err != nil {
						return usageError{fmt.Errorf("--otlp-endpoint: %w", err)}
					}
				}
				opts.OTLP = &otlp
			}
			a, err := agent.New(opts)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&listen, "web.listen-address", []string{agent.DefaultListenAddress}, "addresses to listen on (repeatable)")
	fl.StringVar(&opts.WebConfigFile, "web.config.file", "", "exporter-toolkit web configuration: TLS and basic auth")
	fl.StringVar(&opts.HealthAddress, "web.health-address", "", "also serve /healthz and /readyz alone on this address, in plain HTTP without authentication (probes when --web.config.file sets basic auth)")
	fl.StringVar(&signals, "signals", "default", `signals to trace ("default", "all" or a list)`)
	registerRingSize(fl, &opts.RingSize)
	fl.BoolVar(&opts.PodLabels, "pod-labels", false, "add namespace, pod and container labels to the counters (capped by --max-series)")
	fl.IntVar(&opts.MaxSeries, "max-series", 1000, "with --pod-labels, series per metric before one overflow series")
	fl.BoolVar(&opts.KubeEvents, "kube-events", false, "post Kubernetes Events on pods (StopSignalIgnored, ContainerKilledAfterGracePeriod)")
	fl.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, for Kubernetes Events (default $NODE_NAME)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for --kube-events outside a cluster (default: in-cluster)")
	fl.DurationVar(&auditEvery, "audit-interval", agent.DefaultAuditInterval, "how often every running container is audited")
	fl.IntVar(&maxEpisodes, "max-episodes", agent.DefaultMaxEpisodes, "recent stop episodes kept for /api/v1/episodes")
	jf.register(fl)
	fl.StringVar(&otlp.Endpoint, "otlp-endpoint", "", "send OpenTelemetry log records of stop episodes to this OTLP URL, as OTEL_EXPORTER_OTLP_ENDPOINT means it (HTTP: /v1/logs is appended; default: the OTEL_EXPORTER_OTLP_[LOGS_]ENDPOINT variables; docs/otlp.md)")
	fl.StringVar(&otlp.Protocol, "otlp-protocol", "", `OTLP protocol, "http/protobuf" or "grpc" (default $OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)`)
	fl.IntVar(&otlp.QueueSize, "otlp-queue-size", otlplog.DefaultQueueSize, "OTLP log records kept while the collector does not answer; past it the oldest are dropped (and counted)")
	fl.DurationVar(&otlp.RetryMax, "otlp-retry-max", otlplog.DefaultRetryMax, "longest wait between tries while the collector does not answer (from 1s, doubling)")
	rt.register(fl)
	return cmd
}

func kubeClient(kubeconfig string) (kubeclient.Client, error) {
	cfg, err := kubeclient.Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "sigscope"
	return kubeclient.New(cfg)
}

// buildVersion reads the module version and VCS revision the binary was
// built with, for sigscope_build_info.
func buildVersion() (version, revision string) {
	version, revision = "devel", "unknown"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return
}
