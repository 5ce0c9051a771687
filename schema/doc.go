// Package schema reads a tree of Kubernetes-style specs and checks each
// object on its own.
//
// Load walks a tree (YAML, JSON and CUE files; .netspecignore, skipped
// kustomize and Helm files, symlinks kept inside the tree), decodes every
// object, and validates each against the embedded CUE schema: netspec.cue,
// which adds netspec's constraints and defaults to the complete Kubernetes
// field sets generated into k8s_fields.cue (go generate ./schema). Fields
// are checked by the schema's shape rather than by unifying whole objects
// with CUE (shape.go; TestShapeAgreesWithCUE keeps the two equal), and the
// rules that relate several fields of one object are Go code (rules.go).
// Plain block YAML, as generators and kubectl write it, is read by a reader
// of its own (fastyaml.go), anything else by yaml.v3; the nodes that
// positions come from are parsed with yaml.v3 only when a finding needs one
// (TestFastYAMLAgreesWithYAMLv3 keeps both readers equal).
// Every finding carries file:line:column. Rules that relate objects, or
// need the Cluster settings, are the compiler's.
//
// LoadFile and LoadStream read a tree that is one YAML/JSON file or a
// stream of documents (standard input), whose lock may be one of its
// documents.
//
// Load can reuse the previous reading of the same tree: unchanged files
// (by stat, then content) keep their decoded objects, and a daemon can
// name just the paths that changed (Options.Changed).
package schema
