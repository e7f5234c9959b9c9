// Package join is the child's side of joining a parent cluster: discovery of
// the parent's CA through its signed cluster-info ConfigMap (pinned by hash,
// as kubeadm does), authentication with a bootstrap token, and a node client
// certificate obtained by a CertificateSigningRequest that is watched until
// issued. Failures are *Error values whose Reason is a Target condition
// reason.
package join
