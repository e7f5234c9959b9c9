package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newRevokeCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke <cluster-name>",
		Short: "Cut a child off this cluster: no more certificates or renewals, its virtual node and tunnels gone (run against the parent)",
		Long: `Record the child in kube-system/nestlet-revoked: the parent's agent denies its certificate
requests from now on (renewals included), deletes its virtual node whenever it comes back, and
nestlet-proxy closes and refuses its tunnels. Its pending requests are denied and its virtual node
deleted at once; its pods in this cluster are then those of a lost node. The certificate it holds
stays valid for this API server until it expires: keep node certificates short-lived
(kube-controller-manager --cluster-signing-duration). To let it back, remove its key from the
ConfigMap and give it a new token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := clientset(cmd)
			if err != nil {
				return err
			}
			done, err := nestctl.Revoke(cmd.Context(), client, args[0], reason, time.Now())
			for _, line := range done {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the revocation")
	return cmd
}
