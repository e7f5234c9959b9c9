package nestctl

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/proxy/bootstrap"
)

// TokenOptions are the flags of `nestctl token create`.
type TokenOptions struct {
	TTL                               time.Duration
	AutoApprove                       bool
	ParentURL, ClusterName, ChildName string
	// Quota ("cpu=64,memory=256Gi"), with ChildName, is set as the child's
	// capacity quota before it joins (api.QuotasConfigMap).
	Quota string
	// PodCIDRs ("10.1.0.0/16"), with ChildName, are granted the child
	// before it joins (api.PodCIDRGrantsConfigMap, nestctl grant).
	PodCIDRs string
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
	if o.Quota != "" {
		if o.ChildName == "" {
			return "", fmt.Errorf("--quota needs --child-name: a quota is one child's")
		}
		q, err := quota.Parse(o.Quota)
		if err != nil {
			return "", fmt.Errorf("--quota: %w", err)
		}
		if _, err := quota.Record(ctx, client, o.ChildName, q, false, "nestctl"); err != nil {
			return "", err
		}
	}
	if o.PodCIDRs != "" {
		if o.ChildName == "" {
			return "", fmt.Errorf("--pod-cidrs needs --child-name: a grant is one child's")
		}
		ps, err := podcidrs.Parse(o.PodCIDRs)
		if err != nil {
			return "", fmt.Errorf("--pod-cidrs: %w", err)
		}
		if err := podcidrs.Record(ctx, client, o.ChildName, ps, "nestctl"); err != nil {
			return "", err
		}
	}
	if err := bootstrap.EnsurePlumbing(ctx, client, bootstrap.Options{
		ServerURL: o.ParentURL, CAData: cfg.CAData, ClusterName: o.ClusterName, AutoApprove: o.AutoApprove,
	}); err != nil {
		return "", err
	}
	description := "nestlet join token"
	if o.ChildName != "" {
		description += " for " + o.ChildName
	}
	tok, err := bootstrap.CreateToken(ctx, client, o.TTL, description, bootstrap.TokenFor{ChildName: o.ChildName, AutoApprove: o.AutoApprove})
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
	child := o.ChildName
	if child == "" {
		child = "<child-name>"
	}
	return fmt.Sprintf("nestctl join --parent-url %s --token %s --ca-cert-hash %s --cluster-name %s", o.ParentURL, tok, hash, child), nil
}
