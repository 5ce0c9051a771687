package watch

import (
	"fmt"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// target is what a plan is applied to: the node's kernel and state dir
// (applier.Node), or the state dir alone (--dataplane none).
type target interface {
	// Apply makes the node hold p, reading back what it holds (drift
	// repaired).
	Apply(p *plan.Plan) (*applier.Result, error)
	// Update makes the node hold p by difference with what was applied
	// last.
	Update(p *plan.Plan) (*applier.Result, error)
	Close() error
}

// filesOnly is a target without a kernel: it writes the state dir's zone
// files, env files and plan.json, as applier.Node does, and leaves
// nftables alone. applier has no Node without a kernel, so this uses
// applier/state directly.
type filesOnly struct {
	dir *state.Dir
}

func openFilesOnly(stateDir string) (*filesOnly, error) {
	if stateDir == "" {
		stateDir = applier.DefaultStateDir
	}
	dir, err := state.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return &filesOnly{dir: dir}, nil
}

func (f *filesOnly) Apply(p *plan.Plan) (*applier.Result, error) {
	start := time.Now()
	files, err := render.Files(p, render.DataplaneNFTables)
	if err != nil {
		return nil, err
	}
	delete(files, state.RulesetFile) // no kernel: the ruleset is not installed, nor kept
	r := &applier.Result{NFT: &nft.Changes{}}
	if r.Files, err = f.dir.Apply(files); err != nil {
		return r, fmt.Errorf("state dir: %w", err)
	}
	r.Took = time.Since(start)
	return r, nil
}

// Update is Apply: the state dir is compared file by file either way.
func (f *filesOnly) Update(p *plan.Plan) (*applier.Result, error) { return f.Apply(p) }

func (f *filesOnly) Close() error { return nil }
