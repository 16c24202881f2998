// Command vmagent runs commands for the kubenode test harness inside its VM: the harness on the
// host starts containerd and the kubelet, imports images, reads cgroup files and records the
// cgroup tree through it. It listens only on the VM's address on the host-only link and
// answers only requests carrying the run's token (from the run's data disk), so that the
// VM's pods, which can route to that address, cannot run commands as root on the node.
//
// Hand-written (60 lines of net/http and os/exec) rather than sshd: no key exchange per
// command under software emulation, and nothing to install in the VM's root filesystem.
package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/quota-exporter/quota_exporter/test/kubenode/node/agentproto"
)

func main() {
	listen := flag.String("listen", "", "address to listen on")
	tokenFile := flag.String("token-file", "", "file holding the token every request must carry")
	flag.Parse()
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatal(err)
	}
	want := []byte(strings.TrimSpace(string(token)))
	http.HandleFunc("/exec", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Token")), want) != 1 || r.Method != http.MethodPost {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		var req agentproto.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Argv) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(run(r.Context(), req))
	})
	log.Printf("listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}

func run(ctx context.Context, req agentproto.Request) agentproto.Response {
	if req.Timeout <= 0 {
		req.Timeout = 120
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	resp := agentproto.Response{Output: out.Bytes(), Exit: cmd.ProcessState.ExitCode()}
	if err != nil && cmd.ProcessState == nil || ctx.Err() != nil {
		resp.Exit, resp.Error = -1, err.Error()
	}
	return resp
}
