package proxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPodOf(t *testing.T) {
	type result struct {
		Namespace, Pod string
		OK             bool
	}
	tests := []struct {
		name string
		path string
		want result
	}{
		{name: "container logs", path: "/containerLogs/default/web/app", want: result{"default", "web", true}},
		{name: "exec", path: "/exec/default/web/app", want: result{"default", "web", true}},
		{name: "exec with the pod's UID", path: "/exec/default/web/0c1d-uid/app", want: result{"default", "web", true}},
		{name: "attach", path: "/attach/kube-system/coredns-abc/coredns", want: result{"kube-system", "coredns-abc", true}},
		{name: "port-forward", path: "/portForward/default/web", want: result{"default", "web", true}},
		{name: "port-forward with the pod's UID", path: "/portForward/default/web/0c1d-uid", want: result{"default", "web", true}},
		{name: "run", path: "/run/default/web/app", want: result{"default", "web", true}},
		{name: "stats summary (node level)", path: "/stats/summary"},
		{name: "pods (node level)", path: "/pods"},
		{name: "running pods (node level)", path: "/runningpods/"},
		{name: "metrics (node level)", path: "/metrics/resource"},
		{name: "node logs", path: "/logs/kubelet.log"},
		{name: "configz", path: "/configz"},
		{name: "root", path: "/"},
		{name: "empty", path: ""},
		{name: "route without a pod", path: "/exec/default"},
		{name: "route without a pod, trailing slash", path: "/exec/default/"},
		{name: "route without a namespace", path: "/exec//web/app"},
		{name: "route name only", path: "/containerLogs"},
		{name: "routes are case-sensitive", path: "/portforward/default/web"},
		{name: "a route under another prefix", path: "/api/exec/default/web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got result
			got.Namespace, got.Pod, got.OK = podOf(tt.path)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("podOf(%q) (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}
