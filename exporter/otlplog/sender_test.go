package otlplog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sigscope/sigscope/test/testutil"
)

// fakeExporter answers each Export with the error down says, and keeps
// the event names of what it accepted.
type fakeExporter struct {
	mu       sync.Mutex
	err      error         // returned while set
	block    chan struct{} // when set, Export waits for it or ctx
	accepted []string
	calls    int
}

func (f *fakeExporter) Export(ctx context.Context, recs []sdklog.Record) error {
	f.mu.Lock()
	f.calls++
	block, err := f.block, f.err
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range recs {
		f.accepted = append(f.accepted, recs[i].Body().AsString())
	}
	return nil
}

func (f *fakeExporter) Shutdown(context.Context) error   { return nil }
func (f *fakeExporter) ForceFlush(context.Context) error { return nil }

func (f *fakeExporter) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeExporter) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.accepted...)
}

var refused = &url.Error{Op: "Post", URL: "http://127.0.0.1:4318/v1/logs",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

func newTestSender(t *testing.T, f *fakeExporter, o Options) *Sender {
	t.Helper()
	o.exporter = f
	o.RetryMin, o.RetryMax = time.Millisecond, 2*time.Millisecond
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Run(context.Background()) // as the agent runs it; Close stops it
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func observe(s *Sender, n int, from int) {
	for i := range n {
		ep := podEpisode()
		ep.Container.Name = fmt.Sprintf("c%d", from+i)
		ep.Container.Pod = ""
		s.ObserveEpisode(ep)
	}
}

func TestSenderSends(t *testing.T) {
	f := &fakeExporter{}
	s := newTestSender(t, f, Options{BatchSize: 3})
	observe(s, 10, 0)
	testutil.WaitFor(t, "10 records sent", func() bool { return s.Sent() == 10 })
	got := f.got()
	for i, b := range got {
		if !strings.HasPrefix(b, fmt.Sprintf("container c%d:", i)) {
			t.Errorf("record %d: %q, out of order", i, b)
		}
	}
	testutil.Accounted(t, s, 10)
}

// The collector away, then back: what was queued arrives, in order, and
// what the queue could not hold is dropped, oldest first, and counted.
func TestSenderOutage(t *testing.T) {
	f := &fakeExporter{err: refused}
	s := newTestSender(t, f, Options{QueueSize: 5, BatchSize: 2})
	observe(s, 12, 0)
	testutil.WaitFor(t, "retries", func() bool { return s.Retries() >= 2 })
	testutil.Accounted(t, s, 12)
	f.set(nil)
	testutil.WaitFor(t, "the queue emptied", func() bool { return s.Queued() == 0 })
	if s.Sent() != 5 || s.Dropped() != 7 || s.Failed() != 0 {
		t.Errorf("sent %d dropped %d failed %d, want 5 7 0", s.Sent(), s.Dropped(), s.Failed())
	}
	for i, b := range f.got() {
		if !strings.HasPrefix(b, fmt.Sprintf("container c%d:", 7+i)) {
			t.Errorf("record %d: %q, want the newest five in order", i, b)
		}
	}
	testutil.Accounted(t, s, 12)
	if v := promtestutil.ToFloat64(collectorOf(s, "sigscope_otlp_log_records_dropped_total")); v != 7 {
		t.Errorf("dropped metric %v", v)
	}
}

func TestSenderRefusedForGood(t *testing.T) {
	f := &fakeExporter{err: status.Error(codes.InvalidArgument, "bad record")}
	s := newTestSender(t, f, Options{BatchSize: 10})
	observe(s, 4, 0)
	testutil.WaitFor(t, "records failed", func() bool { return s.Failed() == 4 })
	if s.Retries() != 0 {
		t.Errorf("retried a final refusal %d times", s.Retries())
	}
	testutil.Accounted(t, s, 4)
}

// Close is bounded by DrainTimeout even when the collector hangs, counts
// what it could not send as dropped, and leaves no goroutine behind.
func TestSenderCloseBounded(t *testing.T) {
	before := runtime.NumGoroutine()
	f := &fakeExporter{block: make(chan struct{})}
	s := newTestSender(t, f, Options{DrainTimeout: 200 * time.Millisecond})
	observe(s, 3, 0)
	testutil.WaitFor(t, "an export in flight", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.calls > 0 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v, bound 200ms", d)
	}
	if s.Dropped() != 3 || s.Sent() != 0 {
		t.Errorf("dropped %d sent %d, want 3 0", s.Dropped(), s.Sent())
	}
	observe(s, 1, 3) // after Close: dropped, counted
	testutil.Accounted(t, s, 4)
	testutil.WaitFor(t, "the sender's goroutine gone", func() bool { return runtime.NumGoroutine() <= before })
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{context.DeadlineExceeded, true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{status.Error(codes.ResourceExhausted, "slow down"), true},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{status.Error(codes.Unauthenticated, "who"), false},
		{errors.New("retry-able request failure: body: overloaded"), true},
		{errors.New("failed to send logs to http://c/v1/logs: 400 Bad Request (body: no)"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct{ in, proto, want string }{
		{"http://c:4318", ProtocolHTTP, "http://c:4318/v1/logs"},
		{"http://c:4318/", ProtocolHTTP, "http://c:4318/v1/logs"},
		{"https://gw.example/otlp", ProtocolHTTP, "https://gw.example/otlp/v1/logs"},
		{"http://c:4317", ProtocolGRPC, "http://c:4317"},
		{"c:4318", ProtocolHTTP, ""},
		{"ftp://c", ProtocolHTTP, ""},
	} {
		got, err := EndpointURL(tc.in, tc.proto)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("EndpointURL(%q, %s) = %q, %v; want %q", tc.in, tc.proto, got, err, tc.want)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if p, err := ResolveProtocol(""); p != ProtocolGRPC || err != nil {
		t.Errorf("from OTEL_EXPORTER_OTLP_PROTOCOL: %q %v", p, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/json")
	if _, err := ResolveProtocol(""); err == nil {
		t.Error("http/json accepted")
	}
}

// The real OTLP/HTTP exporter: --otlp-endpoint gets /v1/logs appended, the
// standard headers variable is sent, and the body is one record per episode
// with the agent's resource; a 400 is failed, a 503 retried.
func TestSenderHTTP(t *testing.T) {
	var mu sync.Mutex
	var reqs []*collogpb.ExportLogsServiceRequest
	answer := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/base/v1/logs" || r.Header.Get("X-Tenant") != "shop" {
			t.Errorf("request %s with X-Tenant %q", r.URL.Path, r.Header.Get("X-Tenant"))
		}
		if answer != http.StatusOK {
			http.Error(w, "no", answer)
			return
		}
		var req collogpb.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Error(err)
		}
		reqs = append(reqs, &req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=shop")
	s, err := New(Options{Endpoint: srv.URL + "/base", NodeName: "node-a", Version: "v1.2.3",
		RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go s.Run(context.Background())
	defer s.Close()
	s.ObserveEpisode(podEpisode())
	testutil.WaitFor(t, "one record sent", func() bool { return s.Sent() == 1 })
	mu.Lock()
	rl := reqs[0].ResourceLogs[0]
	res := map[string]string{}
	for _, kv := range rl.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	lr := rl.ScopeLogs[0].LogRecords[0]
	if res["service.name"] != "sigscope" || res["service.version"] != "v1.2.3" || res["k8s.node.name"] != "node-a" || res["host.name"] != "node-a" {
		t.Errorf("resource %v", res)
	}
	if lr.EventName != EventName || lr.SeverityText != "WARN" || rl.ScopeLogs[0].Scope.Name != scopeName {
		t.Errorf("record %v", lr)
	}
	answer = http.StatusServiceUnavailable
	mu.Unlock()
	s.ObserveEpisode(podEpisode())
	testutil.WaitFor(t, "a retry", func() bool { return s.Retries() > 0 })
	mu.Lock()
	answer = http.StatusBadRequest
	mu.Unlock()
	testutil.WaitFor(t, "the record failed", func() bool { return s.Failed() == 1 })
	testutil.Accounted(t, s, 2)
}

// collectorOf is the Sender's metric named name.
func collectorOf(s *Sender, name string) *oneMetric { return &oneMetric{s: s, name: name} }

// Without --otlp-endpoint the standard variables say where: the SDK
// appends /v1/logs to OTEL_EXPORTER_OTLP_ENDPOINT and uses
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT as is.
func TestSenderEnvEndpoint(t *testing.T) {
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		paths <- r.URL.Path
	}))
	defer srv.Close()
	for _, tc := range []struct{ env, value, want string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL + "/base", "/base/v1/logs"},
		{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", srv.URL + "/custom/logs", "/custom/logs"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			if !Configured("") {
				t.Fatalf("%s set, yet OTLP logs are not configured", tc.env)
			}
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			go s.Run(context.Background())
			s.ObserveEpisode(podEpisode())
			testutil.WaitFor(t, "one record sent", func() bool { return s.Sent() == 1 })
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := <-paths; got != tc.want {
				t.Errorf("POST %s, want %s", got, tc.want)
			}
		})
	}
}
