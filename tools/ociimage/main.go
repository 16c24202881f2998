// Command ociimage writes the exporter's container image for one architecture as a tarball,
// without a container engine: one layer holding the static binary on an empty base (as the
// Dockerfile's FROM scratch), OCI media types, and the config a runtime needs (entrypoint,
// non-root user, port, labels). The tarball is in `docker save` layout (manifest.json with
// RepoTags), which `docker load`, `podman load` and `ctr images import` all read, and
// `crane push` publishes.
//
// Everything in it is derived from the flags, the binary and -created: the same inputs give
// the same image digest, so a release can be rebuilt from its tag and compared.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		binary  = flag.String("binary", "", "static executable to put at -path")
		path    = flag.String("path", "/bin/quota_exporter", "where the binary goes in the image; also the entrypoint")
		arch    = flag.String("arch", "", "GOARCH of the binary: amd64 or arm64")
		user    = flag.String("user", "65534:65534", "default user (uid:gid)")
		port    = flag.String("port", "10137/tcp", "exposed port")
		created = flag.String("created", "", "image creation time, RFC 3339 (the commit's time keeps the digest reproducible)")
		out     = flag.String("o", "", "output tarball")
		tags    listFlag
		labels  listFlag
	)
	flag.Var(&tags, "tag", "image reference to record in the tarball (repeatable)")
	flag.Var(&labels, "label", "key=value label, also a manifest annotation (repeatable)")
	flag.Parse()
	if *binary == "" || *arch == "" || *out == "" || len(tags) == 0 {
		fmt.Fprintln(os.Stderr, "ociimage: -binary, -arch, -tag and -o are required")
		flag.Usage()
		os.Exit(2)
	}
	when := time.Unix(0, 0).UTC()
	if *created != "" {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			fatal(fmt.Errorf("-created: %w", err))
		}
		when = t.UTC()
	}
	kv := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			fatal(fmt.Errorf("-label %q: want key=value", l))
		}
		kv[k] = v
	}
	img, err := build(*binary, *path, *arch, *user, *port, when, kv)
	if err != nil {
		fatal(err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		ref, err := name.NewTag(t)
		if err != nil {
			fatal(fmt.Errorf("-tag %q: %w", t, err))
		}
		refs[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(*out, refs); err != nil {
		fatal(err)
	}
	d, _ := img.Digest()
	fmt.Printf("%s: %s %s (%s)\n", *out, strings.Join(tags, " "), d, *arch)
}

func build(binary, path, arch, user, port string, created time.Time, labels map[string]string) (v1.Image, error) {
	layerTar, err := binaryLayer(binary, path, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage: COPY " + path, Comment: "static binary"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = arch
	if arch == "arm64" {
		cfg.Variant = "v8"
	}
	cfg.Created = v1.Time{Time: created}
	cfg.Config.Entrypoint = []string{path}
	cfg.Config.Cmd = nil
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.ExposedPorts = map[string]struct{}{port: {}}
	cfg.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	// The manifest carries the same org.opencontainers.image.* keys as annotations, for
	// registries that show those (a `docker save` tarball keeps only the config's labels).
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// binaryLayer is an uncompressed tar of path's directories and the binary, owned by root,
// mode 0755, every time set to created.
func binaryLayer(binary, path string, created time.Time) ([]byte, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 1; i < len(parts); i++ {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755,
			ModTime: created, Format: tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: strings.Join(parts, "/"), Mode: 0o755, Size: int64(len(data)),
		ModTime: created, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}
