package launcher

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// VolumeHelperImage is local-path-provisioner's helper image
// (hack/images/volume-helper): it makes and removes a volume's directory.
const VolumeHelperImage = "nestlet.local/volume-helper:v1"

// LocalPathClass is the StorageClass of local-path-provisioner, the
// default class of a cluster started with ClusterOptions.LocalPath.
const LocalPathClass = "local-path"

const (
	localPathUser        = "system:local-path-provisioner"
	localPathNamespace   = "local-path-storage"
	localPathSA          = "local-path-provisioner"
	localPathProvisioner = "rancher.io/local-path"
)

// startLocalPath runs local-path-provisioner
// (github.com/rancher/local-path-provisioner, built by
// hack/install-binaries.sh at the version pinned in
// hack/tools/local-path-provisioner) on the cluster's host, as a program,
// with the RBAC, namespace and ServiceAccount its manifests make, and
// makes its StorageClass the cluster's default. Volumes are directories
// under <cluster dir>/local-path, made and removed by a helper pod on the
// volume's real node (VolumeHelperImage).
func (c *Cluster) startLocalPath(ctx context.Context) error {
	bin := filepath.Join(c.bins.Dir, "local-path-provisioner")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: %s", ErrBinariesMissing, bin)
	}
	dir := filepath.Join(c.Dir, "local-path")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"nodePathMap":     []map[string]any{{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{dir}}},
		"setupCommand":    "/volume-helper",
		"teardownCommand": "/volume-helper",
	})
	if err != nil {
		return err
	}
	helper := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n  containers:\n"+
		"  - name: helper-pod\n    image: %s\n    imagePullPolicy: Never\n", VolumeHelperImage)
	configPath, helperPath := filepath.Join(c.Dir, "local-path-config.json"), filepath.Join(c.Dir, "local-path-helper-pod.yaml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(helperPath, []byte(helper), 0o644); err != nil {
		return err
	}
	identity, err := c.ca.issue(filepath.Join(c.Dir, "pki"), "local-path-provisioner", pkix.Name{CommonName: localPathUser}, nil, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := c.writeKubeconfig("local-path-provisioner", identity)
	if err != nil {
		return err
	}
	if err := c.ensureLocalPathObjects(ctx); err != nil {
		return fmt.Errorf("local-path-provisioner: %w", err)
	}
	proc, err := c.start("local-path-provisioner", bin, "start",
		"--kubeconfig="+kubeconfig,
		"--config="+configPath,
		"--helper-pod-file="+helperPath,
		"--provisioner-name="+localPathProvisioner,
		"--namespace="+localPathNamespace,
		"--service-account-name="+localPathSA,
		"--configmap-name=local-path-config",
		"--helper-image="+VolumeHelperImage,
	)
	if err != nil {
		return err
	}
	c.track(proc)
	// Still running a second later: it has read its configuration (a
	// bad one makes it exit at once).
	deadline := time.Now().Add(time.Second)
	return waitHealthy(ctx, proc, time.Minute, func(context.Context) bool { return time.Now().After(deadline) })
}

// ensureLocalPathObjects makes what local-path-provisioner's manifests
// make besides its Deployment: its namespace, the ServiceAccount its
// helper pods run as, its RBAC (for its own identity here), and the
// default StorageClass.
func (c *Cluster) ensureLocalPathObjects(ctx context.Context) error {
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: localPathUser}}
	rbac := c.Client.RbacV1()
	creates := []func() error{
		func() error {
			_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localPathNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.CoreV1().ServiceAccounts(localPathNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: localPathSA}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: localPathUser}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
			}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: localPathUser},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: localPathUser}, Subjects: user}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.Roles(localPathNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: localPathUser}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.RoleBindings(localPathNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: localPathUser},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: localPathUser}, Subjects: user}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
				ObjectMeta:        metav1.ObjectMeta{Name: LocalPathClass, Annotations: map[string]string{defaultClassAnnotation: "true"}},
				Provisioner:       localPathProvisioner,
				ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
				VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range creates {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
