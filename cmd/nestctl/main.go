// Command nestctl is Nestlet's command line: token create, join and approve.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nestlet/nestlet/cmd/nestctl/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.NewCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "nestctl:", err)
		os.Exit(1)
	}
}
