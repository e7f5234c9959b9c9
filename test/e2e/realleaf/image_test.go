package realleaf

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// nestletImage is the image `make images` builds (hack/images.sh), built
// by TestMain and imported by the leaf's real node.
var nestletImage framework.Image

// TestNestletImage: the image `make images` builds has the same digest when
// built again, holds the five commands and nothing else, runs as user
// 65532 with its version stamped, and runs on a real node two levels
// below the root, where a pod made at the root requires a non-root user.
func TestNestletImage(t *testing.T) {
	ns := newNamespace(t)
	again, err := framework.BuildImage(t.TempDir())
	require.NoError(t, err)
	ref := again.Ref
	require.Equal(t, nestletImage.Ref, ref)
	require.Equal(t, nestletImage.Digest, again.Digest, "a rebuild of the same tree")

	cfg, files := readArchive(t, nestletImage.Archive)
	require.Equal(t, "65532:65532", cfg.Config.User)
	version := cfg.Config.Labels["org.opencontainers.image.version"]
	revision := cfg.Config.Labels["org.opencontainers.image.revision"]
	require.NotEmpty(t, version)
	require.NotEmpty(t, revision)
	require.True(t, strings.HasSuffix(ref, ":"+version), ref)
	require.Equal(t, []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/nestctl", "usr/local/bin/nestlet",
		"usr/local/bin/nestlet-proxy", "usr/local/bin/nestlet-routes", "usr/local/bin/nestlet-scheduler"}, files, "the commands, and no shell or anything else")

	createAt(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nestctl-version"},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"topology.kubernetes.io/region": region},
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{{Name: "nestctl", Image: ref, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/local/bin/nestctl", "version"}}},
		},
	})
	waitRoot(t, ns, "nestctl-version", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs := mustKubectl(t, "", "-n", ns, "logs", "nestctl-version")
	require.Equal(t, fmt.Sprintf("nestctl %s (%s)\n", version, revision), logs)
}

// imageConfig is the part of an image's configuration checked here.
type imageConfig struct {
	Config struct {
		User   string            `json:"User"`
		Labels map[string]string `json:"Labels"`
	} `json:"config"`
}

// readArchive reads a docker-archive: the image's configuration and the
// paths in its one layer, sorted.
func readArchive(t *testing.T, path string) (imageConfig, []string) {
	t.Helper()
	entries := map[string][]byte{}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		entries[h.Name] = b
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	require.NoError(t, json.Unmarshal(entries["manifest.json"], &manifest))
	require.Len(t, manifest, 1)
	require.Len(t, manifest[0].Layers, 1)
	var cfg imageConfig
	require.NoError(t, json.Unmarshal(entries[manifest[0].Config], &cfg))
	var files []string
	var raw io.Reader = bytes.NewReader(entries[manifest[0].Layers[0]])
	if data := entries[manifest[0].Layers[0]]; len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		raw, err = gzip.NewReader(bytes.NewReader(data))
		require.NoError(t, err)
	}
	layer := tar.NewReader(raw)
	for {
		h, err := layer.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		files = append(files, h.Name)
	}
	slices.Sort(files)
	return cfg, files
}
