// Command volume-helper makes and removes the directories of
// local-path-provisioner's volumes on a real node: the provisioner runs it
// in its helper pod as the setup and teardown command (setupCommand,
// teardownCommand in its config), with
//
//	-p PATH -s SIZE_BYTES -m Filesystem|Block -a create|delete
//
// It needs no shell, so the image holds this program alone.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	path := flag.String("p", "", "the volume's directory")
	flag.String("s", "", "the volume's size in bytes (unused: a directory has none)")
	mode := flag.String("m", "Filesystem", "the volume mode")
	action := flag.String("a", "", "create or delete")
	flag.Parse()
	if err := run(*path, *mode, *action); err != nil {
		fmt.Fprintln(os.Stderr, "volume-helper:", err)
		os.Exit(1)
	}
}

func run(path, mode, action string) error {
	if path == "" || path == "/" {
		return fmt.Errorf("-p %q: a volume directory is required", path)
	}
	if mode != "Filesystem" {
		return fmt.Errorf("-m %s: only Filesystem volumes are made", mode)
	}
	switch action {
	case "create":
		if err := os.MkdirAll(path, 0o777); err != nil {
			return err
		}
		return os.Chmod(path, 0o777) // not narrowed by the umask
	case "delete":
		return os.RemoveAll(path)
	default:
		return fmt.Errorf("-a %q: create or delete", action)
	}
}
