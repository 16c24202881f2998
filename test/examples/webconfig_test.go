package examples

import (
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// TestWebConfigServes runs the real exporter with the web-tls component's web-config.yml and
// scrapes it as the patched PodMonitor tells Prometheus to (CheckWebConfigServes): the shipped
// bcrypt hash matches the shipped password, and exporter-toolkit accepts the file.
func TestWebConfigServes(t *testing.T) {
	root := testenv.RepoRoot()
	r := applyComponents(t, "web-tls")
	secrets := map[string]map[string]string{}
	for _, s := range r.m.Secrets {
		secrets[s.Name] = s.StringData
	}
	ep := r.pm.Spec.PodMetricsEndpoints[0]
	user := secrets[ep.BasicAuth.Username.Name][ep.BasicAuth.Username.Key]
	pass := secrets[ep.BasicAuth.Password.Name][ep.BasicAuth.Password.Key]
	serverName := *ep.TLSConfig.ServerName
	file, _ := flagValue(r.ds.Spec.Template.Spec.Containers[0].Args, "--web.config.file")
	var webConfig, tlsDir string
	for _, s := range r.m.Secrets {
		if c, ok := s.StringData[filepath.Base(file)]; ok {
			webConfig = c
		}
	}
	for _, vm := range r.ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		if vm.Name == "tls" {
			tlsDir = vm.MountPath
		}
	}
	if webConfig == "" || tlsDir == "" || user == "" || pass == "" {
		t.Fatalf("web config %d bytes, TLS mount %q, user %q: the component is incomplete", len(webConfig), tlsDir, user)
	}

	CheckWebConfigServes(t, WebServe{Root: root, WebConfig: webConfig, TLSDir: tlsDir, User: user, Password: pass, ServerName: serverName})
}
