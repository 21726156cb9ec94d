package container

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Fuzz targets for what the container runtimes answer: Docker's inspect
// JSON, CRI's ContainerStatus and PodSandboxStatus (protobuf, decoded by
// gRPC's codec as a real call does), and the kubelet's preStop annotation.

// checkInfo asserts what holds for any Info a runtime's answer maps to: its
// Summary (the "container" object of trace lines and the agent's API) is
// valid UTF-8 JSON that reads back (Summary.Info, as a recording is read) to
// a Summary that writes the same; the stop signal is 0 or a real signal;
// the grace period is not negative; a hook is of a known kind.
func checkInfo(t *testing.T, info *identity.Info) {
	t.Helper()
	if info.StopSignal < 0 || info.StopSignal > sigvocab.MaxSignal {
		t.Fatalf("stop signal %d", info.StopSignal)
	}
	if info.GracePeriod < 0 {
		t.Fatalf("grace period %d", info.GracePeriod)
	}
	if h := info.PreStop; h != nil && h.Kind != "exec" && h.Kind != "http" && h.Kind != "sleep" {
		t.Fatalf("preStop hook of kind %q", h.Kind)
	}
	b, err := json.Marshal(info.Summary())
	if err != nil {
		t.Fatalf("Summary of %+v: %v", info, err)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("Summary wrote invalid JSON: %q", b)
	}
	var s identity.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("Summary %s does not read back: %v", b, err)
	}
	again, err := json.Marshal(s.Info().Summary())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Fatalf("Summary read back writes another:\n%s\n%s", b, again)
	}
	_, _ = info.DisplayName(), info.ShortID()
}

// Any bytes as Docker's answer to GET /containers/{id}/json, decoded as
// dockerClient.get does: an error, or an inspect whose Info is Docker's,
// with the inspect's pid, stop timeout (or Docker's default) and name (the
// kubelet's container name label first), and a sound Summary.
func FuzzDockerInspect(f *testing.F) {
	for _, s := range []string{
		`{"Id":"` + fuzzID + `","Name":"/web","Config":{"Image":"nginx:1","Labels":{"a":"b"},"StopSignal":"SIGQUIT","StopTimeout":30},"State":{"Status":"running","Running":true,"Pid":4242}}`,
		`{"Id":"` + fuzzID + `","Name":"/k8s_POD_web-0_shop_` + fuzzUID + `_0","Config":{"Image":"pause:3.10","Labels":{"io.kubernetes.docker.type":"podsandbox","io.kubernetes.pod.name":"web-0","io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.uid":"` + fuzzUID + `","io.kubernetes.container.name":"POD"}},"State":{"Status":"running","Pid":555}}`,
		`{"Name":"/app","Config":{"Labels":{"io.kubernetes.container.name":"app","io.kubernetes.pod.terminationGracePeriod":" 45 ","io.kubernetes.container.preStopHandler":"{\"exec\":{\"command\":[\"sleep\",\"5\"]}}"},"StopSignal":"RTMIN+2","StopTimeout":null},"State":{"Status":"created","Pid":0}}`,
		`{"Name":"web\u001b[31m\\xff","Config":{"StopSignal":"99","StopTimeout":-1},"State":{"Status":"exited","Pid":-7}}`,
		`{"Config":null,"State":null} trailing`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ins dockerInspect
		if err := json.NewDecoder(io.LimitReader(bytes.NewReader(body), maxResponse)).Decode(&ins); err != nil {
			return
		}
		if ins.ID == "" {
			ins.ID = fuzzID // as inspect does: the id asked for
		}
		info := ins.info()
		_ = ins.notStarted()
		if info.ID != ins.ID || info.Runtime != RuntimeDocker || info.MainPID != max(ins.State.Pid, 0) {
			t.Fatalf("inspect %+v maps to %+v", ins, info)
		}
		want := strings.TrimPrefix(ins.Name, "/")
		if n := ins.Config.Labels[LabelContainerName]; n != "" {
			want = n
		}
		if info.Name != want {
			t.Fatalf("name %q, want %q", info.Name, want)
		}
		timeout := dockerDefaultStopTimeout
		if ins.Config.StopTimeout != nil {
			timeout = *ins.Config.StopTimeout
		}
		if info.StopTimeout != timeout {
			t.Fatalf("stop timeout %d, want %d", info.StopTimeout, timeout)
		}
		if info.Sandbox != (ins.Config.Labels[LabelDockerType] == dockerTypeSandbox) {
			t.Fatalf("sandbox %v with labels %q", info.Sandbox, ins.Config.Labels)
		}
		checkInfo(t, info)
	})
}

