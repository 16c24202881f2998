package node

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CRI-O on the VM node (VMOptions.CRIO): Debian has no CRI-O package and the Go module proxy
// refuses its module, so no run of make test has it; a CRI-O built elsewhere (crio and pinns
// in one directory) replaces containerd for a recording run (make fixtures-kubenode-crio).
// conmon, crun and runc are Debian's; skopeo copies the test's images into containers-storage,
// which CRI-O reads (it has no import of its own and nothing here serves a registry).

// CRIOPackages are what the VM root needs besides its own packages to run CRI-O.
var CRIOPackages = []string{"conmon", "skopeo"}

const crioSocket = "/var/run/crio/crio.sock"

// crioConfig is CRI-O's configuration as OpenShift and CRI-O's packages set it up: the systemd
// cgroup manager, crun as the default runtime (runc beside it, for RuntimeClass runc), the
// infra container dropped where the pod needs none, and conmon in the pod's slice
// (conmon_cgroup "pod", OpenShift's setting; CRI-O's own default is system.slice, outside
// kubepods), where a monitoring agent meets it.
func crioConfig(pause, pinns string) string {
	return fmt.Sprintf(`[crio]
root = "/var/lib/containers/storage"
runroot = "/run/containers/storage"
storage_driver = "overlay"
log_dir = "/var/log/crio/pods"
[crio.api]
listen = %[3]q
stream_address = "127.0.0.1"
stream_port = "0"
[crio.runtime]
default_runtime = "crun"
cgroup_manager = "systemd"
drop_infra_ctr = true
pinns_path = %[2]q
enable_nri = false
[crio.runtime.runtimes.crun]
runtime_path = "/data/bin/crun"
runtime_root = "/run/crun"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"
[crio.runtime.runtimes.runc]
runtime_path = "/usr/bin/runc"
runtime_root = "/run/runc"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"
[crio.image]
pause_image = %[1]q
pinned_images = [%[1]q]
short_name_mode = "disabled"
[crio.network]
network_dir = "/etc/cni/net.d/"
plugin_dirs = ["/usr/lib/cni"]
[crio.metrics]
enable_metrics = false
`, pause, pinns, crioSocket)
}

// crunSpecVersion runs Debian's crun (1.8.1) on CRI-O's bundles: CRI-O 1.37 writes runtime-spec
// 1.3.0, which that crun refuses ("unknown version specified": it knows 1.0 and 1.1; containerd
// 1.6 writes 1.0.2-dev). The bundle's version becomes 1.1.0 and crun runs it; CRI-O's packages
// ship a newer crun that needs no such step. The cgroups are crun's systemd driver's either way.
const crunSpecVersion = `#!/bin/sh
bundle=
prev=
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle=$a ;; esac
  case "$a" in --bundle=*) bundle=${a#--bundle=} ;; esac
  prev=$a
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  sed -i 's/"ociVersion": *"1\.[2-9][^"]*"/"ociVersion":"1.1.0"/' "$bundle/config.json"
fi
exec /usr/bin/crun "$@"
`

// crioRegistries resolves a short image name (quota-exporter:0.1.0) as the kubelet and
// containerd do, to docker.io; nothing is pulled.
const crioRegistries = `unqualified-search-registries = ["docker.io"]
`

// crioImport copies each "file ref" line of /data/images/refs into containers-storage (a
// second ref of the same file only adds a name: the layers are there).
const crioImport = `while read -r f ref; do
  skopeo copy --quiet "docker-archive:/data/images/$f" "containers-storage:$ref" || exit 1
done < /data/images/refs
`

// archiveRefs are the tags a docker-archive tarball (docker save's format, make image's)
// carries, normalised as the CRI sees them: docker.io/library/<name> for a bare name.
func archiveRefs(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no manifest.json: %w", file, err)
		}
		if filepath.Clean(h.Name) != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
			return nil, fmt.Errorf("%s: manifest.json: %w", file, err)
		}
		var refs []string
		for _, im := range m {
			for _, tag := range im.RepoTags {
				refs = append(refs, normalizedRef(tag))
			}
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("%s: no tag in manifest.json", file)
		}
		return refs, nil
	}
}

// normalizedRef: docker.io/library/x for x, docker.io/a/x for a/x, a registry's name as it is.
func normalizedRef(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	switch {
	case !ok:
		return "docker.io/library/" + ref
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	default:
		return "docker.io/" + ref
	}
}

// crioSandboxIDs are the pod sandboxes CRI-O ran, from its log ("Ran pod sandbox <id> with infra
// container: ..."; its own word, whether it dropped the infra container or not: there is no
// crictl here, and a dropped infra container is in no list on disk).
func crioSandboxIDs(journal string) []string {
	var ids []string
	for _, m := range crioRanSandbox.FindAllStringSubmatch(journal, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

var crioRanSandbox = regexp.MustCompile(`Ran pod sandbox ([0-9a-f]{64}) with infra container`)

var errNoCRIOSwitch = errors.New("the CRI-O node runs one kubelet: no switch")
