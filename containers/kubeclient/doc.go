// Package kubeclient is the agent's Kubernetes API client: the requests
// that kubeevents and kubemeta make (read a pod, create an event, list and
// watch pods and events in core/v1, and EndpointSlices in
// discovery.k8s.io/v1), over two client-go REST clients, one per API group,
// whose scheme knows those two groups' types only.
//
// It exists for the size of the binary: client-go's clientset
// (k8s.io/client-go/kubernetes) and its informer factory link in the typed
// client, informer, lister and apply configuration of every API group, and
// the OpenAPI models those need, about 350 packages, for these five
// requests. What it does not own: what is asked and what the answers mean
// (kubeevents, kubemeta). Tests that drive those packages with client-go's
// fake clientset adapt it with package kubeclienttest.
package kubeclient
