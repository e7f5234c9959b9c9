// Package hollow runs hollow child clusters, in the manner of kubemark's
// hollow nodes: a real Nestlet agent joined to a real parent, over a
// simulated child cluster, many of them in one process. It is how the
// benchmarks reach the Gaia paper's topology (1 root, 2 field clusters,
// 120 leaves) on one machine.
//
// # What is real
//
// The agent: provider/agent with everything below it (join, virtual node,
// forwarding, virtual-kubelet's node and pod controllers), built from this
// checkout and run in this process with agent.New(...).Run. Its side of
// the parent is untouched: it discovers the parent with the bootstrap
// token and the CA pin, requests its node certificate with a CSR and
// watches it, registers and renews its virtual node and Lease, and
// forwards the pods bound to it, all over TLS to the parent's real API
// server. A hollow child joins exactly as a real one does (ParentOf runs
// `nestctl token create --auto-approve`; Start writes the token Secret and
// the Target that `nestctl join` writes).
//
// # What is simulated
//
// The child cluster (Cluster):
//
//   - its API server: client-go's fake clientset (kubernetes.Interface),
//     whose ObjectTracker stores the objects, with reactors that give it the
//     API-server behaviour the agent relies on (store.go): uids,
//     resourceVersions and optimistic concurrency, generateName, the status
//     subresource, generation, finalizers, graceful deletion of bound pods,
//     pods/binding, field selectors (the fake ignores them), and watches
//     that honour selectors and resume from a resourceVersion (the
//     tracker's own watch does neither, and panics once 100 events wait);
//   - its Target API: a real client-go generic client
//     (v1alpha1.TargetInterface is the concrete *gentype.ClientWithList, so
//     no fake type can stand in), whose requests an in-process
//     http.RoundTripper serves from a testing.Fake over an ObjectTracker
//     with the same semantics, through gentype's fake client (watch-list
//     streaming included);
//   - its nodes: N static nodes, Ready, with capacity and allocatable and
//     the configured labels (region, zone, ...);
//   - its scheduler and kubelets (kubelet.go): a pod without a node is bound
//     to a node that matches its nodeSelector and required node affinity,
//     tolerates its taints and has room for its requests, nodes taken in
//     turn; a pod that fits nowhere is marked Unschedulable (which the
//     agent bounces back after its timeout); a bound pod is Running and
//     Ready with a pod IP at once (or after StartDelay); a pod marked for
//     deletion has its containers terminated and is deleted for good;
//   - its readiness: the agent's Ready check always succeeds.
//
// # Limits
//
//   - No admission, defaulting or validation beyond the checks above; no
//     authentication or authorization inside the child; no garbage
//     collector (ownerReferences are stored, never acted on: deleting a
//     Target leaves its delegates), no namespace lifecycle (a deleted
//     namespace goes at once, its objects stay), no controllers at all
//     (no ReplicaSets, Jobs, ServiceAccount tokens, endpoints).
//   - The scheduler does no scoring, preemption, topology spread, pod
//     affinity or priority; containers never exit, restart or fail
//     probes, so Jobs never complete; there are no node heartbeats,
//     leases or conditions that change; logs, exec and port-forward are
//     not served (the agent runs with agent.KubeletAPIOff).
//   - No server-side apply or field management, no JSON patch (merge and
//     strategic merge patches are applied), no DeleteCollection; watches
//     never time out and carry no bookmarks but watch-list's
//     initial-events-end; a watch may resume only within the last 256
//     changes of a cluster (older: 410 Expired, as from a watch cache).
//   - Everything lives in memory, in the test process: every hollow child
//     shares one Go runtime, heap, garbage collector and the machine's
//     CPUs with the others. Its cost per child is an average that includes
//     the simulation, not the footprint of one agent process.
package hollow
