// Package kubeclienttest adapts client-go's clientset, the fake one of
// tests above all, to kubeclient.Client. Only tests import it: it links in
// the clientset that package kubeclient keeps out of the binary.
package kubeclienttest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sigscope/sigscope/containers/kubeclient"
)

// FromClientset returns c as a kubeclient.Client.
func FromClientset(c kubernetes.Interface) kubeclient.Client { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

func (s clientset) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return s.c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (s clientset) CreateEvent(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	return s.c.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

// ListWatch is what client-go's informer factory builds for pods, events
// and EndpointSlices, including its check that the fake clientset cannot
// stream a watch list.
func (s clientset) ListWatch(resource, fieldSelector string) cache.ListerWatcher {
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
		switch resource {
		case kubeclient.Pods:
			return s.c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		case kubeclient.EndpointSlices:
			return s.c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, o)
		}
		return s.c.CoreV1().Events(metav1.NamespaceAll).List(ctx, o)
	}
	watchFn := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
		switch resource {
		case kubeclient.Pods:
			return s.c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		case kubeclient.EndpointSlices:
			return s.c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).Watch(ctx, o)
		}
		return s.c.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, o)
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFn,
	}, s.c)
}
