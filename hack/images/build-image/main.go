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
//	build-image -name registry.k8s.io/e2e-test-images/busybox:1.37.0-1 -root rootfs/busybox -cmd sh -out busybox.tar
//
// With -root, a directory becomes the image's file system as it is (files
// with their modes, symbolic links, directories), for the stand-ins of the
// Kubernetes conformance suite's images (hack/conformance-images.sh).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
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
	tags       []string          // more names for the same image
	files      map[string]string // path in the image -> file here
	root       string            // a directory taken as the whole file system
	entrypoint string
	cmd        []string
	workdir    string
	user       string
	labels     map[string]string
	port       string
}

func main() {
	var s spec
	var adds, labels, cmd, tags list
	flag.StringVar(&s.ref, "name", "", "image reference, e.g. nestlet.local/pause:proto")
	flag.Var(&tags, "tag", "another reference for the same image (repeated)")
	flag.StringVar(&s.root, "root", "", "a directory to take as the image's file system (files, modes, symbolic links)")
	flag.Var(&cmd, "cmd", "an argument of the image's command (repeated, in order)")
	flag.StringVar(&s.workdir, "workdir", "", "the working directory")
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
	s.cmd, s.tags = cmd, tags
	if s.ref == "" || (len(s.files) == 0 && s.root == "") || (s.entrypoint == "" && len(s.cmd) == 0) || *out == "" {
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
	entries, err := entriesOf(s.files, s.root)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := layerOf(entries)
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
	if s.entrypoint != "" {
		cf.Config.Entrypoint = []string{s.entrypoint}
	}
	cf.Config.Cmd = s.cmd
	cf.Config.WorkingDir = s.workdir
	cf.Config.Env = []string{"PATH=/usr/local/bin:/"}
	if s.root != "" {
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
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
	refs := map[name.Reference]v1.Image{tag: img}
	for _, t := range s.tags {
		more, err := name.NewTag(t)
		if err != nil {
			_ = f.Close()
			return v1.Hash{}, err
		}
		refs[more] = img
	}
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		_ = f.Close()
		return v1.Hash{}, err
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// entry is one file, directory or symbolic link of a layer.
type entry struct {
	path string // in the image, absolute
	src  string // the file here (regular files)
	mode int64  // permission bits, and the sticky bit (a /tmp)
	link string // the target (symbolic links)
	dir  bool
}

// entriesOf lists files (path in the image -> file here, mode 0755) and the
// tree under root (when set) with their modes and symbolic links, in path
// order, each directory before what it holds.
func entriesOf(files map[string]string, root string) ([]entry, error) {
	byPath := map[string]entry{}
	if root != "" {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == "." {
				return err
			}
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			e := entry{path: "/" + filepath.ToSlash(rel), src: p, mode: int64(info.Mode().Perm()), dir: d.IsDir()}
			if info.Mode()&fs.ModeSticky != 0 {
				e.mode |= 0o1000
			}
			if info.Mode()&fs.ModeSetuid != 0 {
				e.mode |= 0o4000 // a program that runs as its owner, root (nonewprivs)
			}
			if info.Mode()&fs.ModeSetgid != 0 {
				e.mode |= 0o2000
			}
			switch {
			case info.Mode()&fs.ModeSymlink != 0:
				if e.link, err = os.Readlink(p); err != nil {
					return err
				}
			case !d.IsDir() && !info.Mode().IsRegular():
				return fmt.Errorf("%s: only files, directories and symbolic links can go into an image", p)
			}
			byPath[e.path] = e
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for p, src := range files {
		byPath[p] = entry{path: p, src: src, mode: 0o755}
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = entry{path: d, mode: 0o755, dir: true}
			}
		}
	}
	entries := make([]entry, 0, len(byPath))
	for _, e := range byPath {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	return entries, nil
}

// layerOf is one layer holding entries, owned by root, at time 0.
func layerOf(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, e := range entries {
		h := &tar.Header{Name: e.path[1:], Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.dir:
			h.Name += "/"
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			var err error
			if data, err = os.ReadFile(e.src); err != nil {
				return nil, err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
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
