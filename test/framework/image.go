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
	// Source is the source tree it was built from, with its chart
	// (charts/nestlet).
	Source string
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
	return runImagesScript(root, dir, env)
}

// runImagesScript runs hack/images.sh of the source tree src into dir.
func runImagesScript(src, dir string, env []string) (Image, error) {
	cmd := exec.Command(filepath.Join(src, "hack", "images.sh"), dir)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w: %s", cmd.Path, err, out)
	}
	m := imageBuilt.FindStringSubmatch(string(out))
	if m == nil {
		return Image{}, fmt.Errorf("%s printed no image: %s", cmd.Path, out)
	}
	return Image{Ref: m[1], Digest: m[2], Archive: m[3], Source: src}, nil
}

// BuildImageAt builds the image of an earlier commit rev of this
// repository, as that commit's own hack/images.sh builds it from its own
// sources (taken with git archive into a directory of dir), into dir; env
// is added to the script's environment as in BuildImage. The commit must be
// in the clone: a shallow clone lacks it, and is told so.
func BuildImageAt(dir, rev string, env ...string) (Image, error) {
	root, err := launcher.RepoRoot()
	if err != nil {
		return Image{}, err
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("commit %s is not in the clone at %s (a shallow clone? git fetch --unshallow): %w: %s", rev, root, err, out)
	}
	src := filepath.Join(dir, "src-"+rev)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return Image{}, err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	extract := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return Image{}, err
	}
	extract.Stdin = pipe
	var archiveErr, extractErr strings.Builder
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		return Image{}, err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return Image{}, fmt.Errorf("git archive %s: %w: %s", rev, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		return Image{}, fmt.Errorf("extracting %s: %w: %s", rev, err, extractErr.String())
	}
	return runImagesScript(src, dir, env)
}

// BuildAgentWithTags builds the agent (cmd/nestlet) of this work tree with
// the given build tags into dir and returns its path: a test runs a build
// that differs on purpose (provider/forward's nestlet_skip_duplicate_guard).
func BuildAgentWithTags(dir string, tags ...string) (string, error) {
	root, err := launcher.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "nestlet")
	cmd := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", out, "./cmd/nestlet")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the agent with tags %v: %w: %s", tags, err, b)
	}
	return out, nil
}
