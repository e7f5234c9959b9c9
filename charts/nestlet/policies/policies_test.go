package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestInstallChildren(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	require.NoError(t, InstallChildren(ctx, client, "nestlet-system"))
	b, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "nestlet-children", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nestlet-system", b.Spec.ParamRef.Namespace)
	require.Equal(t, ChildrenConfigMap, b.Spec.ParamRef.Name)
	require.Equal(t, admissionregistrationv1.AllowAction, *b.Spec.ParamRef.ParameterNotFoundAction, "no record yet: no child to hold")
	fs, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, "nestlet-children", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nestlet-children", fs.Spec.PriorityLevelConfiguration.Name)

	// Installed again (a restarted agent, an upgrade): the subjects the
	// agent wrote stay.
	fs.Spec.Rules[0].Subjects[0].User.Name = "system:node:east"
	_, err = client.FlowcontrolV1().FlowSchemas().Update(ctx, fs, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, InstallChildren(ctx, client, "nestlet-system"))
	fs, err = client.FlowcontrolV1().FlowSchemas().Get(ctx, "nestlet-children", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:node:east", fs.Spec.Rules[0].Subjects[0].User.Name)
}

// What InstallChildren made, UninstallChildren deletes, twice without error.
func TestUninstallChildren(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	require.NoError(t, InstallChildren(ctx, client, "nestlet-system"))
	require.NoError(t, UninstallChildren(ctx, client))
	require.NoError(t, UninstallChildren(ctx, client), "a second time: nothing left to delete")
	vaps, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, vaps.Items)
	bindings, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, bindings.Items)
	schemas, err := client.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, schemas.Items)
	levels, err := client.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, levels.Items)
}
