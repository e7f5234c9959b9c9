// Package app holds nestctl's commands, one file each.
package app

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// NewCommand returns the nestctl root command.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "nestctl",
		Short:         "Join Kubernetes clusters into a Nestlet tree and look at it",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("kubeconfig", "", "kubeconfig of the cluster to act on (default $KUBECONFIG or ~/.kube/config)")
	root.PersistentFlags().String("context", "", "kubeconfig context to use")
	root.AddCommand(newTokenCommand(), newJoinCommand(), newApproveCommand(), newRevokeCommand(), newLeaveCommand(), newQuotaCommand(), newGrantCommand(), newTreeCommand(), newPlaygroundCommand(), newVersionCommand())
	return root
}

// restConfig loads the kubeconfig named by the persistent flags.
func restConfig(cmd *cobra.Command) (*rest.Config, error) {
	path, _ := cmd.Flags().GetString("kubeconfig")
	ctxName, _ := cmd.Flags().GetString("context")
	return kubeclient.RESTConfig(path, ctxName)
}

// clientset returns a client of the cluster the persistent flags name.
func clientset(cmd *cobra.Command) (kubernetes.Interface, error) {
	cfg, err := restConfig(cmd)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
