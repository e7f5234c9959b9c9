package kubelet

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nestlet/nestlet/test/framework"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExecTwoLevelsDown(t *testing.T) {
	ns, leaf, leafPod := runPod(t, "east")

	require.Equal(t, "hello\n", mustKubectl(t, "root", "", "exec", "-n", ns, "app", "--", "echo", "hello"))
	// stdin reaches the leaf (kwok does not pass stdin's end on, so the
	// command must end by itself).
	require.Equal(t, "first line\n", mustKubectl(t, "root", "first line\nsecond line\n", "exec", "-i", "-n", ns, "app", "--", "head", "-1"))

	// A failing command fails at the root as it does in the leaf.
	for _, cmd := range [][]string{
		{"sh", "-c", "echo to stderr >&2; exit 3"},
		{"/no/such/command"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			ctx := t.Context()
			rootOut, rootErr, rootRun := kubectl(ctx, "root", "", append([]string{"exec", "-n", ns, "app", "--"}, cmd...)...)
			leafOut, leafErr, leafRun := kubectl(ctx, leaf, "", append([]string{"exec", "-n", ns, leafPod, "--"}, cmd...)...)
			require.Error(t, leafRun)
			require.Error(t, rootRun)
			require.Equal(t, framework.ExitCode(leafRun), framework.ExitCode(rootRun))
			require.Equal(t, leafOut, rootOut)
			require.Equal(t, leafErr, rootErr)
		})
	}
}

// West serves its kubelet API directly with a kubelet serving
// certificate it asked the root for, which the root's agent approved and
// the root's API server verifies (--kubelet-certificate-authority).
func TestExecDirectMode(t *testing.T) {
	var issued *x509.Certificate
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		csrs, err := env.Cluster("root").Client.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
		require.NoError(c, err)
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || csr.Spec.Username != "system:node:west" || len(csr.Status.Certificate) == 0 {
				continue
			}
			for _, cond := range csr.Status.Conditions {
				if cond.Type == certificatesv1.CertificateApproved && cond.Reason == "NestletServing" {
					block, _ := pem.Decode(csr.Status.Certificate)
					require.NotNil(c, block)
					issued, err = x509.ParseCertificate(block.Bytes)
					require.NoError(c, err)
				}
			}
		}
		require.NotNil(c, issued, "an approved and issued kubelet serving certificate for west")
	}, time.Minute, 200*time.Millisecond)
	require.Equal(t, "system:node:west", issued.Subject.CommonName)
	require.Equal(t, []string{"west"}, issued.DNSNames)
	require.Len(t, issued.IPAddresses, 1, "west's own address only")

	ns, _, _ := runPod(t, "west")
	require.Equal(t, "hello west\n", mustKubectl(t, "root", "", "exec", "-n", ns, "app", "--", "echo", "hello", "west"))
}

// kubectl attach streams the container's output (kwok attaches to the
// log file).
func TestAttachTwoLevelsDown(t *testing.T) {
	ns, leaf, _ := runPod(t, "east")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath,
		"attach", "-n", ns, "app")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	marker := "attached " + ns
	// Written until it is seen: attach may start reading after the first
	// write.
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				seen <- true
				return
			}
		}
		seen <- false
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		appendLog(t, leaf, time.Now(), marker)
		select {
		case ok := <-seen:
			require.True(t, ok, "attach ended before the line came")
			return
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("attach did not stream the line")
		}
	}
}

// kubectl port-forward at the root carries bytes to the pod two levels
// down and back (kwok connects the port to an echo server).
func TestPortForwardTwoLevelsDown(t *testing.T) {
	ns, _, _ := runPod(t, "east")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath,
		"port-forward", "-n", ns, "pod/app", ":8080")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan(), "port-forward printed nothing")
	m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text())
	require.NotNil(t, m, sc.Text())
	for i := range 2 { // two connections: one session each
		conn, err := net.DialTimeout("tcp", m[1], 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		msg := strings.Repeat("ping ", 1000) + string(rune('a'+i)) + "\n"
		_, err = conn.Write([]byte(msg))
		require.NoError(t, err)
		got, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg, got)
		require.NoError(t, conn.Close())
	}
}
