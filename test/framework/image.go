package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// Image is an image `make images` built (hack/images.sh).
type Image struct {
	// Ref is its name (repository:tag), Digest its manifest digest and
	// Archive the OCI archive that real nodes import (RealNodeOptions.Images).
	Ref, Digest, Archive string
}

// Repository is the image's name without its tag.
func (i Image) Repository() string { return i.Ref[:strings.LastIndex(i.Ref, ":")] }

// Tag is the image's tag.
func (i Image) Tag() string { return i.Ref[strings.LastIndex(i.Ref, ":")+1:] }

var imageBuilt = regexp.MustCompile(`(?m)^(\S+) (sha256:[0-9a-f]{64}) -> (\S+)$`)

// BuildImage runs hack/images.sh into dir and returns Nestlet's image;
// env is added to the script's environment (NESTLET_VERSION=... for a
// second build to upgrade to).
func BuildImage(dir string, env ...string) (Image, error) {
	root, err := launcher.RepoRoot()
	if err != nil {
		return Image{}, err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "images.sh"), dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Image{}, fmt.Errorf("hack/images.sh: %w: %s", err, out)
	}
	m := imageBuilt.FindStringSubmatch(string(out))
	if m == nil {
		return Image{}, fmt.Errorf("hack/images.sh printed no image: %s", out)
	}
	return Image{Ref: m[1], Digest: m[2], Archive: m[3]}, nil
}
