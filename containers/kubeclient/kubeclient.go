package kubeclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Client is what sigscope asks the API server: core/v1, and the
// EndpointSlices of discovery.k8s.io/v1.
type Client interface {
	// GetPod reads a pod.
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// CreateEvent creates ev in its namespace.
	CreateEvent(ctx context.Context, ev *corev1.Event) (*corev1.Event, error)
	// ListWatch lists and watches resource ([Pods], [Events] or
	// [EndpointSlices]) in every namespace, restricted by fieldSelector
	// when it is not empty: the source of an informer.
	ListWatch(resource, fieldSelector string) cache.ListerWatcher
}

// The resources ListWatch serves.
const (
	Pods           = "pods"           // core/v1 Pod
	Events         = "events"         // core/v1 Event
	EndpointSlices = "endpointslices" // discovery.k8s.io/v1 EndpointSlice
)

// Config returns the client configuration from kubeconfig, or the
// in-cluster one (the pod's service account) when kubeconfig is "".
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

// New returns a Client for cfg's API server. cfg is copied: its
// serializer, API path and group version are set here, the rest (host,
// credentials, TLS, QPS and burst, user agent) is kept.
func New(cfg *rest.Config) (Client, error) {
	// The scheme decodes the core/v1 and discovery/v1 types and the
	// meta/v1 ones any answer may carry (Status, WatchEvent): nothing else
	// is asked. It is built here, not at init, so that an agent without a
	// client pays nothing.
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	// As client-go's generated clients do (CBOR only when its feature gate
	// allows it).
	codecs := rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	base := rest.CopyConfig(cfg)
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	// One REST client per group version, as the clientset has, over one
	// HTTP client as the clientset shares (its transport sends the user
	// agent).
	hc, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	restClient := func(apiPath string, gv *schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(base)
		c.APIPath = apiPath
		c.GroupVersion = gv
		c.NegotiatedSerializer = codecs
		rc, err := rest.RESTClientForConfigAndClient(c, hc)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		return rc, nil
	}
	core, err := restClient("/api", &corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	disc, err := restClient("/apis", &discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &client{rc: core, discovery: disc}, nil
}

type client struct {
	rc        *rest.RESTClient // core/v1
	discovery *rest.RESTClient // discovery.k8s.io/v1
}

func (c *client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.rc.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(pod)
	if err != nil {
		return nil, err
	}
	return pod, nil
}

func (c *client) CreateEvent(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := c.rc.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *client) ListWatch(resource, fieldSelector string) cache.ListerWatcher {
	rc := c.rc
	if resource == EndpointSlices {
		rc = c.discovery
	}
	return cache.NewFilteredListWatchFromClient(rc, resource, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
	})
}
