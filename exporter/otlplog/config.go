package otlplog

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The protocols: OTEL_EXPORTER_OTLP_PROTOCOL's values.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Options configures a [Sender]. Besides these, the exporter reads the
// standard variables itself: OTEL_EXPORTER_OTLP_[LOGS_]HEADERS, _TIMEOUT,
// _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY, _INSECURE, _COMPRESSION.
type Options struct {
	// Endpoint is a URL with what OTEL_EXPORTER_OTLP_ENDPOINT means: for
	// HTTP, /v1/logs is appended to its path; for gRPC its host and port
	// are used, and http:// means no TLS. "" leaves the endpoint to
	// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (used as is) or
	// OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC; "" reads
	// OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL,
	// and defaults to ProtocolHTTP.
	Protocol string
	// QueueSize bounds the records waiting for the collector; past it the
	// oldest is dropped. A batch whose export failed goes back within it.
	// 0 means DefaultQueueSize.
	QueueSize int
	// BatchSize bounds the records of one export. 0 means DefaultBatchSize.
	BatchSize int
	// RetryMin and RetryMax bound the wait after a transient failure: it
	// starts at RetryMin and doubles up to RetryMax. 0 means the defaults.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds the last try of what is queued when the Sender
	// stops. 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration

	NodeName string // k8s.node.name of the resource, when set
	Version  string // service.version of the resource
	Logger   *slog.Logger

	exporter sdklog.Exporter // tests: instead of the OTLP exporter
}

// Configured reports whether OTLP logs are asked for: an endpoint given, or
// one of the standard endpoint variables set.
func Configured(endpoint string) bool {
	return endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// defaults fills what the Sender reads itself; the waits and the drain
// bound are left to the sink's defaults, which are the Sender's.
func (o *Options) defaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ResolveProtocol is the protocol o asks for, from the variables when
// Protocol is "": ProtocolHTTP or ProtocolGRPC, else an error.
func ResolveProtocol(p string) (string, error) {
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
	}
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("OTLP protocol %q: want %s or %s (http/json is not supported)", p, ProtocolGRPC, ProtocolHTTP)
}

// EndpointURL checks an endpoint given as a flag and, for HTTP, appends
// /v1/logs to its path as the SDK does to OTEL_EXPORTER_OTLP_ENDPOINT.
func EndpointURL(endpoint, protocol string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want a URL such as http://collector:4318 (https:// for TLS)", endpoint)
	}
	if protocol == ProtocolHTTP {
		u.Path = strings.TrimRight(u.Path, "/") + "/v1/logs"
	}
	return u.String(), nil
}

// newExporter builds the SDK's OTLP exporter, with its own retries off.
func newExporter(o Options) (sdklog.Exporter, error) {
	proto, err := ResolveProtocol(o.Protocol)
	if err != nil {
		return nil, err
	}
	var endpoint string
	if o.Endpoint != "" {
		if endpoint, err = EndpointURL(o.Endpoint, proto); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	if proto == ProtocolGRPC {
		opts := []otlploggrpc.Option{otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false})}
		if endpoint != "" {
			opts = append(opts, otlploggrpc.WithEndpointURL(endpoint))
		}
		return otlploggrpc.New(ctx, opts...)
	}
	opts := []otlploghttp.Option{otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false})}
	if endpoint != "" {
		opts = append(opts, otlploghttp.WithEndpointURL(endpoint))
	}
	return otlploghttp.New(ctx, opts...)
}

// newResource is the agent: service.name sigscope, its version, the host
// (the node's name when known, else the hostname) and the node. OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME override.
func newResource(o Options) *resource.Resource {
	attrs := []resource.Option{resource.WithSchemaURL(semconv.SchemaURL), resource.WithAttributes(
		semconv.ServiceName("sigscope"), semconv.ServiceVersion(o.Version))}
	// The node is the host: in a pod without the host's network, the
	// hostname is the pod's name.
	if o.NodeName != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.HostName(o.NodeName), semconv.K8SNodeName(o.NodeName)))
	} else if h, err := os.Hostname(); err == nil {
		attrs = append(attrs, resource.WithAttributes(semconv.HostName(h)))
	}
	attrs = append(attrs, resource.WithFromEnv())
	r, err := resource.New(context.Background(), attrs...)
	if err != nil {
		// A partial resource (a bad OTEL_RESOURCE_ATTRIBUTES) is still ours.
		o.Logger.Warn("otlp logs: resource", "error", err)
	}
	if r == nil {
		r = resource.Empty()
	}
	return r
}
