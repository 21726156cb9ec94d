package identity

import (
	"cmp"
	"strings"

	"github.com/sigscope/sigscope/internal/textsafe"
)

// Identity is who a container is: the fields every output names it by. It
// is the one identity type: Info (what the resolver learned), Summary (the
// JSON of trace lines, audit results and the agent's API) and the
// timeline's episode embed it, so a field is declared, named and matched
// here only. Its JSON is the first fields of each of those objects
// (docs/events.md); an empty field is left out.
//
// The six fields before PodUID name the container; PodUID tells a pod from
// an earlier one of the same name (a StatefulSet's pod deleted and made
// again), for whoever joins episodes with the API server's records.
type Identity struct {
	ID      string `json:"id,omitempty"`      // full container ID (64 hex for docker/containerd/CRI-O/podman)
	Name    string `json:"name,omitempty"`    // runtime name (docker: without the leading "/"); Kubernetes: the container name
	Image   string `json:"image,omitempty"`   // as the runtime names it
	Runtime string `json:"runtime,omitempty"` // "docker", "containerd", "cri-o", "podman"

	// Kubernetes, from the io.kubernetes.* labels and annotations.
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	PodUID    string `json:"pod_uid,omitempty"` // the io.kubernetes.pod.uid label, or the CRI sandbox's metadata
}

// ShortID is the 12-character ID docker ps and crictl show.
func (c Identity) ShortID() string { return ShortID(c.ID) }

// ShortID shortens a container ID the way docker ps and crictl do.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// DisplayName names the container compactly, raw (escape it for a
// terminal): namespace/pod/container for Kubernetes, else the runtime's
// name, else the short ID.
func (c Identity) DisplayName() string {
	switch {
	case c.Pod != "":
		return c.Namespace + "/" + c.Pod + "/" + c.Name
	case c.Name != "":
		return c.Name
	}
	return c.ShortID()
}

// UTF8 is c with its strings made valid UTF-8, invalid bytes kept as \xNN:
// names, images and pods are anyone's, and JSON and metric labels must be
// valid UTF-8.
func (c Identity) UTF8() Identity {
	for _, s := range []*string{&c.ID, &c.Name, &c.Image, &c.Runtime, &c.Pod, &c.Namespace, &c.PodUID} {
		*s = textsafe.UTF8(*s)
	}
	return c
}

// Compare orders identities by namespace, pod, name, then ID: the order of
// every list of containers sigscope prints.
func (c Identity) Compare(o Identity) int {
	return cmp.Or(strings.Compare(c.Namespace, o.Namespace), strings.Compare(c.Pod, o.Pod),
		strings.Compare(c.Name, o.Name), strings.Compare(c.ID, o.ID))
}
