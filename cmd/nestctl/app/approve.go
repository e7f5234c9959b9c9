package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newApproveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "approve <cluster-name>",
		Short: "Approve a child's pending node certificate request, if filed with a token made for it (run against the parent)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := clientset(cmd)
			if err != nil {
				return err
			}
			// Requests of the name filed by anyone else (a token made for
			// another child, another node) are denied and returned as
			// the error, after what was approved.
			names, err := nestctl.Approve(cmd.Context(), client, args[0])
			for _, n := range names {
				fmt.Fprintf(cmd.OutOrStdout(), "certificatesigningrequest/%s approved\n", n)
			}
			return err
		},
	}
}
