//go:build !nestlet_skip_duplicate_guard

package forward

// skipDuplicateGuard is false in every build but a deliberately broken one
// (guard_broken.go), which test/e2e/faults builds to show that its fault
// watch counts pods run twice at once.
const skipDuplicateGuard = false
