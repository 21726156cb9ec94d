package kubeclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func testSlice(name, rv string) discoveryv1.EndpointSlice {
	ready := false
	return discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "shop", ResourceVersion: rv, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1"}}}}
}

func testPod(name, rv string) corev1.Pod {
	return corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", ResourceVersion: rv},
		Spec:       corev1.PodSpec{NodeName: "node-1"}}
}

// apiServer answers the requests sigscope makes as kube-apiserver does,
// in JSON: a pod read, event creation, and pods and EndpointSlices listed
// and watched (plain or as a watch list: the initial objects, then the
// bookmark that ends them).
type apiServer struct {
	t  *testing.T
	mu sync.Mutex
	ua []string // user agents seen
}

func (s *apiServer) status(w http.ResponseWriter, code int, reason metav1.StatusReason) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: string(reason)})
}

// listWatch answers a list with list, and a watch with one more object,
// added; a watch list first sends the initial object and the bookmark that
// ends the initial events.
func (s *apiServer) listWatch(w http.ResponseWriter, r *http.Request, list, initial, added, bookmark any) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	enc := json.NewEncoder(w)
	send := func(typ string, obj any) {
		_ = enc.Encode(map[string]any{"type": typ, "object": obj})
		w.(http.Flusher).Flush()
	}
	if q.Get("sendInitialEvents") == "true" {
		send("ADDED", initial)
		send("BOOKMARK", bookmark)
	}
	send("ADDED", added)
	<-r.Context().Done()
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ua = append(s.ua, r.UserAgent())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/shop/pods/web-1":
		_ = json.NewEncoder(w).Encode(testPod("web-1", "5"))
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/shop/pods/gone":
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/shop/events":
		var ev corev1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.Kind != "Event" || ev.APIVersion != "v1" {
			s.t.Errorf("event body: %v, kind %q apiVersion %q", err, ev.Kind, ev.APIVersion)
			s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
		if ev.Name == "dup" {
			s.status(w, http.StatusConflict, metav1.StatusReasonAlreadyExists)
			return
		}
		ev.UID = "created"
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&ev)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods":
		if got := q.Get("fieldSelector"); got != "spec.nodeName=node-1" {
			s.t.Errorf("pods requested with fieldSelector %q", got)
		}
		s.listWatch(w, r, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []corev1.Pod{testPod("web-1", "10")}},
			testPod("web-1", "10"), testPod("web-2", "11"),
			corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	case r.Method == http.MethodGet && r.URL.Path == "/apis/discovery.k8s.io/v1/endpointslices":
		if got := q.Get("fieldSelector"); got != "" {
			s.t.Errorf("endpointslices requested with fieldSelector %q", got)
		}
		s.listWatch(w, r, &discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "20"}, Items: []discoveryv1.EndpointSlice{testSlice("web-abcde", "20")}},
			testSlice("web-abcde", "20"), testSlice("web-fghij", "21"),
			discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	default:
		s.t.Errorf("unexpected %s %s", r.Method, r.URL)
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound)
	}
}

// The client speaks to an API server over HTTP as client-go's clientset
// would: objects decoded, the API's errors kept (kubeevents tells them
// apart), the user agent sent, and informers filled from a list and a
// watch, pods with the field selector asked for and EndpointSlices from
// their own API group.
func TestClient(t *testing.T) {
	api := &apiServer{t: t}
	srv := httptest.NewServer(api)
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL, UserAgent: "sigscope-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pod, err := c.GetPod(ctx, "shop", "web-1")
	if err != nil || pod.Name != "web-1" || pod.Spec.NodeName != "node-1" {
		t.Errorf("GetPod: %+v, %v", pod, err)
	}
	if _, err := c.GetPod(ctx, "shop", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("GetPod of a missing pod: %v, want NotFound", err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.1", Namespace: "shop"}, Reason: "StopSignalIgnored"}
	if got, err := c.CreateEvent(ctx, ev); err != nil || got.UID != "created" || got.Reason != "StopSignalIgnored" {
		t.Errorf("CreateEvent: %+v, %v", got, err)
	}
	ev.Name = "dup"
	if _, err := c.CreateEvent(ctx, ev); !apierrors.IsAlreadyExists(err) {
		t.Errorf("CreateEvent of an existing name: %v, want AlreadyExists", err)
	}

	// Pods in core/v1, with the field selector; EndpointSlices in
	// discovery.k8s.io/v1.
	for _, tc := range []struct {
		resource, selector string
		obj                runtime.Object
		keys               []string
	}{
		{Pods, "spec.nodeName=node-1", &corev1.Pod{}, []string{"shop/web-1", "shop/web-2"}},
		{EndpointSlices, "", &discoveryv1.EndpointSlice{}, []string{"shop/web-abcde", "shop/web-fghij"}},
	} {
		inf := cache.NewSharedIndexInformer(c.ListWatch(tc.resource, tc.selector), tc.obj, 0, cache.Indexers{})
		go inf.RunWithContext(ctx)
		for len(inf.GetStore().ListKeys()) != len(tc.keys) {
			if ctx.Err() != nil {
				t.Fatalf("%s informer holds %v, want %v", tc.resource, inf.GetStore().ListKeys(), tc.keys)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, key := range tc.keys {
			if _, ok, _ := inf.GetStore().GetByKey(key); !ok {
				t.Errorf("%s informer lacks %s: %v", tc.resource, key, inf.GetStore().ListKeys())
			}
		}
		if o, _, _ := inf.GetStore().GetByKey("shop/web-abcde"); tc.resource == EndpointSlices {
			sl, ok := o.(*discoveryv1.EndpointSlice)
			if !ok || sl.Labels[discoveryv1.LabelServiceName] != "web" || len(sl.Endpoints) != 1 ||
				sl.Endpoints[0].TargetRef.Name != "web-1" || *sl.Endpoints[0].Conditions.Ready {
				t.Errorf("EndpointSlice decoded as %+v", o)
			}
		}
	}
	cancel()

	api.mu.Lock()
	defer api.mu.Unlock()
	for _, ua := range api.ua {
		if ua != "sigscope-test" {
			t.Errorf("user agent %q, want sigscope-test", ua)
		}
	}
}
