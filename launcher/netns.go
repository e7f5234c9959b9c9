package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ipCommand runs ip with args.
func ipCommand(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipLinkGone tells whether ip failed because the link it was to delete was
// already gone: iproute2 says "Cannot find device" when it looks the name
// up, the kernel "No such device" when the link vanishes after that.
func ipLinkGone(err error) bool {
	return strings.Contains(err.Error(), "Cannot find device") || strings.Contains(err.Error(), "No such device")
}

// inNetns runs a program in the network namespace ns (nothing else of this
// program's namespaces changes), with stdin.
func inNetns(ns string, stdin *strings.Reader, prog string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + filepath.Join(netnsDir, ns), "--", prog}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s in %s: %w: %s", prog, strings.Join(args, " "), ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DialIn opens a connection from inside the network namespace ns (a host's,
// or a real node's): what a program running there would open.
func DialIn(ctx context.Context, ns, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := inNamespace(ns, func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil && conn != nil {
		_ = conn.Close()
		conn = nil
	}
	return conn, err
}

// ListenIn listens inside the network namespace ns: what a program running
// there would listen on.
func ListenIn(ns, network, address string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(ns, func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil && l != nil {
		_ = l.Close()
		l = nil
	}
	return l, err
}

// inNamespace runs do on a thread moved into the network namespace ns,
// which then moves back: sockets made by do stay in ns.
func inNamespace(ns string, do func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = self.Close() }()
		target, err := os.Open(filepath.Join(netnsDir, ns))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("network namespace %s: %w", ns, err)
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering %s: %w", ns, err)
			return
		}
		derr := do()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked: it ends with this goroutine
			// instead of serving others in the wrong namespace.
			done <- errors.Join(derr, fmt.Errorf("leaving %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		done <- derr
	}()
	return <-done
}

// saveJSON writes v to path atomically.
func saveJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
