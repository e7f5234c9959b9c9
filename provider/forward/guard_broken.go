//go:build nestlet_skip_duplicate_guard

package forward

// skipDuplicateGuard: this build forwards every pod twice (two delegates
// under its two names), and forwards it again whenever virtual-kubelet
// asks. Built only with the tag nestlet_skip_duplicate_guard, by the test
// of the fault watch (test/e2e/faults); never release it.
const skipDuplicateGuard = true
