package main

import (
	"fmt"

	"netspec.dev/netspec/schema"
)

var schemaCommand = &command{
	name:    "schema",
	summary: "print the embedded CUE schema that validate checks objects against",
	help: `Schema prints the CUE schema embedded in this netspec: the kinds it reads
(#Service, #Endpoints, #EndpointSlice, #Pod, #Node, #Cluster), their fields,
formats, ranges and defaults, followed by the field sets of the Kubernetes
types they embed (#k8s.core.v1.PodSpec, ...), generated from k8s.io/api.
Rules that relate several fields or objects are checked in Go and listed in
docs/input.md (Validation).

Example:
  netspec schema > netspec-schema.cue`,
	want: "no arguments",
	opts: func() options { return runFunc(runSchema) },
}

func runSchema(e *env, _ []string) int {
	fmt.Fprint(e.stdout, string(schema.SchemaSource()))
	return exitOK
}
