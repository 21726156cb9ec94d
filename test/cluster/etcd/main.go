// Command etcd is the etcd server of the local cluster (make cluster): etcd's
// own main, built from the Go module proxy at the version test/cluster/versions.sh
// pins (etcd's server module cannot be go installed: its go.mod has replaces).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
