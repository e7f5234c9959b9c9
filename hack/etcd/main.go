// Command etcd is etcd's own server main, built from the Go module proxy at the
// version pinned in this directory's go.mod, for the local test clusters.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
