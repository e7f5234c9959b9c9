package tree

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/test/framework"
)

// ConformanceToolsEnv names the directory hack/test.sh gives the few
// conformance specs of this package: e2e.test and ginkgo, built at the
// pinned Kubernetes version, and images/, the OCI archives of the images
// they run (hack/conformance.sh tools).
const ConformanceToolsEnv = "NESTLET_CONFORMANCE_TOOLS"

// conformanceSpecs are the upstream conformance specs that failed at the
// root most often before what makes them pass was built, one per cause:
// a ClusterIP read at the root working below, the pod's API identity, a
// label change reaching a running container, a node's own packets to a
// pod of another cluster, node ports at the root, an in-place resize, an
// ephemeral container, the pod's observed generation, a DaemonSet at a
// root made only of clusters (one pod per child, a node's label in its
// selector), a Job's evicted pods ending Failed before they go (its
// finalizer waits for that), a kubelet's Started event on the pod at the
// root (the sysctl specs wait for it). `make conformance` runs them all
// (docs/conformance.md, docs/conformance-serial.md).
var conformanceSpecs = []string{
	`[sig-network] Services should serve a basic endpoint from pods`,
	`[sig-auth] ServiceAccounts should mount an API token into pods`,
	`[sig-storage] Downward API volume should update labels on modification`,
	`[sig-network] Networking Granular Checks: Pods should function for node-pod communication: http`,
	`[sig-network] Services should be able to create a functioning NodePort service`,
	`[sig-node] Pod InPlace Resize Container resize pod via the replace endpoint`,
	`[sig-node] Ephemeral Containers [NodeConformance] will start an ephemeral container in an existing pod`,
	`[sig-node] Pods Extended (pod generation) Pod Generation pod generation should start at 1 and increment per update`,
	`[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]`,
	`[sig-apps] Daemon set [Serial] should run and stop complex daemon [Conformance]`,
	`[sig-apps] Job should allow to use a pod failure policy to ignore failure matching on DisruptionTarget condition [Conformance]`,
	`[sig-node] Sysctls [LinuxOnly] [NodeConformance] should support sysctls [Environment:NotInUserNS] [Conformance]`,
}

// TestConformanceAtTheRoot runs conformanceSpecs with the upstream suite
// against the root, as `make conformance` does on the same tree: every one
// must pass.
func TestConformanceAtTheRoot(t *testing.T) {
	dir := os.Getenv(ConformanceToolsEnv)
	if dir == "" {
		why := fmt.Sprintf("$%s is not set: hack/test.sh builds the suite (hack/conformance.sh tools)", ConformanceToolsEnv)
		if os.Getenv(framework.RequireRealNodesEnv) == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	ctx := t.Context()
	images, err := filepath.Glob(filepath.Join(dir, "images", "*.tar"))
	require.NoError(t, err)
	require.NotEmpty(t, images, "no image archive in %s/images", dir)
	// Imported under the names each archive holds (as nestctl
	// playground --image-archive does).
	archives := map[string]string{}
	for _, a := range images {
		archives[filepath.Base(a)] = a
	}
	for _, leaf := range leaves {
		for _, n := range env.Cluster(leaf).RealNodes() {
			require.NoError(t, n.ImportImages(ctx, archives), "importing the suite's images into %s", n.Name)
		}
	}

	out := t.TempDir()
	focus := make([]string, len(conformanceSpecs))
	for i, s := range conformanceSpecs {
		focus[i] = regexp.QuoteMeta(s)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "ginkgo"), "--procs=4", "--label-filter=Conformance", "--focus="+strings.Join(focus, "|"),
		"--timeout=14m", "--no-color", "--output-dir="+out, "--json-report=report.json",
		filepath.Join(dir, "e2e.test"), "--", "--kubeconfig="+env.Cluster("root").KubeconfigPath, "--provider=skeleton",
		"--kubectl-path="+env.Binaries.Kubectl, "--report-dir="+out)
	log, err := cmd.CombinedOutput()
	results, rerr := specResults(filepath.Join(out, "report.json"))
	require.NoError(t, rerr, "the suite's report (ginkgo: %v)\n%s", err, tail(log, 4000))
	var failed []string
	for _, s := range conformanceSpecs {
		switch r := results[s]; r {
		case "passed":
		case "":
			failed = append(failed, s+": did not run")
		default:
			failed = append(failed, s+": "+r)
		}
	}
	require.Empty(t, failed, "conformance specs at the root (ginkgo: %v)\n%s", err, tail(log, 4000))
	t.Logf("%d conformance specs passed at the root", len(conformanceSpecs))
}

// specResults reads a ginkgo JSON report: each spec's state, or its
// failure's message, by the spec's name as the tables print it.
func specResults(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			State                   string
			Failure                 *struct{ Message string }
		}
	}
	if err := json.Unmarshal(raw, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeText == "" {
				continue
			}
			name := strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " ")
			state := s.State
			if s.Failure != nil && state != "passed" {
				state += ": " + firstLine(s.Failure.Message)
			}
			for _, spec := range conformanceSpecs {
				// A name may begin another spec's ("... complex daemon
				// with node affinity", skipped by the labels): the spec
				// that ran is the one that counts.
				if strings.HasPrefix(name, spec) && (out[spec] == "" || out[spec] == "skipped") {
					out[spec] = state
				}
			}
		}
	}
	return out, nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
