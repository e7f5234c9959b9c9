package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newQuotaCommand() *cobra.Command {
	var claimed bool
	cmd := &cobra.Command{
		Use:   "quota <cluster-name> [RESOURCE=QUANTITY,...]",
		Short: "Show or set the capacity quota of a child: the most this cluster's scheduler places on its virtual node (run against the parent)",
		Long: `A child's virtual node advertises what the child says its subtree holds; its quota, in
kube-system/nestlet-quotas, is the most this cluster believes: the scheduler places no more than the
quota there, and a child that claims more gets a Warning event (OverQuota) on its node. A child
without a quota is believed. Set one (or one at token creation: nestctl token create --quota):
  nestctl quota east cpu=64,memory=256Gi    (resources not named keep their quota)
  nestctl quota east --claimed              (whatever east claims now)`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := clientset(cmd)
			if err != nil {
				return err
			}
			set := ""
			if len(args) == 2 {
				set = args[1]
			}
			out, err := nestctl.Quota(cmd.Context(), client, args[0], set, claimed)
			for _, line := range out {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&claimed, "claimed", false, "set the quota to what the child claims now")
	return cmd
}