var criCodec = encoding.GetCodecV2(grpcproto.Name)

func criWire(f *testing.F, m any) []byte {
	f.Helper()
	b, err := criCodec.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	defer b.Free()
	return b.Materialize()
}

// Any bytes as the protobuf of a CRI ContainerStatusResponse and of a
// PodSandboxStatusResponse (the same bytes, read as each), with verbose
// "info" JSON: an error, or an Info with the status's id, no negative pid,
// a sandbox named SandboxName, and a sound Summary.
func FuzzCRIStatus(f *testing.F) {
	status := &runtimeapi.ContainerStatusResponse{
		Status: &runtimeapi.ContainerStatus{
			Id:       fuzzID,
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			State:    runtimeapi.ContainerState_CONTAINER_RUNNING,
			Image:    &runtimeapi.ImageSpec{Image: "registry.example/app:1.2"},
			ImageRef: "registry.example/app@sha256:abcd",
			Labels: map[string]string{LabelContainerName: "app", LabelPodName: "app-7d9f-xk2",
				LabelPodNamespace: "prod", LabelPodUID: fuzzUID},
			Annotations: map[string]string{AnnotationGracePeriod: "60",
				AnnotationPreStop: `{"httpGet":{"path":"/quit","port":8080}}`},
			StopSignal: runtimeapi.Signal_SIGNAL_SIGQUIT,
		},
		Info: map[string]string{"info": `{"sandboxID":"s","pid":4242,"runtimeSpec":{}}`},
	}
	created := &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: fuzzID2, State: runtimeapi.ContainerState_CONTAINER_CREATED, StopSignal: runtimeapi.Signal(1000),
	}}
	sandbox := &runtimeapi.PodSandboxStatusResponse{
		Status: &runtimeapi.PodSandboxStatus{
			Id:          fuzzID2,
			Metadata:    &runtimeapi.PodSandboxMetadata{Name: "web-0", Namespace: "shop", Uid: fuzzUID},
			State:       runtimeapi.PodSandboxState_SANDBOX_READY,
			Labels:      map[string]string{LabelPodName: "web-0", LabelPodNamespace: "shop", LabelPodUID: fuzzUID},
			Annotations: map[string]string{"kubernetes.io/config.source": "api"},
		},
		Info: map[string]string{"info": `{"pid":555,"processStatus":"running"}`},
	}
	f.Add(criWire(f, status), "")
	f.Add(criWire(f, created), `{"pid":-3}`)
	f.Add(criWire(f, sandbox), "")
	f.Add(criWire(f, sandbox), `{"pid":1e99}`)
	f.Add([]byte{}, `{"pid":7}`)
	f.Add([]byte{0x0a, 0xff}, "")

	f.Fuzz(func(t *testing.T, wire []byte, verbose string) {
		var cs runtimeapi.ContainerStatusResponse
		if criCodec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &cs) == nil {
			if verbose != "" {
				if cs.Info == nil {
					cs.Info = map[string]string{}
				}
				cs.Info["info"] = verbose
			}
			st, err := infoFromCRI(cs.GetStatus(), cs.GetInfo())
			if (err != nil) != (cs.GetStatus() == nil) {
				t.Fatalf("status %v: error %v", cs.GetStatus(), err)
			}
			if err == nil {
				s := cs.GetStatus()
				if st.Info.ID != s.GetId() || st.Info.MainPID < 0 || st.created && st.Info.MainPID != 0 || st.Info.Sandbox {
					t.Fatalf("status %v maps to %+v created %v", s, st.Info, st.created)
				}
				if n := s.GetLabels()[LabelContainerName]; n != "" && st.Info.Name != n || n == "" && st.Info.Name != s.GetMetadata().GetName() {
					t.Fatalf("name %q from metadata %q and labels %q", st.Info.Name, s.GetMetadata().GetName(), s.GetLabels())
				}
				checkInfo(t, &st.Info)
			}
		}

		var ss runtimeapi.PodSandboxStatusResponse
		if criCodec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &ss) == nil {
			if verbose != "" {
				if ss.Info == nil {
					ss.Info = map[string]string{}
				}
				ss.Info["info"] = verbose
			}
			st, err := infoFromSandbox(ss.GetStatus(), ss.GetInfo())
			if (err != nil) != (ss.GetStatus() == nil) {
				t.Fatalf("sandbox status %v: error %v", ss.GetStatus(), err)
			}
			if err == nil {
				s := ss.GetStatus()
				if st.Info.ID != s.GetId() || !st.Info.Sandbox || st.Info.Name != SandboxName || st.Info.MainPID < 0 || st.created {
					t.Fatalf("sandbox status %v maps to %+v", s, st.Info)
				}
				if n := s.GetMetadata().GetName(); n != "" && st.Info.Pod != n {
					t.Fatalf("pod %q, metadata says %q", st.Info.Pod, n)
				}
				checkInfo(t, &st.Info)
			}
		}
	})
}

