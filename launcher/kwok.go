package launcher

import (
	_ "embed" // delegatedJobStage
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// delegatedJobStage completes delegates of Job pods in kwok leaves.
//
//go:embed kwok-delegated-job.yaml
var delegatedJobStage []byte

// kwokCommand writes kwok's configuration and returns its command line.
func (c *Cluster) kwokCommand(bins *Binaries, pki *clusterPKI, opts ClusterOptions) ([]string, error) {
	extraStages := filepath.Join(c.Dir, "kwok-nestlet-stages.yaml")
	if err := os.WriteFile(extraStages, delegatedJobStage, 0o644); err != nil {
		return nil, err
	}
	debugging, err := c.writeKwokDebugging(opts.KwokPortForwardTarget)
	if err != nil {
		return nil, err
	}
	kwokKubeconfig, err := c.writeKubeconfig("kwok", pki.admin)
	if err != nil {
		return nil, err
	}
	return append([]string{
		"--kubeconfig=" + kwokKubeconfig,
		"--config=" + bins.KwokStages,
		"--config=" + extraStages,
		"--config=" + debugging,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		// Node leases, renewed every 10 s as a kubelet does: without
		// them kwok (whose default here is none) refreshes a node's status
		// only every 10 minutes, so every kwok node went NotReady for a few
		// seconds once per grace period of the controller manager.
		"--node-lease-duration-seconds=40",
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(c.KwokNodePort),
		"--tls-cert-file=" + pki.kwokServing.CertPath,
		"--tls-private-key-file=" + pki.kwokServing.KeyPath,
		"--cidr=10.244.0.0/16",
	}, opts.KwokArgs...), nil
}

// ensureKwok starts kwok for the cluster's simulated nodes, once: with
// the first kwok node, so that a cluster with none pays for no kubelet
// (a process started after Environment.LimitCPU is not held to it).
func (c *Cluster) ensureKwok() (*Process, error) {
	c.kwokMu.Lock()
	defer c.kwokMu.Unlock()
	if c.kwok != nil {
		return c.kwok, nil
	}
	kwok, err := c.start(kwokProcess, c.bins.Kwok, c.kwokArgs...)
	if err != nil {
		return nil, err
	}
	c.track(kwok)
	c.kwok = kwok
	return kwok, nil
}

// writeKwokDebugging writes kwok's configuration of logs, attach, exec and
// port-forward for every pod of this cluster, and returns its path.
func (c *Cluster) writeKwokDebugging(portForwardTarget string) (string, error) {
	c.KwokLogsFile = filepath.Join(c.Dir, "kwok-pod.log")
	if err := os.WriteFile(c.KwokLogsFile, nil, 0o644); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: nestlet-test-logs
spec:
  logs:
  - logsFile: %[1]q
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata:
  name: nestlet-test-attach
spec:
  attaches:
  - logsFile: %[1]q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: nestlet-test-exec
spec:
  execs:
  - local:
      workDir: %[2]q
`, c.KwokLogsFile, c.Dir)
	if portForwardTarget != "" {
		host, port, err := net.SplitHostPort(portForwardTarget)
		if err != nil {
			return "", fmt.Errorf("port-forward target: %w", err)
		}
		cfg += fmt.Sprintf(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: nestlet-test-port-forward
spec:
  forwards:
  - target:
      address: %q
      port: %s
`, host, port)
	}
	path := filepath.Join(c.Dir, "kwok-debugging.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// kwokProcess names a cluster's kwok process.
const kwokProcess = "kwok"
