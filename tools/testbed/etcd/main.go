// Command etcd is the upstream etcd server, built from the Go module proxy for the test bed:
// the published server module exposes the whole CLI as etcdmain.Main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
