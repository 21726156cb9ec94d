package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	krewTemplate = "krew/sigscope.yaml"
	krewArchive  = "krew/archive.sh"
	// krew runs from the Go module proxy, pinned. (v0.4.5 exists on GitHub
	// but the proxy answers 403 for it: "not available".)
	krewModule = "sigs.k8s.io/krew"
	krewPin    = "v0.4.4"
	// krewTag is the release tag the tests render the template for.
	krewTag     = "v0.0.0-krewtest"
	krewBin     = "kubectl-sigscope"
	krewRelease = "https://github.com/sigscope/sigscope/releases/download/"
)

// krewPlatforms are the platforms the manifest must offer, as os/arch.
var krewPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// krewPlugin is krew's Plugin (sigs.k8s.io/krew/pkg/index, apiVersion
// krew.googlecontainertools.github.com/v1alpha2) with the fields the
// manifest uses: decoded strictly, a field krew does not know (or that this
// type forgot) fails. krew is not a dependency of the module, so its type is
// not imported; krew itself reads the manifest in TestKrewInstall.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Caveats          string         `json:"caveats"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Selector *metav1.LabelSelector `json:"selector"`
	Files    []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
	Bin string `json:"bin"`
}

// renderKrew executes the template as krew-release-bot does (Go's
// text/template, .TagName the release tag; addURIAndSha "URL" .TagName
// expands the tag in URL and writes "uri: URL\n    sha256: SHA"), with
// sha256For standing in for the bot's download of URL. It returns the
// rendered manifest and, for each rendered uri, the URL as the template
// wrote it.
func renderKrew(t *testing.T, tag string, sha256For func(uri string) string) ([]byte, map[string]string) {
	t.Helper()
	raw := map[string]string{}
	tpl, err := template.New(path.Base(krewTemplate)).Funcs(template.FuncMap{
		"addURIAndSha": func(url, tag string) (string, error) {
			u, err := template.New("url").Parse(url)
			if err != nil {
				return "", err
			}
			var b strings.Builder
			if err := u.Execute(&b, struct{ TagName string }{tag}); err != nil {
				return "", err
			}
			raw[b.String()] = url
			return fmt.Sprintf("uri: %s\n    sha256: %s", b.String(), sha256For(b.String())), nil
		},
	}).Option("missingkey=error").ParseFiles(krewTemplate)
	if err != nil {
		t.Fatalf("%s is not a template krew-release-bot can read: %v", krewTemplate, err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, struct{ TagName string }{tag}); err != nil {
		t.Fatalf("%s: %v", krewTemplate, err)
	}
	return out.Bytes(), raw
}

// krewLicense is the license file archive.sh packs and the manifest
// installs: the repository's Apache-2.0 LICENSE.
func krewLicense(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	if err != nil {
		t.Fatalf("the krew archives need a license: %v", err)
	}
	if !strings.Contains(string(data), "Apache License\n                           Version 2.0, January 2004") {
		t.Fatalf("../LICENSE is not the Apache License 2.0 the README names")
	}
	return "LICENSE"
}

// The template renders, as the bot would render it, into a manifest krew
// reads: the four platforms, each selecting one os/arch with matchLabels,
// each with its own archive's URL under the release's tag, its sha256 from
// addURIAndSha (at the right indent: a field of the same platform), the
// binary mapped by files and named by bin.
func TestKrewManifestTemplate(t *testing.T) {
	fakeSha := func(uri string) string {
		s := sha256.Sum256([]byte(uri))
		return hex.EncodeToString(s[:])
	}
	rendered, raw := renderKrew(t, krewTag, fakeSha)
	var p krewPlugin
	strict(t, krewTemplate+" rendered", rendered, &p)

	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q, kind %q: want krew.googlecontainertools.github.com/v1alpha2 Plugin", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "sigscope" {
		t.Errorf("metadata.name %q, want sigscope (the plugin is kubectl-sigscope)", p.Metadata.Name)
	}
	if p.Spec.Version != krewTag {
		t.Errorf("spec.version %q rendered for tag %s: it must be the release's tag", p.Spec.Version, krewTag)
	}
	if p.Spec.Homepage != "https://github.com/sigscope/sigscope" {
		t.Errorf("spec.homepage %q: the bot checks the releasing repository owns it", p.Spec.Homepage)
	}
	if sd := p.Spec.ShortDescription; sd == "" || strings.ContainsAny(sd, "\r\n") {
		t.Errorf("spec.shortDescription %q: krew wants one line", sd)
	}
	// What the plugin does and what it needs, as docs/kubectl.md says it.
	for _, want := range []string{"kubectl sigscope timeline", "kubectl sigscope audit", "kubectl sigscope top",
		"deploy/chart/sigscope", "DaemonSet", "sigscope-reader", "get and list pods", "pods/proxy"} {
		if !strings.Contains(strings.Join(strings.Fields(p.Spec.Description), " "), want) {
			t.Errorf("spec.description does not mention %q", want)
		}
	}
	for _, want := range []string{"deploy/chart/sigscope", "sigscope-reader", "pods/proxy", "rolebinding"} {
		if !strings.Contains(p.Spec.Caveats, want) {
			t.Errorf("spec.caveats do not mention %q", want)
		}
	}
	// The ClusterRole the manifest names is the chart's.
	var roles []string
	for _, r := range readManifest(t, manifestDefault).clusterRoles {
		roles = append(roles, r.Name)
	}
	if !slices.Contains(roles, "sigscope-reader") {
		t.Errorf("the chart renders the ClusterRoles %v, not sigscope-reader, which the krew manifest names", roles)
	}

	license := krewLicense(t)
	var got []string
	for i, pl := range p.Spec.Platforms {
		where := fmt.Sprintf("spec.platforms[%d]", i)
		if pl.Selector == nil || len(pl.Selector.MatchExpressions) != 0 || len(pl.Selector.MatchLabels) != 2 ||
			pl.Selector.MatchLabels["os"] == "" || pl.Selector.MatchLabels["arch"] == "" {
			t.Errorf("%s: selector %v: want matchLabels with os and arch only", where, pl.Selector)
			continue
		}
		osArch := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		where += " (" + osArch + ")"
		got = append(got, osArch)
		want := krewRelease + "{{ .TagName }}/" + krewBin + "_{{ .TagName }}_" + strings.ReplaceAll(osArch, "/", "_") + ".tar.gz"
		if rawURI, ok := raw[pl.URI]; !ok {
			t.Errorf("%s: uri %q was not written by addURIAndSha", where, pl.URI)
		} else if !strings.Contains(rawURI, "{{ .TagName }}") || rawURI != want {
			t.Errorf("%s: addURIAndSha %q, want %q (the archive of this os/arch, under the release's .TagName)", where, rawURI, want)
		}
		if pl.Sha256 != fakeSha(pl.URI) {
			t.Errorf("%s: sha256 %q is not addURIAndSha's for its uri: is the call at the platform's field indent (4 spaces)?", where, pl.Sha256)
		}
		if pl.Bin != krewBin {
			t.Errorf("%s: bin %q, want %s (kubectl finds `kubectl sigscope` by that name)", where, pl.Bin, krewBin)
		}
		var from []string
		for _, f := range pl.Files {
			from = append(from, f.From)
			if f.To != "." {
				t.Errorf("%s: files: %s to %q, want .", where, f.From, f.To)
			}
		}
		// archive.sh packs the license; krew-index wants it installed.
		wantFrom := []string{krewBin, license}
		if !slices.Equal(from, wantFrom) {
			t.Errorf("%s: files from %q, want %q: what archive.sh packs (krew fails on a from that matches nothing)", where, from, wantFrom)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(krewPlatforms))
	if !slices.Equal(got, want) {
		t.Errorf("platforms %v, want %v, each once", got, want)
	}
}

// krewRun runs one of krew's commands with `go run` from the module proxy.
// When the go command cannot download it (its own "go: " lines say so),
// the test skips, or fails with SIGSCOPE_REQUIRE_PRIVILEGED=1 (CI, where
// the proxy is reachable). Any other failure, krew's own included, fails.
func krewRun(t *testing.T, env []string, cmd string, args ...string) string {
	t.Helper()
	c := exec.Command(goCmd(), append([]string{"run", krewModule + "/cmd/" + cmd + "@" + krewPin}, args...)...)
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	if err == nil {
		return string(out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "go: ") {
			continue
		}
		for _, s := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "GOPROXY=off", "-mod=vendor", "module lookup disabled", "403 Forbidden", "404 Not Found"} {
			if !strings.Contains(line, s) {
				continue
			}
			msg := fmt.Sprintf("%s@%s cannot be fetched from the Go module proxy (%s)", krewModule, krewPin, line)
			if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
				t.Fatalf("%s, and SIGSCOPE_REQUIRE_PRIVILEGED=1 makes that a failure", msg)
			}
			t.Skipf("%s: the krew install is not tested; SIGSCOPE_REQUIRE_PRIVILEGED=1 makes this a failure", msg)
		}
	}
	t.Fatalf("%s %s: %v\n%s", cmd, strings.Join(args, " "), err, out)
	return ""
}

