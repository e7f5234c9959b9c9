package nestctl

import "github.com/nestlet/nestlet/pkg/version"

// Version is what `nestctl version` prints: the release and the commit
// this build was stamped with (`make images`), or "dev".
func Version() string { return "nestctl " + version.String() }
