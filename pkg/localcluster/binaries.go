package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = "NESTLET_BIN_DIR"

// Binaries holds the paths of the programs a Cluster runs.
type Binaries struct {
	// Dir is the directory they are in.
	Dir                   string
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Kwok                  string
	// KwokStages is kwok's stage configuration (fast node and pod
	// lifecycle, node heartbeat with a lease).
	KwokStages string
}

// ErrBinariesMissing is returned when a binary is not installed.
var ErrBinariesMissing = errors.New("control-plane binaries missing: run hack/install-binaries.sh (or make test), or set " + BinDirEnv)

// FindBinaries returns the binaries in dir, or when dir is empty in
// $NESTLET_BIN_DIR, or else in _output/bin of the repository holding the
// working directory.
func FindBinaries(dir string) (*Binaries, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, "_output", "bin")
	}
	b := &Binaries{
		Dir:                   dir,
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubectl:               filepath.Join(dir, "kubectl"),
		Kwok:                  filepath.Join(dir, "kwok"),
		KwokStages:            filepath.Join(dir, "kwok-stages.yaml"),
	}
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.Kubectl, b.Kwok, b.KwokStages} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrBinariesMissing, p)
		}
	}
	return b, nil
}

// RepoRoot returns the nearest parent directory of the working directory
// holding a go.mod of module github.com/nestlet/nestlet.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfile.ModulePath(data) == "github.com/nestlet/nestlet" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the nestlet repository: cannot locate _output/bin; set " + BinDirEnv)
		}
		dir = parent
	}
}
