package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/api"

	"github.com/nestlet/nestlet/nestctl"
)

func newJoinCommand() *cobra.Command {
	var o nestctl.JoinOptions
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Join this (child) cluster to a parent: writes the token Secret and the Target",
		Long: `Run against the child cluster (--kubeconfig) with the values 'nestctl token create'
printed on the parent. It installs the Target CRD if missing, stores the bootstrap token in a
Secret and creates (or updates) the Target; the agent running in the child does the rest.
The Target carries the finalizer nestlet.io/cleanup: deleting it waits for the agent to
remove the node from the parent (without an agent, remove the finalizer by hand).
Follow it with: kubectl get targets`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(cmd)
			if err != nil {
				return err
			}
			t, err := nestctl.Join(cmd.Context(), cfg, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "target/%s created: this cluster joins %s as node %q (watch: kubectl get target %s)\n",
				t.Name, t.Spec.ParentURL, t.Spec.ClusterName, t.Name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ParentURL, "parent-url", "", "the parent's API server URL (required)")
	f.StringVar(&o.Token, "token", "", "bootstrap token from 'nestctl token create' (required)")
	f.StringVar(&o.CACertHash, "ca-cert-hash", "", "sha256:<hex> pin of the parent's CA (or --ca-file)")
	f.StringVar(&o.CAFile, "ca-file", "", "the parent's CA bundle (PEM), instead of --ca-cert-hash")
	f.StringVar(&o.ClusterName, "cluster-name", "", "this cluster's name in the parent (required)")
	f.StringToStringVar(&o.Labels, "labels", nil, "extra labels for the virtual node, k=v,...")
	f.DurationVar(&o.ReportFrequency, "report-frequency", 10*time.Second, "how often the summary is sent")
	f.Int32Var(&o.CapacityPercent, "capacity-percent", 0, "share of this cluster's free capacity offered to this parent, 1-100 (default: split evenly between this cluster's parents)")
	f.BoolVar(&o.WaitForRoom, "wait-for-room", false, "this cluster can grow (a cluster autoscaler): a pod the parent asks a place for that fits no node here waits here, Pending, for as long as the parent's pod waits")
	f.StringVar(&o.NamespaceMapping, "namespace-mapping", "", "how the parent's namespaces are named here: Same (default) or Prefixed (the parent's cluster name and '-' first, so that two parents' namespaces never meet)")
	f.StringVar(&o.NamespacePrefix, "namespace-prefix", "", "with --namespace-mapping=Prefixed, the prefix (default: the parent's cluster name and '-')")
	f.StringSliceVar(&o.AcceptNamespaces, "accept-namespaces", nil, "the parent's namespaces whose pods this cluster takes (default: all but the parent's system namespaces)")
	f.StringToStringVar(&o.Limits, "limits", nil, "cap on what the parent's pods may request here in all, e.g. cpu=2,memory=4Gi,pods=20")
	f.StringVar(&o.PodSecurity, "pod-security", "", "the Pod Security Standard the parent's pods must meet here: privileged (default), baseline or restricted")
	f.StringVar(&o.TargetName, "name", "", "name of the Target (default: the parent's host and port)")
	f.StringVar(&o.Namespace, "namespace", api.DefaultNamespace, "namespace of the token Secret")
	return cmd
}
