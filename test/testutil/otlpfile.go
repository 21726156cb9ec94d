package testutil

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"
)

// The OpenTelemetry Collector's file exporter output, as the OTLP tests
// read it (test/e2e/otlp_test.go).

// OTLPRecord is one log record of the file exporter's OTLP JSON, with its
// resource's attributes.
type OTLPRecord struct {
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

// ReadOTLPFile reads every log record an OpenTelemetry Collector's file
// exporter (OTLP JSON, one export per line) has written to path; none when
// the file is not there yet.
func ReadOTLPFile(t testing.TB, path string) []OTLPRecord {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []OTLPRecord
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
					out = append(out, OTLPRecord{Resource: res, Scope: sl.Scope.Name, Time: unixNano(lr.TimeUnixNano),
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

func attrMap(t testing.TB, kvs []otlpKV) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[kv.Key] = anyValue(t, kv.Key, kv.Value)
	}
	return m
}

// anyValue decodes an OTLP JSON AnyValue: strings, bools, doubles, int64s
// (written as strings), and arrays of them.
func anyValue(t testing.TB, key string, raw json.RawMessage) any {
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

func decodeAny(t testing.TB, v map[string]json.RawMessage) any {
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
