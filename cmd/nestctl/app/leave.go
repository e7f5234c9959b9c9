package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/nestctl"
)

func newLeaveCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "leave [target...]",
		Short: "Leave parents: delete this (child) cluster's Targets, all of them without names, and wait until the agent has removed the virtual nodes",
		Long: `Run against the child cluster. Each Target is deleted; the agent removes the cluster's virtual
node from that parent (its pods there are those of a node that left) and then lets the Target go.
nestctl waits until every Target named is gone, or fails after --timeout naming those left and
what they say. The chart runs 'nestctl leave' before helm uninstall removes the agent.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := restConfig(cmd)
			if err != nil {
				return err
			}
			targets, err := v1alpha1.NewTargetClient(cfg)
			if err != nil {
				return err
			}
			done, err := nestctl.Leave(cmd.Context(), targets, args, timeout)
			for _, line := range done {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the Targets to go")
	return cmd
}
