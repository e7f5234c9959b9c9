package nestctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/permissions"
)

// Leave deletes the Targets named (every Target of this cluster when names
// is empty) and waits, at most timeout, until each is gone (one list a
// second): the agent
// removes the cluster's virtual node from that parent before it lets its
// Target go (finalizer nestlet.io/cleanup). It returns what it did; on
// timeout an error that names the Targets left, what their conditions
// say, and what to do.
func Leave(ctx context.Context, targets v1alpha1.TargetInterface, names []string, timeout time.Duration) ([]string, error) {
	if len(names) == 0 {
		list, err := targets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Targets: %w", err)
		}
		for _, t := range list.Items {
			names = append(names, t.Name)
		}
	}
	var done []string
	for _, name := range names {
		err := targets.Delete(ctx, name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			done = append(done, fmt.Sprintf("target/%s: not found", name))
		case err != nil:
			return done, fmt.Errorf("deleting Target %s: %w", name, err)
		default:
			done = append(done, fmt.Sprintf("target/%s deleted: the agent removes the virtual node from its parent", name))
		}
	}
	wanted := map[string]bool{}
	for _, name := range names {
		wanted[name] = true
	}
	left := map[string]*v1alpha1.Target{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := targets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		clear(left)
		for i := range list.Items {
			if t := &list.Items[i]; wanted[t.Name] {
				left[t.Name] = t
			}
		}
		return len(left) == 0, nil
	})
	if err == nil {
		return append(done, fmt.Sprintf("%d Target(s) gone: this cluster left those parents", len(names))), nil
	}
	var why []string
	for name, t := range left {
		var conds []string
		for _, c := range t.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
		why = append(why, fmt.Sprintf("%s [%s]", name, strings.Join(conds, "; ")))
	}
	return done, errors.New("Targets still present after " + timeout.String() + ": " + strings.Join(why, ", ") +
		". The agent removes a virtual node from its parent before it lets the Target go: is it running (kubectl -n " +
		api.DefaultNamespace + " logs deploy/nestlet-agent) and can it reach the parent? To let a Target go without that, " +
		"remove its finalizer " + api.FinalizerCleanup + " (the parent then keeps the node until its admin deletes it)")
}

// LeavePermissions are what Leave does; the chart's pre-delete hook grants
// exactly these (charts/nestlet/templates/agent-leave.yaml, checked by
// test/e2e/chart).
var LeavePermissions = []permissions.Rule{
	{APIGroups: []string{"nestlet.io"}, Resources: []string{"targets"}, Verbs: []string{"list", "delete"},
		Why: "every Target is listed and deleted, and listed again until it is gone"},
}
