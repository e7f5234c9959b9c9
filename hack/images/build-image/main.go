// Command build-image writes a single-layer OCI image of static binaries
// as a docker-archive tarball (what `ctr images import` and `docker load`
// read), without a registry or a daemon. The output is reproducible: fixed
// file times and ownership, no creation time, no history: the same inputs
// give the same digest.
//
//	build-image -name nestlet.local/pause:v1 -bin pause -path /pause -out pause.tar
//	build-image -name ghcr.io/nestlet/nestlet:0.1.0 -out nestlet.tar \
//	  -add bin/nestlet=/usr/local/bin/nestlet -add bin/nestctl=/usr/local/bin/nestctl \
//	  -entrypoint /usr/local/bin/nestlet -user 65532:65532 -label org.opencontainers.image.version=0.1.0
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeated flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// spec is what an image is made of.
type spec struct {
	ref        string
	files      map[string]string // path in the image -> file here
	entrypoint string
	user       string
	labels     map[string]string
	port       string
}

func main() {
	var s spec
	var adds, labels list
	flag.StringVar(&s.ref, "name", "", "image reference, e.g. nestlet.local/pause:proto")
	bin := flag.String("bin", "", "static binary to put into the image (with -path)")
	p := flag.String("path", "", "its path inside the image, e.g. /pause (the entrypoint)")
	flag.Var(&adds, "add", "FILE=/PATH: a file to put into the image (repeated)")
	flag.StringVar(&s.entrypoint, "entrypoint", "", "the entrypoint (default: -path)")
	flag.StringVar(&s.user, "user", "", "the user to run as, e.g. 65532:65532 (default: root)")
	flag.Var(&labels, "label", "KEY=VALUE: an image label (repeated)")
	flag.StringVar(&s.port, "expose", "", "optional exposed port, e.g. 8080/tcp")
	out := flag.String("out", "", "output docker-archive tarball")
	flag.Parse()
	s.files, s.labels = map[string]string{}, map[string]string{}
	if *bin != "" && *p != "" {
		s.files[*p] = *bin
		if s.entrypoint == "" {
			s.entrypoint = *p
		}
	}
	for _, a := range adds {
		src, dst, ok := strings.Cut(a, "=")
		if !ok || !path.IsAbs(dst) {
			log.Fatalf("-add %q: want FILE=/PATH", a)
		}
		s.files[dst] = src
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			log.Fatalf("-label %q: want KEY=VALUE", l)
		}
		s.labels[k] = v
	}
	if s.ref == "" || len(s.files) == 0 || s.entrypoint == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	d, err := build(s, *out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s -> %s\n", s.ref, d, *out)
}

// build writes the image of s to out and returns its digest.
func build(s spec, out string) (v1.Hash, error) {
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := layerOf(s.files)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{s.entrypoint}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/"}
	cf.Config.User = s.user
	if len(s.labels) > 0 {
		cf.Config.Labels = s.labels
	}
	if s.port != "" {
		cf.Config.ExposedPorts = map[string]struct{}{s.port: {}}
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	f, err := os.Create(out)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return v1.Hash{}, err
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// layerOf is one layer holding files (path in the image -> file here), in
// path order, with their parent directories, owned by root, at time 0.
func layerOf(files map[string]string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		var parents []string
		for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d[1:] + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(files[p])
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: p[1:], Mode: 0o755, Size: int64(len(data)),
			Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
}
