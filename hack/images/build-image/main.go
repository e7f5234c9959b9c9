// Command build-image writes a single-layer OCI image holding one static binary as a
// docker-archive tarball (what `ctr images import` and `docker load` read),
// without a registry or a daemon. The output is reproducible: fixed file
// times and ownership, no history timestamps.
//
//	build-image -name nestlet.local/pause:v1 -bin pause -path /pause -out pause.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ref := flag.String("name", "", "image reference, e.g. nestlet.local/pause:proto")
	bin := flag.String("bin", "", "static binary to put into the image")
	path := flag.String("path", "", "its path inside the image, e.g. /pause (the entrypoint)")
	out := flag.String("out", "", "output docker-archive tarball")
	port := flag.String("expose", "", "optional exposed port, e.g. 8080/tcp")
	flag.Parse()
	if *ref == "" || *bin == "" || *path == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*ref, *bin, *path, *out, *port); err != nil {
		log.Fatal(err)
	}
}

func build(ref, bin, path, out, port string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: path[1:], Mode: 0o755, Size: int64(len(data)),
		Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{path}
	cf.Config.Env = []string{"PATH=/"}
	if port != "" {
		cf.Config.ExposedPorts = map[string]struct{}{port: {}}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := tarball.Write(tag, img, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s %s -> %s\n", tag, d, out)
	return nil
}