// archive.sh builds the archives and renders the template for them; krew
// itself, at a pinned version, validates the rendered manifest and installs
// each platform's archive from it (KREW_OS/KREW_ARCH pick the platform), and
// the installed plugin of this machine's platform runs and prints the
// release's version.
func TestKrewInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kubectl-sigscope for every platform of the krew manifest; skipped with -short")
	}
	// Fetch (and build) krew first: without the module proxy there is
	// nothing to install with, and no need to build the archives.
	krewRun(t, []string{"KREW_ROOT=" + t.TempDir(), "KREW_NO_UPGRADE_CHECK=1"}, "krew", "version")

	out := t.TempDir()
	c := exec.Command("sh", krewArchive, krewTag, out)
	c.Env = append(os.Environ(), "GO="+goCmd())
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s %s %s: %v\n%s", krewArchive, krewTag, out, err, b)
	}
	manifest := filepath.Join(out, "sigscope.yaml")
	rendered, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}

	// archive.sh renders (in awk) what the bot's engine renders, with each
	// archive's real sha256.
	want, _ := renderKrew(t, krewTag, func(uri string) string {
		b, err := os.ReadFile(filepath.Join(out, path.Base(uri)))
		if err != nil {
			t.Fatalf("uri %s: no such archive: %v", uri, err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	})
	if !bytes.Equal(rendered, want) {
		t.Errorf("archive.sh rendered %s differently from text/template (krew-release-bot's engine):\n--- archive.sh\n%s\n--- text/template\n%s", krewTemplate, rendered, want)
	}
	var p krewPlugin
	strict(t, manifest, rendered, &p)

	// krew's own checks, as krew-index runs them (without the install of
	// each platform from its uri: nothing is released yet).
	krewRun(t, nil, "validate-krew-manifest", "-manifest", manifest, "-skip-install")

	ran := false
	for _, pl := range p.Spec.Platforms {
		osName, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		t.Run(osName+"_"+arch, func(t *testing.T) {
			root := t.TempDir()
			archive := filepath.Join(out, path.Base(pl.URI))
			env := []string{"KREW_ROOT=" + root, "KREW_OS=" + osName, "KREW_ARCH=" + arch, "KREW_NO_UPGRADE_CHECK=1"}
			got := krewRun(t, env, "krew", "install", "--manifest="+manifest, "--archive="+archive)
			if !strings.Contains(got, "Installed plugin: sigscope") {
				t.Errorf("krew install says:\n%s", got)
			}
			link := filepath.Join(root, "bin", krewBin)
			target, err := os.Readlink(link)
			if err != nil {
				t.Fatalf("krew installed no %s: %v\n%s", link, err, got)
			}
			if wantTarget := filepath.Join(root, "store", "sigscope", krewTag, krewBin); target != wantTarget {
				t.Errorf("%s -> %s, want %s", link, target, wantTarget)
			}
			if _, err := os.Stat(filepath.Join(root, "receipts", "sigscope.yaml")); err != nil {
				t.Errorf("no install receipt: %v", err)
			}
			lic, err := os.ReadFile(filepath.Join(root, "store", "sigscope", krewTag, "LICENSE"))
			if want, _ := os.ReadFile(filepath.Join("..", "LICENSE")); err != nil || !bytes.Equal(lic, want) {
				t.Errorf("krew did not install the repository's LICENSE from the archive: %v", err)
			}
			if osName != runtime.GOOS || arch != runtime.GOARCH {
				return
			}
			ran = true
			v, err := exec.Command(link, "version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s version: %v\n%s", link, err, v)
			}
			if want := krewBin + " " + krewTag + " (agent API v1)\n"; string(v) != want {
				t.Errorf("%s version printed %q, want %q", link, v, want)
			}
		})
	}
	if !ran && !t.Failed() {
		t.Skipf("installed every platform, but none is this machine's (%s/%s): the installed plugin was not run", runtime.GOOS, runtime.GOARCH)
	}
}
