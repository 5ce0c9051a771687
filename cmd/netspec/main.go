// Command netspec validates, compiles and applies Kubernetes-style Service
// specs kept in a git repository, without a Kubernetes API server.
package main

import "os"

func main() { os.Exit(Main()) }
