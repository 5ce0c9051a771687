// Command gen writes a large, valid netspec tree for benchmarks:
//
//	go run ./internal/gen -services 10000 -pods 2 -out DIR
//
// The tree is a pure function of the flags; see package gentree.
package main

import (
	"flag"
	"fmt"
	"os"

	"netspec.dev/netspec/internal/gen/gentree"
)

func main() {
	var cfg gentree.Config
	flag.IntVar(&cfg.Services, "services", 1000, "number of Services")
	flag.IntVar(&cfg.PodsPerService, "pods", 2, "pods per Service")
	flag.IntVar(&cfg.Namespaces, "namespaces", gentree.DefaultNamespaces, "number of namespaces (one directory each)")
	flag.IntVar(&cfg.Nodes, "nodes", gentree.DefaultNodes, "number of Nodes")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed of the generated variations")
	out := flag.String("out", "", "directory to write (must be empty or not exist)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gen -out DIR [-services N] [-pods N] [-namespaces N] [-nodes N] [-seed N]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := gentree.Write(*out, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
