package kubeplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// apiServer is the little of the API server the plugin reads: lists of
// pods and nodes, and the pod proxy's URLs. It decodes only the fields it
// uses, instead of client-go's typed clientset, whose scheme registers every
// API group (k8s.io/api, ~15 MB of the plugin's binary for two lists).
type apiServer struct {
	base *url.URL     // the server's URL with the core API's path, /api/v1
	http *http.Client // the user's credentials (rest.HTTPClientFor)
}

func newAPIServer(cfg *rest.Config, hc *http.Client) (*apiServer, error) {
	host, _, err := rest.DefaultServerUrlFor(cfg) // the server's URL, with its path prefix if any
	if err != nil {
		return nil, err
	}
	base := *host
	base.Path = path.Join(base.Path, "/api/v1") // the core group, as client-go's core/v1 client has it
	return &apiServer{base: &base, http: hc}, nil
}

// pod holds the fields of a v1 Pod the plugin reads.
type pod struct {
	Metadata struct {
		Name              string     `json:"name"`
		Namespace         string     `json:"namespace"`
		CreationTimestamp time.Time  `json:"creationTimestamp"`
		DeletionTimestamp *time.Time `json:"deletionTimestamp"`
		OwnerReferences   []struct {
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Controller *bool  `json:"controller"`
		} `json:"ownerReferences"`
		// Labels holds the labels the plugin reads: a Deployment's (or an
		// Argo Rollout's) ReplicaSet names itself NAME-HASH
		// (timeline.ControllerWorkload).
		Labels struct {
			PodTemplateHash         string `json:"pod-template-hash"`
			RolloutsPodTemplateHash string `json:"rollouts-pod-template-hash"`
		} `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		NodeName    string `json:"nodeName"`
		HostNetwork bool   `json:"hostNetwork"` // the node's addresses, not its own
		Containers  []struct {
			Ports []struct {
				Name          string `json:"name"`
				ContainerPort int32  `json:"containerPort"`
			} `json:"ports"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			State struct {
				Waiting *struct {
					Reason string `json:"reason"`
				} `json:"waiting"`
				Terminated *struct {
					FinishedAt time.Time `json:"finishedAt"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
		PodIPs []struct {
			IP string `json:"ip"`
		} `json:"podIPs"`
	} `json:"status"`
}

// node holds the fields of a v1 Node the plugin reads.
type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"` // InternalIP, ExternalIP, Hostname, ...
			Address string `json:"address"`
		} `json:"addresses"`
	} `json:"status"`
}

// url is the URL of an API path under /api/v1: elems are joined as
// client-go's request builder joins them.
func (s *apiServer) url(query url.Values, elems ...string) *url.URL {
	u := *s.base
	u.Path = path.Join(append([]string{s.base.Path}, elems...)...)
	u.RawQuery = query.Encode()
	return &u
}

// listLimit is the size of a list's pages, as kubectl's (--chunk-size):
// a cluster's pods come in pages rather than in one answer that the API
// server and the plugin would hold whole.
const listLimit = 500

// pods lists the pods of namespace ns ("": every namespace) that selector
// selects.
func (s *apiServer) pods(ctx context.Context, ns, selector string) ([]pod, error) {
	q := url.Values{}
	if selector != "" {
		q.Set("labelSelector", selector)
	}
	elems := []string{"pods"}
	if ns != "" {
		elems = []string{"namespaces", ns, "pods"}
	}
	return listAll[pod](ctx, s, "pods", q, elems...)
}

// nodes lists every node.
func (s *apiServer) nodes(ctx context.Context) ([]node, error) {
	return listAll[node](ctx, s, "nodes", url.Values{}, "nodes")
}

// listAll lists resource at the path elems with query q, page by page
// (limit and continue, as the API server pages a list).
func listAll[T any](ctx context.Context, s *apiServer, resource string, q url.Values, elems ...string) ([]T, error) {
	return listPages[T](ctx, s, resource, q, func(q url.Values) *url.URL { return s.url(q, elems...) })
}

// listPages lists resource at the URL at makes of a query, page by page.
func listPages[T any](ctx context.Context, s *apiServer, resource string, q url.Values, at func(url.Values) *url.URL) ([]T, error) {
	q.Set("limit", strconv.Itoa(listLimit))
	var items []T
	for {
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []T `json:"items"`
		}
		if err := s.list(ctx, resource, at(q), &page); err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		if page.Metadata.Continue == "" {
			return items, nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// proxyURL is the pod proxy's URL of path at pod ns/name (name may be
// "https:POD:PORT" or "POD:PORT").
func (s *apiServer) proxyURL(ns, name, suffix string) *url.URL {
	return s.url(nil, "namespaces", ns, "pods", name, "proxy", suffix)
}

// list GETs u, a list of resource, into v. An error answer is a
// *apierrors.StatusError as client-go returns it, so that
// apierrors.IsForbidden and the message hold.
func (s *apiServer) list(ctx context.Context, resource string, u *url.URL, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return statusError(resp.StatusCode, resource, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", u.Path, err)
	}
	return nil
}

// statusError is the API server's error answer to a list: its Status
// object, or one made from the HTTP status as client-go makes it when the
// body is none.
func statusError(code int, resource string, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewGenericServerResponse(code, "list", schema.GroupResource{Resource: resource}, "", string(body), 0, true)
}
