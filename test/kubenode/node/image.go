package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Image is a one-layer container image made from files of this host: the test needs a
// handful of images (pause, exporter, workloads) and no Docker daemon or registry runs here.
// Hand-written (about 100 lines) because test/go.mod has no image library and a
// docker-archive is three JSON objects and a tar; `ctr images import` reads it.
type Image struct {
	Ref        string            // e.g. "quota-kubenode/pause:test"; containerd stores docker.io/<Ref>
	Files      map[string]string // path in the image -> file or directory on the host (copied, symlinks resolved)
	Data       map[string]string // path in the image -> contents
	Dirs       []string          // empty directories (mode 1777, e.g. /tmp)
	Entrypoint []string
	Env        []string
	User       string
}

// FullRef is the name the CRI and the kubelet see after import.
func (im Image) FullRef() string { return "docker.io/" + im.Ref }

// WriteDockerArchive writes im as a docker-archive tarball (docker save's format) to file.
func (im Image) WriteDockerArchive(file string) error {
	var layer bytes.Buffer
	if err := im.layer(&layer); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": im.Entrypoint, "Env": im.Env, "User": im.User},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(config)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{im.Ref}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{cfgName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// layer writes the image's files as one tar layer, parents before children.
func (im Image) layer(w io.Writer) error {
	type entry struct {
		src  string // host file, or "" for Data/Dirs
		data []byte
		mode int64
		dir  bool
	}
	entries := map[string]entry{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{dir: true, mode: 0o755}
			}
		}
	}
	for dst, src := range im.Files {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			target := path.Join(dst, filepath.ToSlash(strings.TrimPrefix(p, src)))
			st, err := os.Stat(p) // follows symlinks: the image gets the file itself
			if err != nil {
				return err
			}
			if st.IsDir() {
				entries[target] = entry{dir: true, mode: int64(st.Mode().Perm())}
			} else {
				entries[target] = entry{src: p, mode: int64(st.Mode().Perm())}
			}
			addParents(target)
			return nil
		})
		if err != nil {
			return fmt.Errorf("image %s: %w", im.Ref, err)
		}
	}
	for dst, data := range im.Data {
		entries[dst] = entry{data: []byte(data), mode: 0o644}
		addParents(dst)
	}
	for _, d := range im.Dirs {
		entries[d] = entry{dir: true, mode: 0o1777}
		addParents(d)
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := entries[n]
		name := strings.TrimPrefix(n, "/")
		if e.dir {
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Mode: e.mode, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
			continue
		}
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			data = b
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: e.mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
