package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sigscope/sigscope/test/testutil"
)

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ensurePrometheus installs Debian's prometheus package (server and
// promtool) when missing.
func ensurePrometheus(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("prometheus"); err == nil {
		if _, err := exec.LookPath("promtool"); err == nil {
			return
		}
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "prometheus"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %v: %v\n%s", args, err, out)
		}
	}
}

// startServe runs `sigscope serve` on a free loopback port with args until
// the test ends, and waits until its programs are attached. It returns the
// port and the agent's stderr, for failure messages.
func startServe(t *testing.T, args ...string) (port int, stderr *bytes.Buffer) {
	t.Helper()
	port, stderr, _ = startServeUnder(t, nil, args...)
	return port, stderr
}

// startServeUnder is startServe run through wrapper, a command that execs
// its arguments in the same process (testutil.StartSigscopeUnder); it also
// returns the agent's pid.
func startServeUnder(t *testing.T, wrapper []string, args ...string) (port int, stderr *bytes.Buffer, pid int) {
	t.Helper()
	port = freePort(t)
	argv := append(append(wrapper[:len(wrapper):len(wrapper)], sigscope(t), "serve", "--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port)), args...)
	agent := exec.Command(argv[0], argv[1:]...)
	stderr = new(bytes.Buffer)
	agent.Stderr = stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGINT)
		_ = agent.Wait()
	})
	testutil.WaitPrograms(t, agent.Process.Pid, 5)
	return port, stderr, agent.Process.Pid
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	var err error
	if !testutil.Poll(100*time.Millisecond, func() bool {
		var resp *http.Response
		if resp, err = http.Get(url); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("%s never answered 200: %v", url, err)
	}
}

// A real Prometheus scrapes `sigscope serve`; after a namespace init drops a
// SIGTERM, Prometheus' query API returns sigscope_pid1_ignored_signals_total
// above 0. promtool accepts the agent's exposition.
func TestPrometheusScrapesAgent(t *testing.T) {
	testutil.RequirePrivileged(t)
	ensurePrometheus(t)
	agentPort, agentErr := startServe(t)
	promPort := freePort(t)
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", agentPort)
	waitHTTP(t, agentURL+"/readyz")

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sigscope\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n", agentPort)
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	var promOut bytes.Buffer
	prom.Stdout, prom.Stderr = &promOut, &promOut
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Process.Kill(); _ = prom.Wait() })
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	waitHTTP(t, promURL+"/-/ready")

	ns := testutil.StartNSInit(t, "echo ready; read x")
	testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))

	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := query(promURL, `sum(sigscope_pid1_ignored_signals_total{job="sigscope"})`)
		if err == nil && v > 0 {
			t.Logf("Prometheus: sigscope_pid1_ignored_signals_total = %v", v)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never saw the dropped SIGTERM (last: %v, %v)\nprometheus:\n%s\nagent:\n%s", v, err, tail(promOut.String()), tail(agentErr.String()))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if v, err := query(promURL, `up{job="sigscope"}`); err != nil || v != 1 {
		t.Errorf("up = %v, %v", v, err)
	}

	resp, err := http.Get(agentURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// query runs an instant query and returns the single value.
func query(base, q string) (float64, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("query %s: %+v", q, r)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// `timeline --server` and `audit --server` read a remote agent, here over
// TLS with basic auth (credentials in the URL, the agent's CA given).
func TestServerClients(t *testing.T) {
	img := busyboxImage(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	gen := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
		"-nodes", "-days", "1", "-subj", "/CN=sigscope", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	// exporter-toolkit wants bcrypt hashes.
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  admin: %s\n", cert, key, hash)
	cfgPath := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfgPath, []byte(webCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port, agentErr := startServe(t, "--web.config.file", cfgPath)

	id := runContainer(t, "e2e-remote", img, "sh", "-c", "sleep 1000 & wait")
	running := runContainer(t, "e2e-remote-running", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
	docker(t, "stop", "-t", "1", "e2e-remote")

	server := fmt.Sprintf("https://admin:s3cret@127.0.0.1:%d", port)
	// The episode is in the agent's API a settle time after the stop, or
	// later on a loaded machine.
	timeline := func() ([]byte, error) {
		return exec.Command(sigscope(t), "timeline", "--server", server, "--server-ca", cert, "-o", "json", "--container", "e2e-remote").Output()
	}
	testutil.Poll(200*time.Millisecond, func() bool { out, err := timeline(); return err == nil && len(bytes.TrimSpace(out)) > 0 })
	// Without credentials the agent refuses; without the CA the client does.
	out, cerr := exec.Command(sigscope(t), "audit", "--server", fmt.Sprintf("https://127.0.0.1:%d", port), "--server-ca", cert).CombinedOutput()
	if cerr == nil || !bytes.Contains(out, []byte("401")) {
		t.Errorf("audit without credentials: %v %s", cerr, out)
	}
	if out, cerr := exec.Command(sigscope(t), "audit", "--server", server).CombinedOutput(); cerr == nil {
		t.Errorf("an unverified certificate was accepted: %s", out)
	}
	out, err = timeline()
	if err != nil {
		t.Fatalf("timeline --server: %v\nagent: %s", err, tail(agentErr.String()))
	}
	var ep episode
	if err := json.Unmarshal(bytes.TrimSpace(out), &ep); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if ep.Container.ID != id || ep.Outcome != "ignored_by_init" {
		t.Errorf("remote episode: %s", out)
	}
	out, err = exec.Command(sigscope(t), "audit", "--server", server, "--server-ca", cert, "-o", "json").Output()
	if err != nil {
		t.Fatalf("audit --server: %v", err)
	}
	found := false
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var a auditLine
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if a.Container.ID == running {
			found = true
			if a.Prediction != "graceful" || !a.Catches {
				t.Errorf("remote audit of the trap container: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("remote audit lacks the running container:\n%s", out)
	}
}
