package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// criClient asks one CRI endpoint (containerd, CRI-O) about containers.
// The gRPC connection is made at first use and kept.
type criClient struct {
	socket string

	mu   sync.Mutex
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
	name string // runtime name from Version, once known
	// notCRI is the socket file found to serve no CRI API (a containerd
	// with its CRI plugin disabled, as Docker's own is): not a runtime to
	// ask while that file stays.
	notCRI atomic.Pointer[fileID]
}

// errNoCRI is a CRI socket's answer that it serves no CRI API
// (codes.Unimplemented): a runtime that is absent, not one that fails.
var errNoCRI = errors.New("the socket serves no CRI API")

func newCRIClient(socket string) *criClient { return &criClient{socket: socket} }

// present reports whether the socket exists and may serve the CRI API. A
// node runs one or two of the runtimes sigscope knows: a missing socket is
// a runtime that is not installed, not an error, and it is not dialled;
// nor is a socket that answered it serves no CRI API.
func (c *criClient) present() bool {
	if !isSocket(c.socket) {
		return false
	}
	if id := c.notCRI.Load(); id != nil && *id == socketFile(c.socket) {
		return false
	}
	return true
}

// noCRI turns a call's Unimplemented (the service, not a method a newer
// API added) into errNoCRI, and remembers the socket file that said it.
func (c *criClient) noCRI(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "unknown service") {
		id := socketFile(c.socket)
		c.notCRI.Store(&id)
		return fmt.Errorf("%w (%v)", errNoCRI, err)
	}
	return err
}

func (c *criClient) client() (runtimeapi.RuntimeServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt != nil {
		return c.rt, nil
	}
	conn, err := grpc.NewClient("unix://"+c.socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponse)),
		grpc.WithUnaryInterceptor(c.noCRI))
	if err != nil {
		return nil, fmt.Errorf("CRI %s: %w", c.socket, err)
	}
	c.conn, c.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	return c.rt, nil
}

func (c *criClient) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn, c.rt = nil, nil
	return err
}

// runtimeName asks the endpoint who it is: "containerd" or "cri-o".
func (c *criClient) runtimeName(ctx context.Context) (string, error) {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	if name != "" {
		return name, nil
	}
	rt, err := c.client()
	if err != nil {
		return "", err
	}
	v, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("CRI %s: Version: %w", c.socket, err)
	}
	name = criRuntimeName(v.GetRuntimeName())
	c.mu.Lock()
	c.name = name
	c.mu.Unlock()
	return name, nil
}

func criRuntimeName(s string) string {
	switch strings.ToLower(s) {
	case "containerd":
		return RuntimeContainerd
	case "cri-o", "crio":
		return RuntimeCRIO
	}
	return s
}

// criStatus is a container or pod sandbox as a CRI endpoint describes it.
type criStatus struct {
	Info identity.Info
	// created: a container created and not started yet, so it has no main
	// pid yet; asking again later gives one.
	created bool
}

// status returns ContainerStatus (verbose) for id, or errNotFound.
func (c *criClient) status(ctx context.Context, id string) (*criStatus, error) {
	rt, err := c.client()
	if err != nil {
		return nil, err
	}
	resp, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		if isCRINotFound(err) {
			return nil, errNotFound
		}
		return nil, fmt.Errorf("CRI %s: ContainerStatus: %w", c.socket, err)
	}
	st, err := infoFromCRI(resp.GetStatus(), resp.GetInfo())
	if err != nil {
		return nil, fmt.Errorf("CRI %s: %w", c.socket, err)
	}
	return st, nil
}

// sandboxStatus returns PodSandboxStatus (verbose) for id, or errNotFound.
func (c *criClient) sandboxStatus(ctx context.Context, id string) (*criStatus, error) {
	rt, err := c.client()
	if err != nil {
		return nil, err
	}
	resp, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		if isCRINotFound(err) || status.Code(err) == codes.Unimplemented {
			return nil, errNotFound
		}
		return nil, fmt.Errorf("CRI %s: PodSandboxStatus: %w", c.socket, err)
	}
	st, err := infoFromSandbox(resp.GetStatus(), resp.GetInfo())
	if err != nil {
		return nil, fmt.Errorf("CRI %s: %w", c.socket, err)
	}
	return st, nil
}

