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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func testPod(name, rv string) corev1.Pod {
	return corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", ResourceVersion: rv},
		Spec:       corev1.PodSpec{NodeName: "node-1"}}
}

// apiServer answers the requests sigscope makes as kube-apiserver does,
// in JSON: a pod read, event creation, and pods listed and watched (plain
// or as a watch list: the initial pods, then the bookmark that ends them).
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
		if q.Get("watch") != "true" {
			_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []corev1.Pod{testPod("web-1", "10")}})
			return
		}
		enc := json.NewEncoder(w)
		send := func(typ string, obj any) {
			_ = enc.Encode(map[string]any{"type": typ, "object": obj})
			w.(http.Flusher).Flush()
		}
		if q.Get("sendInitialEvents") == "true" {
			send("ADDED", testPod("web-1", "10"))
			send("BOOKMARK", corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		}
		send("ADDED", testPod("web-2", "11"))
		<-r.Context().Done()
	default:
		s.t.Errorf("unexpected %s %s", r.Method, r.URL)
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound)
	}
}

// The client speaks to an API server over HTTP as client-go's clientset
// would: objects decoded, the API's errors kept (kubeevents tells them
// apart), the user agent sent, and an informer filled from a list and a
// watch with the field selector asked for.
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

	inf := cache.NewSharedIndexInformer(c.ListWatch("pods", "spec.nodeName=node-1"), &corev1.Pod{}, 0, cache.Indexers{})
	go inf.RunWithContext(ctx)
	for !(len(inf.GetStore().ListKeys()) == 2) {
		if ctx.Err() != nil {
			t.Fatalf("informer holds %v, want shop/web-1 and shop/web-2", inf.GetStore().ListKeys())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, key := range []string{"shop/web-1", "shop/web-2"} {
		if _, ok, _ := inf.GetStore().GetByKey(key); !ok {
			t.Errorf("informer lacks %s: %v", key, inf.GetStore().ListKeys())
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
