package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/testutil"
)

// startAgent runs an agent on a random loopback port until the test ends
// and waits until it is ready. It returns the base URL.
func startAgent(t *testing.T, opts Options, scheme string, client *http.Client) string {
	t.Helper()
	testutil.RequirePrivileged(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = l
	opts.AuditInterval = time.Hour // audits only on request: keeps this test's counters to itself
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	base := scheme + "://" + l.Addr().String()
	deadline := time.Now().Add(testutil.Bound)
	for {
		if a.ready.Load() {
			return base
		}
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("agent never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of one exposition line (name with labels, exactly
// as printed), 0 when absent.
func metric(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// The counters move by exactly what the test causes: one SIGTERM dropped by
// a namespace init, and an init exiting with three children (three cascade
// kills and one stop episode).
func TestMetricsMoveByWhatWasCaused(t *testing.T) {
	c := http.DefaultClient
	base := startAgent(t, Options{}, "http", c)
	if code, _ := get(t, c, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d after the tracer attached", code)
	}
	if code, body := get(t, c, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	_, before := get(t, c, base+"/metrics")

	ns := testutil.StartNSInit(t, "echo ready; read x")
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
	casc := testutil.StartNSInit(t, "sleep 60 & sleep 60 & sleep 60 & echo ready; read x; exit 0")
	_, _ = casc.Stdin.Write([]byte("\n"))

	const ignored = `sigscope_pid1_ignored_signals_total{signal="SIGTERM"}`
	const cascade = `sigscope_pidns_cascade_kills_total`
	deadline := time.Now().Add(testutil.Bound)
	var after string
	for {
		_, after = get(t, c, base+"/metrics")
		if metric(t, after, cascade)-metric(t, before, cascade) >= 3 &&
			metric(t, after, ignored)-metric(t, before, ignored) >= 1 &&
			metric(t, after, `sigscope_container_stops_total{outcome="exited"}`)-metric(t, before, `sigscope_container_stops_total{outcome="exited"}`) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters did not move:\n%s", after)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // anything extra would show now
	_, after = get(t, c, base+"/metrics")
	for series, want := range map[string]float64{
		ignored: 1,
		cascade: 3,
		`sigscope_container_stops_total{outcome="exited"}`:          1,
		`sigscope_signals_total{result="ignored",signal="SIGTERM"}`: 1,
	} {
		if got := metric(t, after, series) - metric(t, before, series); got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	if metric(t, after, `sigscope_events_dropped_total{event="generate"}`) != 0 {
		t.Errorf("events dropped")
	}

	// The episode is in the API.
	_, body := get(t, c, base+"/api/v1/episodes?outcome=exited")
	var eps []timeline.Episode
	if err := json.Unmarshal([]byte(body), &eps); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	found := false
	for _, ep := range eps {
		if ep.Main.PID == uint32(casc.PID) && len(ep.CascadeKills) == 3 {
			found = true
		}
	}
	if !found {
		t.Errorf("no exited episode for init %d with 3 cascade kills in %s", casc.PID, body)
	}
	if code, _ := get(t, c, base+"/api/v1/episodes?limit=x"); code != http.StatusBadRequest {
		t.Errorf("bad limit: %d", code)
	}
}

// With a web config (TLS and basic auth), plain HTTP is refused, a request
// without credentials gets 401, and one with them succeeds; the health
// listener (--web.health-address) answers the probes alone, in plain HTTP
// without credentials.
func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "web.yml")
	yml := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prom: %s\n", cert, key, hash)
	if err := os.WriteFile(config, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := startAgent(t, Options{WebConfigFile: config, HealthListener: hl}, "https", tlsClient)
	health := "http://" + hl.Addr().String()
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/metrics": http.StatusNotFound, "/api/v1/episodes": http.StatusNotFound} {
		if code, _ := get(t, http.DefaultClient, health+path); code != want {
			t.Errorf("health listener %s: %d, want %d", path, code, want)
		}
	}
	if code, _ := get(t, tlsClient, base+"/readyz"); code != http.StatusUnauthorized {
		t.Errorf("main listener /readyz without credentials: %d, want 401", code)
	}

	plain := "http" + strings.TrimPrefix(base, "https")
	if code, _ := get(t, http.DefaultClient, plain+"/metrics"); code == http.StatusOK {
		t.Errorf("plain HTTP answered 200")
	}
	if code, _ := get(t, tlsClient, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.SetBasicAuth("prom", "wrong")
	if resp, err := tlsClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %v %v", resp, err)
	}
	req.SetBasicAuth("prom", "s3cret")
	resp, err := tlsClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "sigscope_build_info") {
		t.Errorf("with credentials: %d %.200s", resp.StatusCode, body)
	}
}

func TestBadWebConfigIsRefused(t *testing.T) {
	config := filepath.Join(t.TempDir(), "web.yml")
	_ = os.WriteFile(config, []byte("tls_server_config:\n  cert_file: /nonexistent\n"), 0o600)
	if _, err := New(Options{WebConfigFile: config}); err == nil {
		t.Error("a web config without a key file was accepted")
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sigscope test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
