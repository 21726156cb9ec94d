package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// The --web.config.file an operator gives the agent, checked by New with
// exporter-toolkit's web.Validate: any content is an error or accepted,
// never a panic. The config sits next to a real key pair, so that TLS
// settings naming cert.pem and key.pem get past reading them.
func FuzzWebConfig(f *testing.F) {
	dir := f.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		f.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		f.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"cert.pem": {Type: "CERTIFICATE", Bytes: der},
		"key.pem":  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	// bcrypt of "secret", cost 4, picked without a '/' (see the skip below).
	const hash = "$2a$04$C.ZucmbSW4X.mfKa1AFy2e2vQgb17bJrllYpt1GCJfQ2VWxQ94jcm"

	for _, s := range []string{
		"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n",
		"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: cert.pem\n" +
			"  min_version: TLS13\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [X25519]\n",
		"basic_auth_users:\n  admin: " + hash + "\n",
		"basic_auth_users:\n  admin: not-a-hash\n",
		"http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n",
		"tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n  key_file: key.pem\n",
		"tls_server_config:\n  cert_file: missing.pem\n",
		"tls_server_config: {min_version: TLS10, max_version: TLS11}\n",
		"unknown_key: 1\n",
		"{}", "", "- a\n- b\n", "tls_server_config: &a [*a]\n",
	} {
		f.Add(s)
	}

	path := filepath.Join(dir, "web.yml")
	f.Fuzz(func(t *testing.T, content string) {
		// The config may name files to read. Nothing outside dir: no
		// absolute or relative path (a '/', or an escape or a !!binary
		// string that could make one), so that a fuzzed config never
		// reads /dev/zero or waits on a FIFO.
		if strings.ContainsAny(content, `/\`) || strings.Contains(content, "binary") {
			t.Skip("names a path outside the config's directory")
		}
		// A worker calls the function once at a time: one file will do.
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = web.Validate(path)
	})
}
