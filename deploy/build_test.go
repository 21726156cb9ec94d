package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Every way the repository builds a binary for people to run builds it
// static and stripped: `make build` (both binaries), the image's
// Dockerfile (test/cluster/images.sh runs its line), and the krew
// archives of the kubectl plugin.
func TestBuildsStaticAndStripped(t *testing.T) {
	builds := map[string][]string{} // where -> go build command lines
	out, err := exec.Command("make", "-s", "-n", "-C", "..", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, " build ") {
			builds["make build"] = append(builds["make build"], l)
		}
	}
	if len(builds["make build"]) != 2 {
		t.Errorf("make build runs %d go builds, want 2 (sigscope, kubectl-sigscope):\n%s", len(builds["make build"]), out)
	}
	for _, in := range parseDockerfile(t, "Dockerfile") {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			builds["Dockerfile"] = append(builds["Dockerfile"], in.args)
		}
	}
	archive, err := os.ReadFile(krewArchive)
	if err != nil {
		t.Fatal(err)
	}
	// archive.sh's build spans continuation lines.
	joined := strings.ReplaceAll(string(archive), "\\\n", " ")
	for _, l := range strings.Split(joined, "\n") {
		if strings.Contains(l, `"$GO" build`) {
			builds[krewArchive] = append(builds[krewArchive], l)
		}
	}
	for _, where := range []string{"make build", "Dockerfile", krewArchive} {
		if len(builds[where]) == 0 {
			t.Errorf("%s: no go build found", where)
		}
		for _, b := range builds[where] {
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`(^|\s)CGO_ENABLED=0\s`),
				regexp.MustCompile(`\s-trimpath(\s|$)`),
				regexp.MustCompile(`\s-ldflags[= ]["']?-s -w[\s"']`),
			} {
				if !want.MatchString(b) {
					t.Errorf("%s: go build lacks %s: %s", where, want, b)
				}
			}
		}
	}
}
