package framework

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The ledger counts runs of one pod's container that overlap, by the
// runtime's timestamps, and nothing else: a restart after an exit, or two
// pods, are not duplicates; a run still going overlaps until now.
func TestContainerLedgerCounts(t *testing.T) {
	at := func(s int) int64 { return time.Unix(1000+int64(s), 0).UnixNano() }
	now := time.Unix(1000+100, 0)
	l := NewContainerLedger()
	// Restarted after it exited: sequential.
	l.Observe(ContainerRun{ID: "a1", Pod: "ns/job-1/app", Node: "leaf", Started: at(0), Finished: at(10)})
	l.Observe(ContainerRun{ID: "a2", Pod: "ns/job-1/app", Node: "leaf", Started: at(11), Finished: at(20)})
	// Another pod at the same time.
	l.Observe(ContainerRun{ID: "b1", Pod: "ns/job-2/app", Node: "leaf", Started: at(5), Finished: at(15)})
	// Created, never started.
	l.Observe(ContainerRun{ID: "b2", Pod: "ns/job-2/app", Node: "leaf-2"})
	require.Zero(t, l.Report(now).N)

	// db-0 on two leaves, 4 s at once.
	l.Observe(ContainerRun{ID: "c1", Pod: "ns/db-0/db", Node: "east-1", Started: at(30), Finished: at(40)})
	l.Observe(ContainerRun{ID: "c2", Pod: "ns/db-0/db", Node: "west-1", Started: at(36), Remaining: true})
	r := l.Report(now)
	require.Equal(t, 1, r.N, "%s", r)
	require.Equal(t, 4*time.Second, r.Worst)

	// c2's first read said running; it finished later, then a third run
	// overlapped it until now.
	l.Observe(ContainerRun{ID: "c2", Pod: "ns/db-0/db", Node: "west-1", Started: at(36), Finished: at(50)})
	l.Observe(ContainerRun{ID: "c3", Pod: "ns/db-0/db", Node: "east-1", Started: at(45), Remaining: true})
	r = l.Report(now)
	require.Equal(t, 2, r.N, "%s", r)
	require.Equal(t, 5*time.Second, r.Worst)
	require.False(t, l.Wants("c1", runtimeapi.ContainerState_CONTAINER_EXITED), "an exited container is read once")
	require.True(t, l.Wants("c3", runtimeapi.ContainerState_CONTAINER_EXITED), "a container seen running is read again")
	require.True(t, l.Wants("d1", runtimeapi.ContainerState_CONTAINER_EXITED), "a container never seen is read")
	// b2 was seen created: read again once it has run, however short.
	require.True(t, l.Wants("b2", runtimeapi.ContainerState_CONTAINER_EXITED), "a container seen before it started is read again")
	require.Equal(t, 6, l.Runs())
	l.Observe(ContainerRun{ID: "b2", Pod: "ns/job-2/app", Node: "leaf-2", Started: at(60), Finished: at(61)})
	require.Equal(t, 7, l.Runs())
	require.False(t, l.Wants("b2", runtimeapi.ContainerState_CONTAINER_EXITED))
}
