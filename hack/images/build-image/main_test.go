package main

import (
	"os"
	"path/filepath"
	"testing"

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
