// Package kubeclient is the agent's Kubernetes API client: the core/v1
// requests that kubeevents and kubemeta make (read a pod, create an event,
// list and watch pods and events), over a client-go REST client whose
// scheme knows the core/v1 types only.
//
// It exists for the size of the binary: client-go's clientset
// (k8s.io/client-go/kubernetes) and its informer factory link in the typed
// client, informer, lister and apply configuration of every API group, and
// the OpenAPI models those need, about 350 packages, for these four
// requests. What it does not own: what is asked and what the answers mean
// (kubeevents, kubemeta). Tests that drive those packages with client-go's
// fake clientset adapt it with package kubeclienttest.
package kubeclient
