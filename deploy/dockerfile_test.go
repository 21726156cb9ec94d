package deploy

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(string(data), "\n") {
		t2 := strings.TrimSpace(l)
		if cur.Len() == 0 && (t2 == "" || strings.HasPrefix(t2, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(t2, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t2)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{start, strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// The Dockerfile is multi-stage: a Go builder, then an empty (or
// distroless-static) final stage holding only the binary, whose entrypoint
// is `sigscope serve`.
func TestDockerfileShape(t *testing.T) {
	ins := parseDockerfile(t, "Dockerfile")
	var froms []instruction
	var entry, build *instruction
	for i := range ins {
		switch ins[i].cmd {
		case "FROM":
			froms = append(froms, ins[i])
		case "ENTRYPOINT":
			entry = &ins[i]
		case "RUN":
			if strings.Contains(ins[i].args, "go build") {
				build = &ins[i]
			}
		case "USER", "VOLUME":
			t.Errorf("Dockerfile:%d: %s: the chart sets the user and mounts", ins[i].line, ins[i].cmd)
		}
	}
	if len(froms) != 2 {
		t.Fatalf("%d stages, want 2 (builder, final)", len(froms))
	}
	if !strings.HasPrefix(froms[0].args, "golang:1.26 ") {
		t.Errorf("builder stage %q, want golang:1.26", froms[0].args)
	}
	final := strings.Fields(froms[1].args)[0]
	if final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want scratch or distroless static", final)
	}
	if entry == nil {
		t.Fatal("no ENTRYPOINT")
	}
	var argv []string
	if err := json.Unmarshal([]byte(entry.args), &argv); err != nil {
		t.Fatalf("ENTRYPOINT %s is not the exec (JSON) form: %v", entry.args, err)
	}
	if strings.Join(argv, " ") != "/sigscope serve" {
		t.Errorf("ENTRYPOINT %q, want [/sigscope serve]", argv)
	}
	if build == nil {
		t.Fatal("no RUN ... go build")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`, "./cmd/sigscope", "-o /out/sigscope"} {
		if !strings.Contains(build.args, want) {
			t.Errorf("Dockerfile:%d: go build lacks %s: %s", build.line, want, build.args)
		}
	}
	// The final stage says its license (the OCI annotation, SPDX) and carries
	// the text, as the README's License section says.
	var label, license bool
	for _, in := range ins {
		if in.line < froms[1].line {
			continue
		}
		switch {
		case in.cmd == "LABEL" && in.args == `org.opencontainers.image.licenses="Apache-2.0"`:
			label = true
		case in.cmd == "COPY" && in.args == "LICENSE /LICENSE":
			license = true
		}
	}
	if !label {
		t.Errorf(`final stage: no LABEL org.opencontainers.image.licenses="Apache-2.0"`)
	}
	if !license {
		t.Errorf("final stage: no COPY LICENSE /LICENSE")
	}
	if _, err := os.Stat("../LICENSE"); err != nil {
		t.Errorf("the image copies LICENSE from the build context: %v", err)
	}
	for _, bad := range []string{"clang", "go generate", "apt-get"} {
		for _, in := range ins {
			if in.cmd == "RUN" && strings.Contains(in.args, bad) {
				t.Errorf("Dockerfile:%d: %s: the BPF object is committed, the build needs only Go", in.line, bad)
			}
		}
	}
}

// The Dockerfile's `go build` line, run here as the builder stage would
// (no registry is reachable, so the image itself cannot be built in CI),
// gives a static, stripped binary that embeds the committed BPF object.
func TestDockerfileBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary; skipped with -short")
	}
	var build string
	for _, in := range parseDockerfile(t, "Dockerfile") {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	if build == "" {
		t.Fatal("no RUN ... go build in the Dockerfile")
	}
	out := filepath.Join(t.TempDir(), "sigscope")
	cmdline := strings.Replace(build, "-o /out/sigscope", "-o "+out, 1)
	// The builder's `go` is on its PATH; here it may be $GO.
	cmdline = regexp.MustCompile(`(^|\s)go build`).ReplaceAllString(cmdline, "${1}"+goCmd()+" build")
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = ".." // the build context is the repository root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build (%s) fails: %v\n%s", cmdline, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked and would not start FROM scratch")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	for _, sec := range []string{".symtab", ".debug_info", ".debug_line"} {
		if f.Section(sec) != nil {
			t.Errorf("the binary has a %s section: it is not stripped (-ldflags=\"-s -w\")", sec)
		}
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := os.ReadFile("../tracer/sigscope_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bin, obj) {
		t.Errorf("the binary does not embed the committed tracer/sigscope_bpfel.o")
	}
}
