package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ControlPlane is etcd, kube-apiserver, kube-controller-manager and kube-scheduler on this
// host, with their own certificate authority, listening on one address of this host (loopback
// for a node on this host, the host's end of the link to a VM node).
type ControlPlane struct {
	Dir        string
	Kubeconfig string // admin (system:masters)
	APIServer  string // https://<address>:<port>
	Address    string

	bin string
	pki *pki
	ps  *procSet
}

// startControlPlane starts the components in dir/controlplane with their logs in dir/logs.
func startControlPlane(ctx context.Context, dir, bin, address string, ps *procSet) (_ *ControlPlane, err error) {
	cp := &ControlPlane{Dir: dir, Address: address, bin: bin, ps: ps}
	for _, d := range []string{"pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if cp.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"apiserver", "kube-apiserver", nil, []string{address, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc"}},
		{"admin", "kubenode-admin", []string{"system:masters"}, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
	} {
		if err := cp.pki.issue(c.name, c.cn, c.orgs, c.hosts...); err != nil {
			return nil, err
		}
	}
	if err := cp.pki.serviceAccountKey(); err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	cp.APIServer = fmt.Sprintf("https://%s:%d", address, apiPort)
	cp.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := cp.pki.kubeconfig(cp.Kubeconfig, cp.APIServer, "admin"); err != nil {
		return nil, err
	}
	bin = filepath.Clean(bin)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	etcd, err := ps.start("etcd", "etcd", "--name=kubenode", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=kubenode=http://127.0.0.1:%d", etcdPeer),
		"--log-level=warn")
	if err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, etcd, etcdURL+"/health", false, time.Minute); err != nil {
		return nil, err
	}
	p := cp.pki
	api, err := ps.start("kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+address, "--advertise-address="+address, fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file="+p.path("apiserver", "crt"), "--tls-private-key-file="+p.path("apiserver", "key"),
		"--client-ca-file="+p.path("ca", "crt"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client", "crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client", "key"),
		"--kubelet-certificate-authority="+p.path("ca", "crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p.path("sa", "pub"),
		"--service-account-signing-key-file="+p.path("sa", "key"),
		"--service-cluster-ip-range=10.253.78.0/24",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// The advertise address is not a valid endpoint of the kubernetes Service for pods (no
		// kube-proxy runs); no pod here talks to the API server through it.
		"--endpoint-reconciler-type=none",
		"--profiling=false", "--v=1")
	if err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, api, cp.APIServer+"/readyz", true, 2*time.Minute); err != nil {
		return nil, err
	}
	// Controllers and scheduler: DaemonSet pods are created by the controller and bound by the
	// scheduler; the kubelet registers its node with the not-ready taint, which the node
	// lifecycle controller removes once the node is Ready; podgc removes the pods of a deleted node.
	if _, err := ps.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", kcmPort),
		"--controllers=daemonset,serviceaccount,root-ca-cert-publisher,garbagecollector,namespace,nodelifecycle,podgc",
		"--root-ca-file="+p.path("ca", "crt"),
		"--leader-elect=false", "--use-service-account-credentials=false", "--v=1"); err != nil {
		return nil, err
	}
	if _, err := ps.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false", "--v=1"); err != nil {
		return nil, err
	}
	return cp, nil
}

// PKIFile is a file of the control plane's certificate authority: ca.crt, admin.crt, admin.key, ...
func (cp *ControlPlane) PKIFile(name string) string { return filepath.Join(cp.Dir, "pki", name) }

// nodeCredentials issues the kubelet's client certificate (system:node:<name>) and its serving
// certificate for ip, and writes its kubeconfig for server (the API server as the node reaches it).
func (cp *ControlPlane) nodeCredentials(name, ip, kubeconfig string) error {
	if err := cp.pki.issue("kubelet-client-"+name, "system:node:"+name, []string{"system:nodes"}); err != nil {
		return err
	}
	if err := cp.pki.issue("kubelet-serving-"+name, "system:node:"+name, []string{"system:nodes"}, ip, "127.0.0.1", name); err != nil {
		return err
	}
	return cp.pki.kubeconfig(kubeconfig, cp.APIServer, "kubelet-client-"+name)
}

// Kubectl runs kubectl as the admin.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := run(ctx, 2*time.Minute, nil, filepath.Join(cp.bin, "kubectl"), append([]string{"--kubeconfig=" + cp.Kubeconfig}, args...)...)
	return strings.TrimSpace(out), err
}

// GetJSON runs kubectl with -o json and decodes its output into v.
func (cp *ControlPlane) GetJSON(ctx context.Context, v any, args ...string) error {
	out, err := cp.Kubectl(ctx, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

// waitNodeReady waits until the node reports Ready, failing early when a component exits.
func (cp *ControlPlane) waitNodeReady(ctx context.Context, name string, limit time.Duration, alive func() error) error {
	deadline := time.Now().Add(limit)
	for {
		if err := alive(); err != nil {
			return err
		}
		out, _ := cp.Kubectl(ctx, "get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out == "True" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready within %s (%q)", name, limit, out)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func (cp *ControlPlane) waitHTTP(ctx context.Context, p *proc, url string, tls bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, cp.ps.logTail(p.Name))
		}
		var err error
		if tls {
			_, err = cp.Kubectl(ctx, "get", "--raw", strings.TrimPrefix(url, cp.APIServer))
		} else {
			var resp *http.Response
			if resp, err = http.Get(url); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s within %s: %s", p.Name, url, limit, cp.ps.logTail(p.Name))
}
