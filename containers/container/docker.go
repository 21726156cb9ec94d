package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/sigscope/sigscope/containers/identity"
)

// errNotFound: the runtime answered and does not know the container.
var errNotFound = errors.New("container not found")

// maxResponse bounds what is read from a runtime's answer: an inspect is a
// few kilobytes, and a broken or hostile peer must not make us buffer more.
const maxResponse = 8 << 20

// dockerClient speaks the Docker Engine API over its unix socket with
// net/http; the paths are unversioned, so any daemon answers with its own
// API version, and the fields read here exist in all of them.
type dockerClient struct {
	socket string
	http   *http.Client
}

func newDockerClient(socket string) *dockerClient {
	return &dockerClient{
		socket: socket,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConns: 2,
		}},
	}
}

func (c *dockerClient) close() error {
	c.http.CloseIdleConnections()
	return nil
}

// dockerInspect is the part of GET /containers/{id}/json sigscope uses.
type dockerInspect struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	Config struct {
		Image       string            `json:"Image"`
		Labels      map[string]string `json:"Labels"`
		StopSignal  string            `json:"StopSignal"`
		StopTimeout *int              `json:"StopTimeout"`
	} `json:"Config"`
	State struct {
		Status  string `json:"Status"` // created, running, paused, restarting, removing, exited, dead
		Running bool   `json:"Running"`
		Pid     int    `json:"Pid"`
	} `json:"State"`
}

// LabelDockerType is the label dockershim and cri-dockerd put on the Docker
// containers they create for the kubelet: "podsandbox" on a pod's sandbox
// (pause) container, "container" on its application containers.
const (
	LabelDockerType   = "io.kubernetes.docker.type"
	dockerTypeSandbox = "podsandbox"
)

// dockerDefaultStopTimeout is what `docker stop` waits when the container
// sets no StopTimeout.
const dockerDefaultStopTimeout = 10

// info maps an inspect to an Info. Names and labels are kept raw: they are
// untrusted, and escaping them is each output's job.
func (d *dockerInspect) info() *identity.Info {
	info := &identity.Info{
		Identity: identity.Identity{ID: d.ID, Runtime: RuntimeDocker, Name: strings.TrimPrefix(d.Name, "/"), Image: d.Config.Image}, StopSignal: identity.ParseStopSignal(d.Config.StopSignal),
		StopTimeout: dockerDefaultStopTimeout,
		Labels:      d.Config.Labels,
		MainPID:     max(d.State.Pid, 0), // Docker's API may say -1; no pid is 0, as for CRI
		Sandbox:     d.Config.Labels[LabelDockerType] == dockerTypeSandbox,
	}
	if d.Config.StopTimeout != nil {
		info.StopTimeout = *d.Config.StopTimeout
	}
	// dockershim and cri-dockerd store the kubelet's labels and
	// annotations as Docker labels.
	applyKubernetes(info, d.Config.Labels, nil)
	return info
}

// notStarted reports whether the container may still start: Docker knows
// it, and it has neither a main pid nor an end yet (created, or between
// two runs of a restart policy).
func (d *dockerInspect) notStarted() bool {
	if d.State.Pid > 0 {
		return false
	}
	switch d.State.Status {
	case "exited", "dead", "removing":
		return false
	}
	return true
}

func (c *dockerClient) inspect(ctx context.Context, id string) (*dockerInspect, error) {
	var ins dockerInspect
	if err := c.get(ctx, "/containers/"+url.PathEscape(id)+"/json", &ins); err != nil {
		return nil, err
	}
	if ins.ID == "" {
		ins.ID = id
	}
	return &ins, nil
}

// running lists the IDs of the running containers.
func (c *dockerClient) running(ctx context.Context) ([]string, error) {
	var list []struct {
		ID string `json:"Id"`
	}
	if err := c.get(ctx, "/containers/json", &list); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	return ids, nil
}

func (c *dockerClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("docker API %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxResponse)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(body, 512))
		return fmt.Errorf("docker API GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("docker API GET %s: decoding: %w", path, err)
	}
	return nil
}

// dockerClient is a runtimeAPI, and keeps a stop history.
var (
	_ runtimeAPI    = (*dockerClient)(nil)
	_ stopHistorian = (*dockerClient)(nil)
)

func (c *dockerClient) source() string   { return SourceDocker }
func (c *dockerClient) endpoint() string { return c.socket }
func (c *dockerClient) present() bool    { return isSocket(c.socket) }

// describe inspects ref: containers and dockershim's pod sandboxes alike.
func (c *dockerClient) describe(ctx context.Context, ref runtimeRef) (*runtimeAnswer, error) {
	ins, err := c.inspect(ctx, ref.id)
	if err != nil {
		return nil, err
	}
	return &runtimeAnswer{info: ins.info(), notStarted: ins.notStarted(), stopped: !ins.State.Running}, nil
}

// list lists the running containers; dockershim's pod sandboxes are
// containers to Docker, listed with them.
func (c *dockerClient) list(ctx context.Context, _ bool) ([]runtimeRef, error) {
	ids, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	refs := make([]runtimeRef, len(ids))
	for i, id := range ids {
		refs[i] = runtimeRef{id: id}
	}
	return refs, nil
}

func (c *dockerClient) historyRuntime() string { return RuntimeDocker }

// isSocket reports whether path is a socket.
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
