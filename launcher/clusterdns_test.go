package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// The image the launcher runs is the CoreDNS that hack/install-node-runtime.sh
// builds: the version pinned in hack/tools/coredns/go.mod.
func TestCoreDNSImageIsThePinnedVersion(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	path := filepath.Join(root, "hack", "tools", "coredns", "go.mod")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	mod, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	var pinned string
	for _, r := range mod.Require {
		if r.Mod.Path == "github.com/coredns/coredns" {
			pinned = r.Mod.Version
		}
	}
	require.NotEmpty(t, pinned, "hack/tools/coredns/go.mod requires no github.com/coredns/coredns")
	_, tag, _ := strings.Cut(CoreDNSImage, ":")
	require.Equal(t, pinned, tag)
	require.Contains(t, RealNodeImages, CoreDNSImage, "every real node imports the image")
}
