package kubeplugin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// A list is read page by page: limit on every request, and continue as
// the API server gave it, until a page has none.
func TestListPages(t *testing.T) {
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		queries = append(queries, q)
		next := map[string]string{"": "c1", "c1": "c2", "c2": ""}[q.Get("continue")]
		fmt.Fprintf(w, `{"kind":"PodList","metadata":{"continue":%q},"items":[{"metadata":{"name":"p-%s","namespace":"shop"}}]}`, next, q.Get("continue"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/api/v1")
	api := &apiServer{base: u, http: srv.Client()}
	pods, err := api.pods(context.Background(), "", "app=web")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 || pods[0].Metadata.Name != "p-" || pods[2].Metadata.Name != "p-c2" {
		t.Errorf("pods %+v", pods)
	}
	if len(queries) != 3 {
		t.Fatalf("%d requests, want 3 pages", len(queries))
	}
	for i, want := range []string{"", "c1", "c2"} {
		if q := queries[i]; q.Get("limit") != "500" || q.Get("continue") != want || q.Get("labelSelector") != "app=web" {
			t.Errorf("page %d: query %v", i, q)
		}
	}
}