// Any preStop annotation is no hook or a hook of a known kind, the same
// from a CRI annotation or a Docker label; with any grace period annotation
// the Info is sound.
func FuzzParseHook(f *testing.F) {
	for _, s := range []string{
		`{"exec":{"command":["sleep","3"]}}`,
		`{"httpGet":{"path":"/quit","port":8080}}`,
		`{"httpGet":{"path":"/q","port":"http","host":"a","scheme":"HTTPS"}}`,
		`{"httpGet":{"port":{"nested":[1,2,{"x":null}]}}}`,
		`{"sleep":{"seconds":5}}`,
		`{"exec":null,"sleep":{"seconds":-1}}`,
		`{"exec":{"command":["\u001b[31m","\\xff",""]}}`,
		`{"tcpSocket":{"port":1}}`,
		`{not json`, ``, ` 30 `, `-5`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := ParseHook(s)
		if h != nil && h.Kind != "exec" && h.Kind != "http" && h.Kind != "sleep" {
			t.Fatalf("ParseHook(%q) = %+v", s, h)
		}
		if strings.TrimSpace(s) == "" && h != nil {
			t.Fatalf("a blank annotation is a hook: %+v", h)
		}
		ann := map[string]string{AnnotationPreStop: s, AnnotationGracePeriod: s}
		fromCRI := &identity.Info{Identity: identity.Identity{ID: fuzzID, Runtime: RuntimeContainerd}}
		applyKubernetes(fromCRI, nil, ann)
		fromDocker := &identity.Info{Identity: identity.Identity{ID: fuzzID, Runtime: RuntimeDocker}}
		applyKubernetes(fromDocker, ann, nil)
		for _, info := range []*identity.Info{fromCRI, fromDocker} {
			if (info.PreStop == nil) != (h == nil) {
				t.Fatalf("annotation %q: hook %+v, ParseHook %+v", s, info.PreStop, h)
			}
			checkInfo(t, info)
		}
		if fromCRI.GracePeriod != fromDocker.GracePeriod {
			t.Fatalf("grace period %d from CRI, %d from Docker", fromCRI.GracePeriod, fromDocker.GracePeriod)
		}
	})
}
