package forward

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/permissions/permissionstest"
)

// TestMain runs the package's tests, then checks every request the
// forwarder made in its fake clusters (the child side: cfg.Child), in any
// test, against Permissions as RBAC would: a request the agent's role does
// not grant fails here, not in an e2e where the agent is refused (a
// PriorityClass read once was). A request counts when code of this package
// outside its tests is on the caller's stack (not the tests' own setup and
// reads); informers' lists and watches, made by client-go's goroutines, are
// not seen.
func TestMain(m *testing.M) {
	var mu sync.Mutex
	var made []k8stesting.Action
	byForwarder := func() bool {
		pcs := make([]uintptr, 64)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
		for {
			f, more := frames.Next()
			if strings.Contains(f.File, "/provider/forward/") && !strings.HasSuffix(f.File, "_test.go") {
				return true
			}
			if !more {
				return false
			}
		}
	}
	record := func(a k8stesting.Action) {
		if byForwarder() {
			mu.Lock()
			made = append(made, a)
			mu.Unlock()
		}
	}
	testHookChild = func(c kubernetes.Interface) {
		f, ok := c.(*fake.Clientset)
		if !ok {
			return
		}
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			record(a)
			return false, nil, nil
		})
		f.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
			record(a)
			return false, nil, nil
		})
	}
	code := m.Run()
	mu.Lock()
	denied := permissionstest.Denied(Permissions, api.DefaultNamespace, made)
	mu.Unlock()
	if len(denied) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the forwarder made requests in its cluster that Permissions (permissions.go) do not grant, "+
			"which the agent's role would refuse:\n  %s\n", strings.Join(denied, "\n  "))
		code = 1
	}
	os.Exit(code)
}
