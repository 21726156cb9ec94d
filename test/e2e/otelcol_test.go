package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// The real OpenTelemetry Collector of test/otelcol (OTLP receiver, file and
// debug exporters), built from the Go module proxy, as the OTLP tests run it.

var (
	otelcolOnce sync.Once
	otelcolPath string
	otelcolErr  error
)

// otelcolBinary builds test/otelcol into bin/otelcol (what `make otelcol`
// does; the Go build cache makes a rebuild quick) and logs how long it took.
// A build that fails skips the test, or fails it under
// SIGSCOPE_REQUIRE_PRIVILEGED=1.
func otelcolBinary(t *testing.T) string {
	t.Helper()
	otelcolOnce.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			otelcolErr = err
			return
		}
		otelcolPath = filepath.Join(root, "bin", "otelcol")
		start := time.Now()
		cmd := exec.Command("go", "build", "-trimpath", "-o", otelcolPath, ".")
		cmd.Dir = filepath.Join(root, "test", "otelcol")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			otelcolErr = fmt.Errorf("building the OpenTelemetry Collector (test/otelcol, `make otelcol`; it needs the Go module proxy): %v\n%s", err, out)
			return
		}
		t.Logf("OpenTelemetry Collector (test/otelcol) built in %v", time.Since(start).Round(time.Millisecond))
	})
	if otelcolErr != nil {
		if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal(otelcolErr)
		}
		t.Skip(otelcolErr)
	}
	return otelcolPath
}

// collector is one OpenTelemetry Collector, started and stopped as a
// process on fixed ports (a restart listens where the agent sends).
type collector struct {
	bin, dir, config, out string
	grpcPort, httpPort    int
	cmd                   *exec.Cmd
	stderr                *bytes.Buffer // the debug exporter's print of each record
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{bin: otelcolBinary(t), dir: t.TempDir(), grpcPort: freePort(t), httpPort: freePort(t)}
	c.out = filepath.Join(c.dir, "logs.jsonl")
	c.config = filepath.Join(c.dir, "config.yaml")
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    append: true
    flush_interval: 100ms
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file, debug]
`, c.grpcPort, c.httpPort, c.out)
	if err := os.WriteFile(c.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c.stderr = new(bytes.Buffer)
	t.Cleanup(func() { c.stop(t) })
	return c
}

// endpoint is the URL for sigscope serve --otlp-endpoint.
func (c *collector) endpoint(protocol string) string {
	if protocol == "grpc" {
		return fmt.Sprintf("http://127.0.0.1:%d", c.grpcPort)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", c.httpPort)
}

// start runs the collector and waits until its HTTP receiver answers.
func (c *collector) start(t *testing.T) {
	t.Helper()
	c.cmd = exec.Command(c.bin, "--config", c.config)
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitListening(t, c.httpPort)
	waitListening(t, c.grpcPort)
}

// stop ends the collector with SIGTERM, as a node's or a Deployment's stop
// would, and waits for it.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
	c.cmd = nil
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func waitListening(t *testing.T, port int) {
	t.Helper()
	if !testutil.Poll(50*time.Millisecond, func() bool { return portOpen(port) }) {
		t.Fatalf("the collector never listened on %d", port)
	}
}

// records reads every record the collector has written.
func (c *collector) records(t *testing.T) []testutil.OTLPRecord {
	return testutil.ReadOTLPFile(t, c.out)
}
