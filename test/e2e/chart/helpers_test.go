// Package chart tests the Helm chart (charts/nestlet) with the pinned helm
// that hack/install-binaries.sh builds into _output/bin: helm lint, the
// objects helm template renders, and a server-side dry run of them against
// a real API server started by pkg/launcher.
package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/launcher"
)

const (
	release   = "nestlet"
	namespace = "nestlet-system"
)

// repoRoot returns the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := launcher.RepoRoot()
	require.NoError(t, err)
	return root
}

// chartDir returns charts/nestlet.
func chartDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "charts", "nestlet")
}

// helmBinary returns the pinned helm; a missing helm fails the test: the
// chart is part of what make test proves.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(launcher.BinDirEnv)
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "_output", "bin")
	}
	p := filepath.Join(dir, "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm is missing (%v): run hack/install-binaries.sh (or make test), or set %s", err, launcher.BinDirEnv)
	}
	return p
}

// helm runs the pinned helm with its configuration and cache in a
// temporary directory, so that nothing of the user's helm setup leaks in,
// and returns its standard output.
func helm(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), err
}

// render runs helm template with the values files given and returns the
// manifests.
func render(t *testing.T, valuesFiles ...string) string {
	t.Helper()
	out, err := helm(t, nil, templateArgs(t, valuesFiles...)...)
	require.NoError(t, err, "helm template")
	return out
}

func templateArgs(t *testing.T, valuesFiles ...string) []string {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	return args
}

// kindValues returns the chart values hack/kind-up.sh installs in each
// cluster of its kind tree, by cluster name, and the --set the script adds
// at install time (the proxy's address, known once the node exists).
func kindValues(t *testing.T) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(repoRoot(t), "hack", "kind-up.sh"), "configs", dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/kind-up.sh configs:\n%s", out)
	files, err := filepath.Glob(filepath.Join(dir, "*.values.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	args := map[string][]string{}
	for _, f := range files {
		a := []string{"--values", f}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(data), "proxy:") {
			a = append(a, "--set", "proxy.advertiseAddress=172.18.0.2")
		}
		args[strings.TrimSuffix(filepath.Base(f), ".values.yaml")] = a
	}
	return args
}

// testdata returns the path of a file of testdata/.
func testdata(name string) string { return filepath.Join("testdata", name) }

// objects decodes a stream of manifests.
func objects(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "decoding the rendered manifests")
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// ids returns "Kind namespace/name" (or "Kind name" when cluster scoped) of
// each object, sorted.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		id := o.GetKind() + " " + o.GetName()
		if o.GetNamespace() != "" {
			id = o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// find returns the object of kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered; rendered: %v", kind, name, ids(objs))
	return nil
}

// into converts an unstructured object into a typed one.
func into(t *testing.T, o *unstructured.Unstructured, typed any) {
	t.Helper()
	data, err := yaml.Marshal(o.Object)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, typed), "%s %s", o.GetKind(), o.GetName())
}
