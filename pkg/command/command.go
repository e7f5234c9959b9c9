// Package command is what the main functions of Nestlet's long-running
// commands (nestlet, nestlet-proxy, nestlet-routes) share: klog's flags
// beside their own, --print-permissions, a context that SIGINT and SIGTERM
// end, and how an error ends the process.
package command

import (
	"context"
	goflag "flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/pkg/permissions"
)

// Main parses the command line into fs, klog's flags added. Then, when
// *printPermissions is set, it writes rules as JSON to stdout; else it
// calls run with a context that SIGINT or SIGTERM ends and that carries
// klog's logger. An error from either is written to stderr as
// "<name>: <error>" and the process exits with status 1.
func Main(name string, fs *pflag.FlagSet, printPermissions *bool, rules []permissions.Rule, run func(context.Context) error) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		exit(os.Stderr, name, err)
	}
	if err := Run(context.Background(), os.Stdout, *printPermissions, rules, run); err != nil {
		exit(os.Stderr, name, err)
	}
	klog.Flush()
}

// Run is Main after the flags are parsed: it writes rules to out when
// printPermissions is set, else calls run until SIGINT or SIGTERM ends
// ctx.
func Run(ctx context.Context, out io.Writer, printPermissions bool, rules []permissions.Rule, run func(context.Context) error) error {
	if printPermissions {
		return permissions.Write(out, rules)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return run(klog.NewContext(ctx, klog.Background()))
}

func exit(w io.Writer, name string, err error) {
	fmt.Fprintf(w, "%s: %v\n", name, err)
	klog.Flush()
	os.Exit(1)
}
