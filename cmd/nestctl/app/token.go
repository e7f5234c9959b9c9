package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newTokenCommand() *cobra.Command {
	token := &cobra.Command{Use: "token", Short: "Manage bootstrap tokens of this (parent) cluster"}
	var (
		ttl         time.Duration
		autoApprove bool
		parentURL   string
		clusterName string
		childName   string
		quota       string
		podCIDRs    string
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a bootstrap token in the parent and print the command that joins a child to it",
		Long: `Create a bootstrap token in the parent cluster (the one --kubeconfig points at), after
making sure the parent has the standard bootstrap plumbing: a cluster-info ConfigMap in
kube-public readable for discovery, RBAC letting bootstrappers request node certificates,
and, with --auto-approve, approval of those requests by this cluster's Nestlet agent.
A token made with --child-name admits that child only; --quota bounds what the child's virtual
node may take here, whatever it claims; --pod-cidrs grants it pod CIDRs (see nestctl grant).
It prints the exact 'nestctl join' command to run against the child.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(cmd)
			if err != nil {
				return err
			}
			line, err := nestctl.CreateToken(cmd.Context(), cfg, nestctl.TokenOptions{TTL: ttl, AutoApprove: autoApprove, ParentURL: parentURL, ClusterName: clusterName, ChildName: childName, Quota: quota, PodCIDRs: podCIDRs})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid")
	create.Flags().BoolVar(&autoApprove, "auto-approve", false, "approve children's node certificate requests automatically (else: nestctl approve)")
	create.Flags().StringVar(&parentURL, "parent-url", "", "the parent's API server URL as children reach it (default: the kubeconfig's server)")
	create.Flags().StringVar(&clusterName, "cluster-name", "", "this parent's own cluster name, published for children (appears on pods' hop path)")
	create.Flags().StringVar(&childName, "child-name", "", "the one name the token admits, the child's in the parent (filled into the printed command); without it, any name no Ready node has (a token shared by a fleet)")
	create.Flags().StringVar(&quota, "quota", "", "with --child-name: the most this cluster's scheduler will place on the child, whatever it claims (e.g. cpu=64,memory=256Gi; see nestctl quota)")
	create.Flags().StringVar(&podCIDRs, "pod-cidrs", "", "with --child-name: the pod CIDRs the child is granted, the most of what it claims that this cluster routes to it (e.g. 10.1.0.0/16; see nestctl grant)")
	token.AddCommand(create)
	return token
}
