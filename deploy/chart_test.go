package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The chart's sources: its capabilities commented and documented, the committed render against a fresh one, its values.

// Every capability the template adds has a YAML comment on its line or right
// above it saying why, and the template adds exactly the documented set.
func TestCapabilitiesCommented(t *testing.T) {
	data, err := os.ReadFile(templateDaemonSet)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	addAt := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "add:" {
			if addAt >= 0 {
				t.Fatalf("%s: two capability add lists (lines %d and %d)", templateDaemonSet, addAt+1, i+1)
			}
			addAt = i
		}
	}
	if addAt < 0 {
		t.Fatalf("%s: no capabilities add list", templateDaemonSet)
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var caps []corev1.Capability
	for i := addAt + 1; i < len(lines); i++ {
		l := lines[i]
		t2 := strings.TrimSpace(l)
		if t2 == "" || strings.HasPrefix(t2, "#") {
			continue
		}
		if indent(l) <= indent(lines[addAt]) {
			break // the end of the list
		}
		item, ok := strings.CutPrefix(t2, "- ")
		if !ok {
			t.Fatalf("%s:%d: unexpected line in the capability list: %q", templateDaemonSet, i+1, l)
		}
		name, inline, _ := strings.Cut(item, "#")
		name = strings.Trim(strings.TrimSpace(name), `"'`)
		caps = append(caps, corev1.Capability(name))
		commented := strings.TrimSpace(inline) != ""
		if !commented && i > 0 {
			above := strings.TrimSpace(lines[i-1])
			commented = strings.HasPrefix(above, "#") && len(strings.TrimSpace(strings.TrimPrefix(above, "#"))) > 0
		}
		if !commented {
			t.Errorf("%s:%d: capability %s has no comment saying why", templateDaemonSet, i+1, name)
		}
	}
	if got, want := sortedCaps(caps), sortedCaps(documentedCaps); !reflect.DeepEqual(got, want) {
		t.Errorf("template adds %v, documented set is %v", got, want)
	}
}

// docs/deploy.md explains each capability of the set.
func TestCapabilitiesDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range documentedCaps {
		if !strings.Contains(string(data), "`CAP_"+string(c)+"`") {
			t.Errorf("docs/deploy.md does not mention `CAP_%s`", c)
		}
	}
}

// helmTemplate renders the chart with extra helm flags through render.sh
// (which pins helm), or skips when helm cannot be fetched.
func helmTemplate(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"render.sh", "-"}, args...)...)
	cmd.Env = append(os.Environ(), "GO="+goCmd())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		skipIfOffline(t, stderr.String())
		t.Fatalf("render.sh - %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

func goCmd() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// skipIfOffline skips when the go command could not download helm: the
// module proxy is unreachable. Any other failure is the test's to report.
func skipIfOffline(t *testing.T, stderr string) {
	t.Helper()
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "GOPROXY=off", "GOFLAGS=-mod=vendor", "module lookup disabled"} {
		if strings.Contains(stderr, s) {
			t.Skipf("helm cannot be fetched from the Go module proxy (%s); the render is checked by `make check-manifests` where it can be:\n%s", s, stderr)
		}
	}
}

// The committed manifests are what the chart renders now: what `make
// check-manifests` checks in CI, here for `go test` too.
func TestManifestsMatchChart(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "render.sh", dir)
	cmd.Env = append(os.Environ(), "GO="+goCmd())
	out, err := cmd.CombinedOutput()
	if err != nil {
		skipIfOffline(t, string(out))
		t.Fatalf("render.sh: %v\n%s", err, out)
	}
	rendered, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob("manifests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(rendered) != len(committed) || len(rendered) == 0 {
		t.Fatalf("render.sh wrote %d manifests, %d are committed", len(rendered), len(committed))
	}
	for _, r := range rendered {
		name := filepath.Base(r)
		want, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("manifests", name))
		if err != nil {
			t.Fatalf("%s rendered but not committed: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("manifests/%s differs from a fresh render of the chart: run `make manifests` and commit", name)
		}
	}
}

