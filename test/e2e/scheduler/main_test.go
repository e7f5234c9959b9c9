package scheduler

import (
	"os"
	"testing"

	"github.com/nestlet/nestlet/test/framework"
)

// TestMain removes the nestlet binaries the tests built.
func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
