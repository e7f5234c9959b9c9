package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/proxy/bootstrap"
)

func newTokenCommand() *cobra.Command {
	token := &cobra.Command{Use: "token", Short: "Manage bootstrap tokens of this (parent) cluster"}
	var (
		ttl         time.Duration
		autoApprove bool
		parentURL   string
		clusterName string
		childName   string
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a bootstrap token in the parent and print the command that joins a child to it",
		Long: `Create a bootstrap token in the parent cluster (the one --kubeconfig points at), after
making sure the parent has the standard bootstrap plumbing: a cluster-info ConfigMap in
kube-public readable for discovery, RBAC letting bootstrappers request node certificates,
and, with --auto-approve, the bindings that get those requests approved automatically.
It prints the exact 'nestctl join' command to run against the child.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(cmd)
			if err != nil {
				return err
			}
			line, err := CreateToken(cmd.Context(), cfg, TokenOptions{TTL: ttl, AutoApprove: autoApprove, ParentURL: parentURL, ClusterName: clusterName, ChildName: childName})
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
	create.Flags().StringVar(&childName, "child-name", "<child-name>", "the name the child will have in the parent, filled into the printed command")
	token.AddCommand(create)
	return token
}

// TokenOptions are the flags of `nestctl token create`.
type TokenOptions struct {
	TTL                               time.Duration
	AutoApprove                       bool
	ParentURL, ClusterName, ChildName string
}

// CreateToken prepares the parent, creates a token and returns the join
// command line.
func CreateToken(ctx context.Context, cfg *rest.Config, o TokenOptions) (string, error) {
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return "", fmt.Errorf("reading the kubeconfig's CA: %w", err)
	}
	if len(cfg.CAData) == 0 {
		return "", fmt.Errorf("the kubeconfig names no CA for the parent's API server: children need one to pin")
	}
	if o.ParentURL == "" {
		o.ParentURL = cfg.Host
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	if err := bootstrap.EnsurePlumbing(ctx, client, bootstrap.Options{
		ServerURL: o.ParentURL, CAData: cfg.CAData, ClusterName: o.ClusterName, AutoApprove: o.AutoApprove,
	}); err != nil {
		return "", err
	}
	tok, err := bootstrap.CreateToken(ctx, client, o.TTL, "nestlet join token")
	if err != nil {
		return "", err
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := bootstrap.WaitSigned(waitCtx, client, tok); err != nil {
		return "", err
	}
	hash, err := bootstrap.CAHash(cfg.CAData)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("nestctl join --parent-url %s --token %s --ca-cert-hash %s --cluster-name %s", o.ParentURL, tok, hash, o.ChildName), nil
}
