package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// serverFlags select a remote agent (`sigscope serve`) instead of this node.
type serverFlags struct {
	url      string
	caFile   string
	insecure bool
}

func (s *serverFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.url, "server", "", "read from a sigscope agent at this URL (http[s]://[user:password@]host:10042) instead of this node")
	fl.StringVar(&s.caFile, "server-ca", "", "with --server: CA certificate to verify the agent's TLS certificate")
	fl.BoolVar(&s.insecure, "server-insecure-skip-verify", false, "with --server: do not verify the agent's TLS certificate")
}

// get fetches path (with query) from the agent and decodes its JSON into v.
// Basic-auth credentials may sit in the URL's user info.
func (s *serverFlags) get(ctx context.Context, path string, query url.Values, v any) error {
	base, err := url.Parse(s.url)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usageError{fmt.Errorf("--server %q: want http[s]://host[:port]", s.url)}
	}
	u := base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if user := base.User; user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
		req.URL.User = nil
	}
	client, err := s.client()
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("agent %s: %s: %s", base.Redacted(), resp.Status, strings.TrimSpace(string(body)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (s *serverFlags) client() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: s.insecure} //nolint:gosec // explicit user choice
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--server-ca %s: no PEM certificate", s.caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}