// lookup describes id, a container or a pod sandbox: their cgroups look
// alike (/kubepods/<qos>/pod<uid>/<64 hex>), and CRI answers NotFound to
// ContainerStatus for a sandbox's id.
func (c *criClient) lookup(ctx context.Context, id string) (*criStatus, error) {
	st, err := c.status(ctx, id)
	if !errors.Is(err, errNotFound) {
		return st, err
	}
	return c.sandboxStatus(ctx, id)
}

// running lists the IDs of the running containers.
func (c *criClient) running(ctx context.Context) ([]string, error) {
	rt, err := c.client()
	if err != nil {
		return nil, err
	}
	resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return nil, fmt.Errorf("CRI %s: ListContainers: %w", c.socket, err)
	}
	var ids []string
	for _, ct := range resp.GetContainers() {
		ids = append(ids, ct.GetId())
	}
	return ids, nil
}

// isCRINotFound: containerd answers NotFound; CRI-O has used Unknown with
// a "not found" message in some versions.
func isCRINotFound(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	return st.Code() == codes.NotFound ||
		(st.Code() == codes.Unknown && strings.Contains(strings.ToLower(st.Message()), "not found"))
}

// infoFromCRI maps a CRI ContainerStatus and its verbose info to an Info:
// the kubelet's labels give pod, namespace, uid and container name, its
// annotation the grace period, the verbose info the main pid.
func infoFromCRI(s *runtimeapi.ContainerStatus, verbose map[string]string) (*criStatus, error) {
	if s == nil {
		return nil, errors.New("ContainerStatus without a status")
	}
	v := readVerbose(verbose)
	out := &criStatus{Info: identity.Info{
		Identity: identity.Identity{ID: s.GetId(), Name: s.GetMetadata().GetName(), Image: s.GetImage().GetImage()}, Labels: s.GetLabels(),
		Annotations: s.GetAnnotations(),
		StopSignal:  criSignal(s.GetStopSignal()),
		MainPID:     v.PID,
	}}
	if out.Info.StopSignal == 0 {
		// CRI-O (1.34) leaves stop_signal unset and stops the container
		// with the signal it wrote into the OCI spec: the image's
		// STOPSIGNAL, or the pod's lifecycle.stopSignal.
		out.Info.StopSignal = identity.ParseStopSignal(v.RuntimeSpec.Annotations[ociStopSignalAnnotation])
	}
	if out.Info.Image == "" {
		out.Info.Image = s.GetImageRef()
	}
	applyKubernetes(&out.Info, out.Info.Labels, out.Info.Annotations)
	out.created = s.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED && out.Info.MainPID == 0
	return out, nil
}

// SandboxName is the container name a pod's sandbox gets, the kubelet's
// name for its infrastructure container ("k8s_POD_..." under dockershim
// and cri-dockerd, which label it so).
const SandboxName = "POD"

