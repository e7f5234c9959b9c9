package main

import (
	"archive/tar"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The same inputs give the same digest; the image runs as the user given,
// with its labels, and holds each file where it was asked.
func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("binary "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := spec{ref: "ghcr.io/nestlet/nestlet:0.1.0", entrypoint: "/usr/local/bin/a", user: "65532:65532",
		files:  map[string]string{"/usr/local/bin/a": filepath.Join(dir, "a"), "/usr/local/bin/b": filepath.Join(dir, "b")},
		labels: map[string]string{"org.opencontainers.image.version": "0.1.0"}}
	first, err := build(s, filepath.Join(dir, "1.tar"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := build(s, filepath.Join(dir, "2.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatalf("two builds of the same inputs: %s and %s", first, second)
	}
	img, err := tarball.ImageFromPath(filepath.Join(dir, "2.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Config.Labels["org.opencontainers.image.version"] != "0.1.0" || cf.Config.Entrypoint[0] != "/usr/local/bin/a" {
		t.Fatalf("config %+v", cf.Config)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v %v", layers, err)
	}
}

// A directory becomes the image's file system as it is: modes, symbolic
// links, empty directories and setuid programs kept; every -tag names the
// same image.
func TestBuildFromRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "nnp"), []byte("setuid"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "bin", "nnp"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	s := spec{ref: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1", root: root, cmd: []string{"sh"},
		tags: []string{"registry.k8s.io/e2e-test-images/busybox:other"}}
	out := filepath.Join(dir, "busybox.tar")
	if _, err := build(s, out); err != nil {
		t.Fatal(err)
	}
	for _, ref := range append([]string{s.ref}, s.tags...) {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil || len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != "sh" {
			t.Fatalf("%s: config %+v %v", ref, cf, err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %v %v", layers, err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got[h.Name] = fmt.Sprintf("%c %o %s", h.Typeflag, h.Mode, h.Linkname)
		}
		_ = rc.Close()
		want := map[string]string{
			"bin/": "5 755 ", "bin/busybox": "0 755 ", "bin/sh": "2 777 busybox", "bin/nnp": "0 4755 ",
			"etc/": "5 755 ", "etc/passwd": "0 644 ", "tmp/": "5 1777 ",
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: layer %v, want %v", ref, got, want)
		}
	}
}
