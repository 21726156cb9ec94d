package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
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
		root, err := filepath.Abs("..")
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
	deadline := time.Now().Add(30 * time.Second)
	for !portOpen(port) {
		if time.Now().After(deadline) {
			t.Fatalf("the collector never listened on %d", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// otlpRecord is one log record of the file exporter's OTLP JSON, with its
// resource's attributes.
type otlpRecord struct {
	Resource     map[string]any
	Scope        string
	Time         time.Time
	Observed     time.Time
	Severity     int
	SeverityText string
	EventName    string
	Body         string
	Attrs        map[string]any
}

type otlpKV struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// records reads every record the collector has written.
func (c *collector) records(t *testing.T) []otlpRecord {
	t.Helper()
	f, err := os.Open(c.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []otlpRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			ResourceLogs []struct {
				Resource struct {
					Attributes []otlpKV `json:"attributes"`
				} `json:"resource"`
				ScopeLogs []struct {
					Scope struct {
						Name string `json:"name"`
					} `json:"scope"`
					LogRecords []struct {
						TimeUnixNano         string          `json:"timeUnixNano"`
						ObservedTimeUnixNano string          `json:"observedTimeUnixNano"`
						SeverityNumber       int             `json:"severityNumber"`
						SeverityText         string          `json:"severityText"`
						EventName            string          `json:"eventName"`
						Body                 json.RawMessage `json:"body"`
						Attributes           []otlpKV        `json:"attributes"`
					} `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			// The last line may be half written while the exporter flushes.
			continue
		}
		for _, rl := range line.ResourceLogs {
			res := attrMap(t, rl.Resource.Attributes)
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					body, _ := anyValue(t, "body", lr.Body).(string)
					out = append(out, otlpRecord{Resource: res, Scope: sl.Scope.Name, Time: unixNano(lr.TimeUnixNano),
						Observed: unixNano(lr.ObservedTimeUnixNano), Severity: lr.SeverityNumber, SeverityText: lr.SeverityText,
						EventName: lr.EventName, Body: body, Attrs: attrMap(t, lr.Attributes)})
				}
			}
		}
	}
	return out
}

func unixNano(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func attrMap(t *testing.T, kvs []otlpKV) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[kv.Key] = anyValue(t, kv.Key, kv.Value)
	}
	return m
}

// anyValue decodes an OTLP JSON AnyValue: strings, bools, doubles, int64s
// (written as strings), and arrays of them.
func anyValue(t *testing.T, key string, raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("attribute %s: %v", key, err)
		return nil
	}
	return decodeAny(t, v)
}

func decodeAny(t *testing.T, v map[string]json.RawMessage) any {
	for k, raw := range v {
		switch k {
		case "stringValue":
			var s string
			_ = json.Unmarshal(raw, &s)
			return s
		case "boolValue":
			var b bool
			_ = json.Unmarshal(raw, &b)
			return b
		case "doubleValue":
			var f float64
			_ = json.Unmarshal(raw, &f)
			return f
		case "intValue":
			var s string
			_ = json.Unmarshal(raw, &s)
			n, _ := strconv.ParseInt(s, 10, 64)
			return n
		case "arrayValue":
			var a struct {
				Values []map[string]json.RawMessage `json:"values"`
			}
			_ = json.Unmarshal(raw, &a)
			var out []any
			for _, e := range a.Values {
				out = append(out, decodeAny(t, e))
			}
			return out
		}
	}
	return nil
}
