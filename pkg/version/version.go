// Package version says which build of Nestlet runs: `make images` stamps
// it (hack/images.sh, -ldflags -X); other builds say "dev".
package version

// Version is the release (the chart's appVersion) and Revision the commit
// the binary was built from.
var (
	Version  = "dev"
	Revision = "unknown"
)

// String is Version and Revision, as printed.
func String() string { return Version + " (" + Revision + ")" }