// The values switches render valid objects that keep the invariants.
func TestChartValues(t *testing.T) {
	t.Run("privileged", func(t *testing.T) {
		o := decode(t, "privileged=true", helmTemplate(t, "--set", "privileged=true"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "privileged=true", ds, true)
	})
	t.Run("webConfig", func(t *testing.T) {
		o := decode(t, "webConfig", helmTemplate(t, "--set", "webConfig.secretName=sigscope-web", "--set", "webConfig.probeScheme=HTTPS"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "webConfig", ds, false)
		c := ds.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--web.config.file=/etc/sigscope/web/web-config.yml") {
			t.Errorf("args %q lack --web.config.file", c.Args)
		}
		var secret *corev1.SecretVolumeSource
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == "web-config" {
				secret = v.Secret
			}
		}
		if secret == nil || secret.SecretName != "sigscope-web" {
			t.Errorf("no web-config Secret volume: %+v", secret)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "web-config" && (!m.ReadOnly || m.MountPath != "/etc/sigscope/web") {
				t.Errorf("web-config mounted %+v", m)
			}
		}
		if s := c.LivenessProbe.HTTPGet.Scheme; s != corev1.URISchemeHTTPS {
			t.Errorf("liveness probe scheme %s, want HTTPS", s)
		}
	})
	t.Run("healthPort", func(t *testing.T) {
		o := decode(t, "healthPort", helmTemplate(t, "--set", "webConfig.secretName=sigscope-web", "--set", "webConfig.probeScheme=HTTPS",
			"--set", "webConfig.probeHTTPHeaders[0].name=Authorization", "--set", "webConfig.probeHTTPHeaders[0].value=Basic eA==",
			"--set", "healthPort=10043"))
		c := oneDaemonSet(t, o).Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--web.health-address=:10043") {
			t.Errorf("args %q lack --web.health-address", c.Args)
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == 10043 }) {
			t.Errorf("ports %+v lack health 10043", c.Ports)
		}
		for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			g := p.HTTPGet
			if g.Port.String() != "health" || g.Scheme != corev1.URISchemeHTTP || len(g.HTTPHeaders) != 0 {
				t.Errorf("%s probe %+v: want port health, plain HTTP, no credential header", name, g)
			}
		}
	})
	t.Run("docker,podLabels,appArmor", func(t *testing.T) {
		o := decode(t, "docker", helmTemplate(t, "--set", "runtimeSockets.docker.enabled=true", "--set", "podLabels=true",
			"--set", "maxSeries=50", "--set", "appArmorProfile.type=Unconfined"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "docker", ds, false)
		if p := ds.Spec.Template.Spec.Containers[0].SecurityContext.AppArmorProfile; p == nil || p.Type != corev1.AppArmorProfileTypeUnconfined {
			t.Errorf("appArmorProfile %+v, want Unconfined", p)
		}
		var found bool
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == "docker" {
				found = v.HostPath != nil && v.HostPath.Path == "/var/run/docker.sock" &&
					v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathSocket
			}
		}
		if !found {
			t.Errorf("no docker socket hostPath of type Socket")
		}
		args := ds.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--pod-labels") || !slices.Contains(args, "--max-series=50") {
			t.Errorf("args %q lack --pod-labels or --max-series=50", args)
		}
	})
	t.Run("otlp", func(t *testing.T) {
		o := decode(t, "otlp", helmTemplate(t, "--set", "otlp.endpoint=http://otel-collector.observability:4317", "--set", "otlp.protocol=grpc",
			"--set", "otlp.queueSize=50", "--set", "otlp.env[0].name=OTEL_EXPORTER_OTLP_HEADERS", "--set", "otlp.env[0].value=x-tenant=a"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "otlp", ds, false)
		c := ds.Spec.Template.Spec.Containers[0]
		for _, a := range []string{"--otlp-endpoint=http://otel-collector.observability:4317", "--otlp-protocol=grpc", "--otlp-queue-size=50"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("args %q lack %s", c.Args, a)
			}
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "OTEL_EXPORTER_OTLP_HEADERS" && e.Value == "x-tenant=a" }) {
			t.Errorf("env %+v lacks OTEL_EXPORTER_OTLP_HEADERS", c.Env)
		}
		// Off by default: no flag, no variable.
		def := oneDaemonSet(t, decode(t, "default", helmTemplate(t))).Spec.Template.Spec.Containers[0]
		if slices.ContainsFunc(def.Args, func(a string) bool { return strings.HasPrefix(a, "--otlp") }) {
			t.Errorf("default args %q enable OTLP", def.Args)
		}
	})
	t.Run("no sockets", func(t *testing.T) {
		o := decode(t, "no sockets", helmTemplate(t, "--set", "runtimeSockets.containerd.enabled=false", "--set", "runtimeSockets.crio.enabled=false"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "no sockets", ds, false)
		if n := len(ds.Spec.Template.Spec.Volumes); n != 3 {
			t.Errorf("%d volumes, want btf, cgroup and the journal only", n)
		}
	})
	t.Run("journal off", func(t *testing.T) {
		o := decode(t, "journal off", helmTemplate(t, "--set", "journal.enabled=false"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "journal off", ds, false)
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == "journal" {
				t.Errorf("a journal volume with journal.enabled=false: %+v", v)
			}
		}
		for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--journal") {
				t.Errorf("arg %s with journal.enabled=false", a)
			}
		}
	})
	t.Run("journal elsewhere", func(t *testing.T) {
		o := decode(t, "journal elsewhere", helmTemplate(t, "--set", "journal.hostDir=/srv/sigscope", "--set", "journal.files=4"))
		ds := oneDaemonSet(t, o)
		checkPodSecurity(t, "journal elsewhere", ds, false)
		args := ds.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--journal-dir=/srv/sigscope") || !slices.Contains(args, "--journal-files=4") {
			t.Errorf("args %q: want --journal-dir=/srv/sigscope and --journal-files=4", args)
		}
	})
}
