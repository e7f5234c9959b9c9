package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/nestctl"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this nestctl",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), nestctl.Version())
		},
	}
}
