// Command netspec validates, compiles and applies Kubernetes-style Service
// specs kept in a git repository, without a Kubernetes API server.
//
// main only calls Main; the command table (cli.go) gives every command its
// flags, usage and --help text, and each command lives in a file of its own
// (validate.go, render.go, apply.go for plan/apply/cleanup, watch.go,
// diffcmd.go, explaincmd.go, status.go …). A command parses its flags,
// calls the packages that do the work (schema, compiler, treediff,
// explain, render, applier, daemon, daemon/status) and prints what they
// return. Commands print findings as file:line:col and exit 0 on
// success, 1 on any error (usage errors included) and 2 only for
// "differences found" (docs/design.md, "Contracts"). The tests are txtar
// scripts in testdata/script, run by script_test.go, and golden files
// under golden/ (-update rewrites them).
package main

import "os"

func main() { os.Exit(Main()) }
