package app

import (
	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newTreeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree",
		Short: "Show the clusters below this one, from their summaries",
		Long: `Draw the topology below the cluster --kubeconfig points at: each child (a virtual node)
with its ready state, depth, the real nodes it covers, CPU and memory allocatable and in use,
the pods this cluster sent it, its regions, and the clusters its summary covers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := clientset(cmd)
			if err != nil {
				return err
			}
			t, err := nestctl.LoadTree(cmd.Context(), client)
			if err != nil {
				return err
			}
			t.Render(cmd.OutOrStdout())
			return nil
		},
	}
}
