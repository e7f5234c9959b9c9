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

// targetsAPI serves the Targets API for names: a DELETE marks a Target
// deleted, and it is gone (404) after gets more reads of it, or never when
// gets is negative (an agent that does not let it go).
func targetsAPI(t *testing.T, names []string, gets int) (v1alpha1.TargetInterface, func() []string) {
	t.Helper()
	var mu sync.Mutex
	reads := map[string]int{}
	var deleted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		const prefix = "/apis/nestlet.io/v1alpha1/targets"
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
		target := func(n string) v1alpha1.Target {
			return v1alpha1.Target{TypeMeta: metav1.TypeMeta{APIVersion: "nestlet.io/v1alpha1", Kind: "Target"}, ObjectMeta: metav1.ObjectMeta{Name: n},
				Status: v1alpha1.TargetStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "ParentUnreachable", Message: "dial tcp: i/o timeout"}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && name == "":
			list := v1alpha1.TargetList{TypeMeta: metav1.TypeMeta{APIVersion: "nestlet.io/v1alpha1", Kind: "TargetList"}}
			for _, n := range names {
				list.Items = append(list.Items, target(n))
			}
			_ = json.NewEncoder(w).Encode(list)
		case r.Method == http.MethodDelete:
			deleted = append(deleted, name)
			_ = json.NewEncoder(w).Encode(target(name))
		case r.Method == http.MethodGet:
			reads[name]++
			if gets >= 0 && reads[name] > gets {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
					Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
				return
			}
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