// infoFromSandbox maps a PodSandboxStatus and its verbose info to an Info
// with Sandbox set: the pod's name, namespace and uid from the sandbox's
// metadata (the kubelet's labels as a fallback), the pause process's pid
// from the verbose info.
func infoFromSandbox(s *runtimeapi.PodSandboxStatus, verbose map[string]string) (*criStatus, error) {
	if s == nil {
		return nil, errors.New("PodSandboxStatus without a status")
	}
	info := identity.Info{
		Identity: identity.Identity{ID: s.GetId()}, Sandbox: true,
		Labels:      s.GetLabels(),
		Annotations: s.GetAnnotations(),
		MainPID:     verbosePID(verbose),
	}
	applyKubernetes(&info, info.Labels, info.Annotations)
	info.Name = SandboxName
	md := s.GetMetadata()
	for _, f := range []struct {
		dst *string
		v   string
	}{{&info.Pod, md.GetName()}, {&info.Namespace, md.GetNamespace()}, {&info.PodUID, md.GetUid()}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	return &criStatus{Info: info}, nil
}

// ociStopSignalAnnotation is the OCI image spec's annotation of the stop
// signal, which CRI-O writes into each container's runtime spec.
const ociStopSignalAnnotation = "org.opencontainers.image.stopSignal"

// verboseInfo is what sigscope reads of the verbose "info" JSON that
// containerd and CRI-O both write for a container or sandbox: the host
// pid of its process ({"pid": N, ...}), and its OCI runtime spec's
// annotations.
type verboseInfo struct {
	PID         int `json:"pid"`
	RuntimeSpec struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"runtimeSpec"`
}

// readVerbose reads the verbose "info" JSON; zero values for what is
// missing. A blob that cannot be read costs the pid and the annotations,
// not the lookup.
func readVerbose(verbose map[string]string) verboseInfo {
	var v verboseInfo
	raw := verbose["info"]
	if raw == "" || json.Unmarshal([]byte(raw), &v) != nil || v.PID < 0 {
		return verboseInfo{}
	}
	return v
}

// verbosePID is the host pid in the verbose "info" JSON; 0 when missing.
func verbosePID(verbose map[string]string) int { return readVerbose(verbose).PID }

// criSignal reads a CRI stop signal (ContainerStatus.stop_signal: the
// signal the runtime stops the container with, as containerd 2.x and
// CRI-O report it: the kubelet's lifecycle.stopSignal, else the image's
// STOPSIGNAL, else SIGTERM); the runtime default is 0, as in Info. The
// enum's names are not all the kernel's: SIGRTMINPLUS3 is SIGRTMIN+3
// (34+3, as runc and the kubelet count them), SIGRTMAXMINUS2 SIGRTMAX-2
// (64-2), and SIGCLD, SIGIOT and SIGPOLL are other names of SIGCHLD,
// SIGABRT and SIGIO.
func criSignal(s runtimeapi.Signal) sigvocab.Signal {
	if s == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		return 0
	}
	name, ok := runtimeapi.Signal_name[int32(s)]
	if !ok {
		return 0
	}
	name = strings.TrimPrefix(name, "SIGNAL_")
	if n, ok := strings.CutPrefix(name, "SIGRTMINPLUS"); ok {
		name = "SIGRTMIN+" + n
	}
	if n, ok := strings.CutPrefix(name, "SIGRTMAXMINUS"); ok {
		name = "SIGRTMAX-" + n
	}
	switch name {
	case "SIGCLD":
		return sigvocab.SIGCHLD
	case "SIGIOT":
		name = "SIGABRT"
	case "SIGPOLL":
		name = "SIGIO"
	case "SIGRTMAX":
		return sigvocab.MaxSignal
	}
	if n, ok := strings.CutPrefix(name, "SIGRTMAX-"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 || k > sigvocab.MaxSignal-int(identity.ParseStopSignal("SIGRTMIN")) {
			return 0
		}
		return sigvocab.MaxSignal - sigvocab.Signal(k)
	}
	return identity.ParseStopSignal(name)
}

// readySandboxes lists the IDs of the pod sandboxes that run; none from a
// runtime that does not implement the call.
func (c *criClient) readySandboxes(ctx context.Context) ([]string, error) {
	rt, err := c.client()
	if err != nil {
		return nil, err
	}
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CRI %s: ListPodSandbox: %w", c.socket, err)
	}
	var ids []string
	for _, s := range resp.GetItems() {
		ids = append(ids, s.GetId())
	}
	return ids, nil
}

var _ runtimeAPI = (*criClient)(nil)

func (c *criClient) source() string   { return SourceCRI }
func (c *criClient) endpoint() string { return c.socket }

// describe asks about ref with ContainerStatus, PodSandboxStatus, or both
// in turn when the list did not say which it is; the answer names the
// runtime when it says who it is (cri-dockerd's answer is a Docker
// container's).
func (c *criClient) describe(ctx context.Context, ref runtimeRef) (*runtimeAnswer, error) {
	var st *criStatus
	var err error
	switch ref.kind {
	case refContainer:
		st, err = c.status(ctx, ref.id)
	case refSandbox:
		st, err = c.sandboxStatus(ctx, ref.id)
	default:
		st, err = c.lookup(ctx, ref.id)
	}
	if err != nil {
		return nil, err
	}
	info := &st.Info
	info.Runtime = ""
	if name, err := c.runtimeName(ctx); err == nil {
		info.Runtime = name
	}
	return &runtimeAnswer{info: info, notStarted: st.created}, nil
}

// list lists the running containers, then the ready pod sandboxes when
// sandboxes is set. It fails when the endpoint does not say who it is, so
// that what it lists is named.
func (c *criClient) list(ctx context.Context, sandboxes bool) ([]runtimeRef, error) {
	if _, err := c.runtimeName(ctx); err != nil {
		return nil, err
	}
	ids, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	var sids []string
	if sandboxes {
		if sids, err = c.readySandboxes(ctx); err != nil {
			return nil, err
		}
	}
	refs := make([]runtimeRef, 0, len(ids)+len(sids))
	for _, id := range ids {
		refs = append(refs, runtimeRef{id: id, kind: refContainer})
	}
	for _, id := range sids {
		refs = append(refs, runtimeRef{id: id, kind: refSandbox})
	}
	return refs, nil
}
