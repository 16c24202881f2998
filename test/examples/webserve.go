package examples

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// WebServe is a web configuration as a Secret ships it and the scrape settings a monitor uses.
type WebServe struct {
	Root       string // repository root (the exporter is built from it)
	WebConfig  string // web-config.yml
	TLSDir     string // where it expects tls.crt and tls.key (the TLS Secret's mount)
	User       string // basic auth the monitor sends ("" when none)
	Password   string
	ServerName string // the name the monitor verifies the certificate for ("" when no TLS)
}

// CheckWebConfigServes runs the real exporter with w.WebConfig (its certificate paths pointed at
// a CA and a certificate made here, as a TLS Secret would hold them) and scrapes it the way the
// monitor tells Prometheus to: HTTPS verified against the CA under ServerName, with User and
// Password. So a shipped or rendered bcrypt hash matches its password, and the file is one
// exporter-toolkit accepts. Without credentials or with a wrong password it must answer 401.
// ServerName "" means no TLS (plain HTTP), User "" no basic auth.
func CheckWebConfigServes(t *testing.T, w WebServe) {
	t.Helper()
	_, err := exec.LookPath("go")
	testenv.Require(t, err == nil, "go not in PATH")
	root := w.Root
	webConfig, tlsDir, user, pass, serverName := w.WebConfig, w.TLSDir, w.User, w.Password, w.ServerName
	tmp := t.TempDir()
	scheme, caPool := "http", (*x509.CertPool)(nil)
	if serverName != "" {
		scheme, caPool = "https", writeCerts(t, tmp, serverName)
	}
	cfgPath := filepath.Join(tmp, "web-config.yml")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(webConfig, tlsDir, tmp)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "quota_exporter")
	testenv.BuildGo(t, root, "./exporter/cmd/quota_exporter", bin)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--web.listen-address="+addr, "--web.config.file="+cfgPath, "--path.podlogs=",
		"--no-collector.process", "--no-collector.go", "--no-collector.jvm", "--no-collector.malloc", "--no-collector.smaps")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: caPool, ServerName: serverName},
	}}
	get := func(scheme, user, pass string) (int, string, error) {
		req, _ := http.NewRequest("GET", scheme+"://"+addr+"/metrics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	var code int
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, body, err = get(scheme, user, pass); err == nil {
			break
		}
	}
	if err != nil || code != http.StatusOK || !strings.Contains(body, "quota_exporter_build_info") {
		t.Fatalf("%s scrape with the monitor's credentials: %d %v (%d bytes)\nexporter log:\n%s", scheme, code, err, len(body), logs.String())
	}
	if user != "" {
		if code, _, err := get(scheme, user, pass+"x"); err != nil || code != http.StatusUnauthorized {
			t.Errorf("a wrong password got %d %v, want 401", code, err)
		}
		if code, _, err := get(scheme, "", ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("no credentials got %d %v, want 401", code, err)
		}
	}
	if scheme == "https" {
		if code, _, err := get("http", user, pass); err == nil && code == http.StatusOK {
			t.Error("plain HTTP was served")
		}
	}
}

// writeCerts writes a CA and a server certificate for name (tls.crt, tls.key, ca.crt: the keys
// of a cert-manager TLS Secret) and returns a pool with the CA.
func writeCerts(t *testing.T, dir, name string) *x509.CertPool {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: srvDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: srvKeyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}
