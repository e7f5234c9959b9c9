package launcher

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
	dir, err := binDir(dir)
	if err != nil {
		return nil, err
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

// NestletBinaries are the project's own programs: `make build` puts them in
// _output/bin.
type NestletBinaries struct {
	Dir       string
	Nestlet   string
	Nestctl   string
	Scheduler string
	Proxy     string
}

// ErrNestletBinariesMissing is returned when a program of the project is
// not built. The launcher builds nothing itself.
var ErrNestletBinariesMissing = errors.New("nestlet programs missing: run make build (hack/build.sh), or give the directory that holds them (--nestlet-bin-dir, or " + BinDirEnv + ")")

// FindNestletBinaries returns nestlet, nestctl, nestlet-scheduler and
// nestlet-proxy in dir, or when dir is empty where FindBinaries looks.
func FindNestletBinaries(dir string) (*NestletBinaries, error) {
	dir, err := binDir(dir)
	if err != nil {
		return nil, err
	}
	b := &NestletBinaries{Dir: dir, Nestlet: filepath.Join(dir, "nestlet"), Nestctl: filepath.Join(dir, "nestctl"),
		Scheduler: filepath.Join(dir, "nestlet-scheduler"), Proxy: filepath.Join(dir, "nestlet-proxy")}
	for _, p := range []string{b.Nestlet, b.Nestctl, b.Scheduler, b.Proxy} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: no program %s", ErrNestletBinariesMissing, p)
		}
	}
	return b, nil
}

// binDir returns dir, or when empty $NESTLET_BIN_DIR, or else _output/bin
// of the repository holding the working directory, made absolute.
func binDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "_output", "bin")
	}
	return filepath.Abs(dir)
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
