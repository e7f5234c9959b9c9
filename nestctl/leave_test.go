package nestctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

// targetsAPI serves the Targets API for names: a deleted Target is still
// listed by the next gets lists, then gone, or listed for ever when gets is
// negative (an agent that does not let it go).
func targetsAPI(t *testing.T, names []string, gets int) (v1alpha1.TargetInterface, func() []string) {
	t.Helper()
	var mu sync.Mutex
	listsSince := map[string]int{} // by deleted Target
	var deleted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/apis/nestlet.io/v1alpha1/targets"), "/")
		target := func(n string) v1alpha1.Target {
			return v1alpha1.Target{TypeMeta: metav1.TypeMeta{APIVersion: "nestlet.io/v1alpha1", Kind: "Target"}, ObjectMeta: metav1.ObjectMeta{Name: n},
				Status: v1alpha1.TargetStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "ParentUnreachable", Message: "dial tcp: i/o timeout"}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && name == "":
			list := v1alpha1.TargetList{TypeMeta: metav1.TypeMeta{APIVersion: "nestlet.io/v1alpha1", Kind: "TargetList"}}
			for _, n := range names {
				if k, ok := listsSince[n]; ok && gets >= 0 && k > gets {
					continue
				}
				list.Items = append(list.Items, target(n))
			}
			for n := range listsSince {
				listsSince[n]++
			}
			_ = json.NewEncoder(w).Encode(list)
		case r.Method == http.MethodDelete:
			deleted = append(deleted, name)
			listsSince[name] = 0
			_ = json.NewEncoder(w).Encode(target(name))
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := v1alpha1.NewTargetClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), deleted...)
	}
}

func TestLeave(t *testing.T) {
	t.Run("every Target, waited for until gone", func(t *testing.T) {
		c, deleted := targetsAPI(t, []string{"root", "backup"}, 1)
		done, err := Leave(t.Context(), c, nil, time.Minute)
		require.NoError(t, err)
		require.Equal(t, []string{"root", "backup"}, deleted())
		require.Contains(t, done[len(done)-1], "2 Target(s) gone")
	})
	t.Run("a Target that stays is named, with what it says and what to do", func(t *testing.T) {
		c, _ := targetsAPI(t, []string{"root"}, -1)
		_, err := Leave(t.Context(), c, []string{"root"}, 1500*time.Millisecond)
		require.Error(t, err)
		for _, want := range []string{"root", "ParentUnreachable", "dial tcp: i/o timeout", "nestlet.io/cleanup", "logs deploy/nestlet-agent"} {
			require.Contains(t, err.Error(), want)
		}
	})
}
