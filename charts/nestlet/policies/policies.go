// Package policies embeds the admission policies the chart installs
// (charts/nestlet/templates), so that the launcher installs the very same.
package policies

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// childrenYAML is the policy that holds the children a parent's agent
// knows to a child's rules.
//
//go:embed children.yaml
var childrenYAML []byte

// ChildrenConfigMap names the policy's parameter, the ConfigMap of the
// agent's namespace where it records the children it knows
// (api.ChildrenConfigMap; the chart cannot import api).
const ChildrenConfigMap = "nestlet-children"

// Children returns the policy, and its binding to the record in the
// agent's namespace.
func Children(namespace string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict(childrenYAML, p); err != nil {
		return nil, nil, fmt.Errorf("parsing children.yaml: %w", err)
	}
	return p, binding(p.Name, ChildrenConfigMap, namespace), nil
}

// childrenKubeletYAML is the policy that holds children's virtual nodes
// to the kubelet endpoint their parent's nestlet-proxy gives them.
//
//go:embed children-kubelet.yaml
var childrenKubeletYAML []byte

// ProxyPortsConfigMap names the kubelet policy's parameter, the
// ConfigMap of kube-public where nestlet-proxy records the node ports it
// gave and the endpoint children advertise.
const ProxyPortsConfigMap = "nestlet-proxy-ports"

// ChildrenKubelet returns the policy that holds children's nodes to the
// proxy's endpoint, and its binding to the proxy's record.
func ChildrenKubelet() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict(childrenKubeletYAML, p); err != nil {
		return nil, nil, fmt.Errorf("parsing children-kubelet.yaml: %w", err)
	}
	return p, binding(p.Name, ProxyPortsConfigMap, metav1.NamespacePublic), nil
}

// binding binds policy to the ConfigMap namespace/name, allowing every
// request while the ConfigMap is missing.
func binding(policy, name, namespace string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	allow := admissionregistrationv1.AllowAction
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			ParamRef:          &admissionregistrationv1.ParamRef{Name: name, Namespace: namespace, ParameterNotFoundAction: &allow},
		},
	}
}

// childrenFlowYAML is the priority level and FlowSchema of the
// children's node identities (subjects kept by the parent's agent).
//
//go:embed children-flow.yaml
var childrenFlowYAML []byte

// ChildrenFlow returns the priority level and the FlowSchema of the
// children's node identities.
func ChildrenFlow() (*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.FlowSchema, error) {
	docs := strings.Split(string(childrenFlowYAML), "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("children-flow.yaml holds %d documents, want 2", len(docs))
	}
	pl, fs := &flowcontrolv1.PriorityLevelConfiguration{}, &flowcontrolv1.FlowSchema{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), pl); err != nil {
		return nil, nil, fmt.Errorf("parsing children-flow.yaml: %w", err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), fs); err != nil {
		return nil, nil, fmt.Errorf("parsing children-flow.yaml: %w", err)
	}
	return pl, fs, nil
}

// InstallChildren creates or updates the policies (children's rules, and
// their kubelet endpoints) and their bindings, and the children's priority level and FlowSchema (whose subjects, once there, are
// the agent's to keep).
func InstallChildren(ctx context.Context, client kubernetes.Interface, namespace string) error {
	p, b, err := Children(namespace)
	if err != nil {
		return err
	}
	kp, kb, err := ChildrenKubelet()
	if err != nil {
		return err
	}
	for _, pb := range []struct {
		p *admissionregistrationv1.ValidatingAdmissionPolicy
		b *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	}{{p, b}, {kp, kb}} {
		if err := installPolicy(ctx, client, pb.p, pb.b); err != nil {
			return err
		}
	}
	pl, fs, err := ChildrenFlow()
	if err != nil {
		return err
	}
	levels := client.FlowcontrolV1().PriorityLevelConfigurations()
	if existing, err := levels.Get(ctx, pl.Name, metav1.GetOptions{}); err == nil {
		existing.Spec = pl.Spec
		if _, err := levels.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating priority level %s: %w", pl.Name, err)
		}
	} else if _, err = levels.Create(ctx, pl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating priority level %s: %w", pl.Name, err)
	}
	if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating FlowSchema %s: %w", fs.Name, err)
	}
	return nil
}

// installPolicy creates or updates p and its binding b.
func installPolicy(ctx context.Context, client kubernetes.Interface, p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if existing, err := policies.Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		p.ResourceVersion = existing.ResourceVersion
		if _, err = policies.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating admission policy %s: %w", p.Name, err)
		}
	} else if _, err = policies.Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating admission policy %s: %w", p.Name, err)
	}
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if existing, err := bindings.Get(ctx, b.Name, metav1.GetOptions{}); err == nil {
		b.ResourceVersion = existing.ResourceVersion
		if _, err = bindings.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating admission policy binding %s: %w", b.Name, err)
		}
	} else if _, err = bindings.Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating admission policy binding %s: %w", b.Name, err)
	}
	return nil
}

// UninstallChildren deletes what InstallChildren made (the chart's own,
// made by hand): a cluster whose agent the launcher ran is then as before,
// and the chart installed there next owns them. Those already gone are
// skipped.
func UninstallChildren(ctx context.Context, client kubernetes.Interface) error {
	p, _, err := Children("")
	if err != nil {
		return err
	}
	kp, _, err := ChildrenKubelet()
	if err != nil {
		return err
	}
	pl, fs, err := ChildrenFlow()
	if err != nil {
		return err
	}
	gone := func(what, name string, err error) error {
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", what, name, err)
		}
		return nil
	}
	admission := client.AdmissionregistrationV1()
	for _, name := range []string{p.Name, kp.Name} {
		if err := gone("admission policy binding", name, admission.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})); err != nil {
			return err
		}
		if err := gone("admission policy", name, admission.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	if err := gone("FlowSchema", fs.Name, client.FlowcontrolV1().FlowSchemas().Delete(ctx, fs.Name, metav1.DeleteOptions{})); err != nil {
		return err
	}
	return gone("priority level", pl.Name, client.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, pl.Name, metav1.DeleteOptions{}))
}
