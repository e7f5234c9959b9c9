package api

// Reasons that Nestlet writes on pods (status.reason) and events, which the
// tests, the docs and operators' alerts match on.
const (
	// ReasonLoop fails a parent pod whose delegate would come back to a
	// cluster already on its path (a cycle of Targets).
	ReasonLoop = "NestletLoop"
	// ReasonBounced fails a parent pod whose delegate stayed unschedulable
	// in the child past the bounce timeout; its controller replaces it
	// elsewhere.
	ReasonBounced = "NestletBounced"
	// ReasonDelegateDeleted fails a parent pod whose delegate disappeared
	// or was evicted in the child.
	ReasonDelegateDeleted = "DelegateDeleted"
	// ReasonDelegateRetry is the reason of the event on a parent pod whose
	// delegate could not be written for a passing reason (the child's API
	// server out for a moment); it is retried.
	ReasonDelegateRetry = "DelegateRetry"
	// ReasonProviderFailed is virtual-kubelet's reason for a pod whose
	// delegate could not be written, used for those retried here.
	ReasonProviderFailed = "ProviderFailed"
	// ReasonServiceNameTaken: the child has a Service of the same name that
	// Nestlet did not make; it is left alone and not reflected.
	ReasonServiceNameTaken = "ServiceNameTaken"
	// ReasonReflectedAsClusterIP: a NodePort or LoadBalancer Service is
	// reflected below as a ClusterIP Service.
	ReasonReflectedAsClusterIP = "ReflectedAsClusterIP"
	// ReasonNotAdmitted fails a parent pod bound to a virtual node that it
	// should never have reached: a DaemonSet's pod (every cluster runs its
	// own DaemonSets), or a pod that neither tolerates the virtual nodes'
	// taint nor was placed by a Nestlet scheduler (bound by hand, or by a
	// scheduler that ignores taints).
	ReasonNotAdmitted = "NestletNotAdmitted"
	// ReasonClaimConflict fails a parent pod whose PersistentVolumeClaim
	// cannot be made in the child: one of that name is there and Nestlet
	// did not make it (provider/forward/claims.go).
	ReasonClaimConflict = "NestletClaimConflict"
)
