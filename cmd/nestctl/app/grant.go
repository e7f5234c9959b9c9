package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/nestctl"
)

func newGrantCommand() *cobra.Command {
	var o nestctl.GrantOptions
	cmd := &cobra.Command{
		Use:   "grant <cluster-name> [CIDR,...]",
		Short: "Show or set the pod CIDRs a child is granted: the most of what it claims that this cluster routes to it (run against the parent)",
		Long: `A child's summary claims the pod CIDRs of its subtree; this cluster routes to it, carries up and
tells its other children only what it grants, as node IPAM grants a node its pod CIDR: the CIDRs in
kube-system/nestlet-pod-cidrs (this command, or nestctl token create --pod-cidrs), or, for a child
without a grant there, a share of the agent's pool (--pod-cidr-pool) that no other child holds.
Never this cluster's own (its nodes' pod CIDRs and addresses, its Service CIDRs). What is refused,
the child's Target says (condition PodCIDRsGranted), and an event on its virtual node here.
  nestctl grant east 10.1.0.0/16,fd00:1::/48
  nestctl grant east --claimed      (what east claims now, but what another child holds)
  nestctl grant east --remove       (back to the pool)`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := clientset(cmd)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				o.Set = args[1]
			}
			out, err := nestctl.Grant(cmd.Context(), client, args[0], o)
			for _, line := range out {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&o.Claimed, "claimed", false, "grant what the child claims now")
	cmd.Flags().BoolVar(&o.Remove, "remove", false, "remove the child's grant: it may claim a share of the pool again")
	cmd.Flags().StringVar(&o.AgentNamespace, "agent-namespace", api.DefaultNamespace, "with --claimed: the namespace of this cluster's Nestlet agent, where it records the children's shares of its pool")
	cmd.MarkFlagsMutuallyExclusive("claimed", "remove")
	return cmd
}
