package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/internal/stages"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/ipvsmodel"
	"netspec.dev/netspec/treediff"
)

// dataplaneFlags are --dataplane and --ipvs-scheduler of the commands
// that render a data plane.
type dataplaneFlags struct {
	dataplane     string
	ipvsScheduler string
}

// register defines the two flags, --dataplane with usage.
func (f *dataplaneFlags) register(fs *flag.FlagSet, usage string) {
	fs.StringVar(&f.dataplane, "dataplane", "nftables", usage)
	fs.StringVar(&f.ipvsScheduler, "ipvs-scheduler", render.DefaultIPVSScheduler, "with --dataplane ipvs, the `SCHEDULER` of Services without the annotation netspec.dev/ipvs-scheduler: rr, wrr, lc, wlc, sh, dh, sed, nq or mh")
}

// nodeFlags are the flags of the commands that act on this node.
type nodeFlags struct {
	loadFlags
	dataplaneFlags
	node     string
	stateDir string
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	f.loadFlags.register(fs)
	f.dataplaneFlags.register(fs, "the data plane (`nftables|ipvs`; ipvs: IPVS virtual servers, with nftables tables for what IPVS cannot do)")
	fs.StringVar(&f.node, "node", "", "the `NODE` this machine is (a Node object's name)")
	fs.StringVar(&f.stateDir, "state-dir", applier.DefaultStateDir, "`DIR` for the node's zone files, env files and record of the last applied plan (plan.json, plan.log)")
}

// applierOptions are the applier.Options the flags ask for, on e's
// nftables.
func (f *nodeFlags) applierOptions(e *env) applier.Options {
	return applier.Options{StateDir: f.stateDir, IPVS: f.dataplane == "ipvs", IPVSScheduler: f.ipvsScheduler, NFTables: e.nftables}
}

// checkDataplane checks --dataplane and --ipvs-scheduler.
func (f *dataplaneFlags) checkDataplane(e *env, cmd string) bool {
	switch {
	case f.dataplane != "nftables" && f.dataplane != "ipvs":
		e.fail(cmd, "--dataplane must be nftables or ipvs, not %q", f.dataplane)
	case !slices.Contains(ipvsmodel.Schedulers, f.ipvsScheduler):
		e.fail(cmd, "--ipvs-scheduler must be one of %s, not %q", strings.Join(ipvsmodel.Schedulers, ", "), f.ipvsScheduler)
	default:
		return true
	}
	return false
}

type planFlags struct {
	nodeFlags
	detailed bool
	json     bool
}

// applyFlags are apply's flags: those of every command on this node.
type applyFlags struct{ nodeFlags }

// cleanupFlags are cleanup's flags.
type cleanupFlags struct{ stateDir string }

var planCommand = &command{
	name:    "plan",
	args:    "TREE --node NODE [--dataplane nftables|ipvs] [--state-dir DIR] [--detailed-exitcode] [--json]",
	summary: "show what apply would change on this node (kernel and state dir)",
	help: `Plan validates TREE, compiles the plan of NODE, and compares it with what
this machine holds now: netspec's nftables tables (ip netspec, ip6 netspec)
in the network namespace plan runs in, and the state dir. It changes nothing,
and does not create the state dir when it is missing.

Lines start with + (added), ~ (changed) or - (removed); the last line sums up.
A DNS zone's change is one line that counts its records, and a namespace's
env file one that counts its variables ('netspec diff' lists them).
Where the kernel differs from the last applied plan (a rule deleted by
hand, say), that is shown as drift, whether or not the plan changed too:
elements as nft writes them and, under a chain that differs, its rules
that differ ("- rule N" as the kernel has it, "+ rule N" as the plan has
it); apply repairs them.

Beside netspec watch (the same state dir), the endpoints the daemon holds
out for failing readiness probes are compared as held out, as the daemon
applies them, and are no pending change: the daemon's record of them
(DIR/probes.json) names them, and plan lists them in a "probes:" line.
Those the last applied plan has back in (a one-shot apply puts the tree's
readiness back) no longer count. apply does not probe: it puts them back.

Needs root (or CAP_NET_ADMIN) to read the kernel's tables.

TREE may also be a single YAML or JSON file, or - for a stream of documents
on standard input; see 'netspec validate --help'.

Exit status: 0 done; 1 any error (an invalid tree, a usage error such as an
unknown flag). With --detailed-exitcode, as terraform plan: 0 nothing to
do, 2 changes pending, 1 any error; 2 never means anything else.

Examples:
  netspec plan examples/basic --node node-1
  ip netns exec blue netspec plan . --node node-1 --state-dir /var/lib/netspec-blue
  netspec plan . --node $(hostname) --detailed-exitcode || [ $? -eq 2 ]`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &planFlags{} },
}

var applyCommand = &command{
	name:    "apply",
	args:    "TREE --node NODE [--dataplane nftables|ipvs] [--ipvs-scheduler rr] [--state-dir DIR]",
	summary: "install the plan of this node: nftables rules (or IPVS), DNS zone files and env files",
	help: `Apply validates TREE, compiles the plan of NODE and makes this machine hold it:

  - the nftables tables ip netspec and ip6 netspec of the network namespace
    apply runs in are read back and changed where they differ from the plan,
    in one transaction (all or nothing); the first apply replaces them whole.
    Drift (a chain or element changed by hand) is repaired. No other table is
    touched;
  - with --dataplane ipvs, Services are IPVS virtual servers instead (one per
    frontend address, port and protocol, real servers masqueraded, the
    scheduler of the annotation netspec.dev/ipvs-scheduler or
    --ipvs-scheduler, ClientIP affinity as persistence), their addresses on
    the dummy interface netspec-ipvs0, and the nftables tables keep only what
    IPVS cannot do (masquerade marks, source ranges, reject). Switching modes
    removes what the other mode installed. Needs a kernel with IPVS (modprobe
    ip_vs);
  - conntrack entries of UDP endpoints that left a service are deleted, so
    the next datagram reaches a live endpoint;
  - DIR/dns/*.zone, DIR/env/*.env and DIR/resolv/*.conf are written
    atomically, those whose content changed; files the plan no longer has are removed. Zone serials
    never go back. Last, the applied plan is recorded: its change appended
    to DIR/plan.log, or the whole plan written as DIR/plan.json.

Applying twice changes nothing the second time. An invalid tree changes
nothing. Needs root (or CAP_NET_ADMIN).

Exit status: 0 applied, or nothing to change; 1 any error (an invalid tree,
a usage error such as an unknown flag).

Examples:
  netspec apply examples/basic --node node-1
  netspec apply . --node node-1 --dataplane ipvs --ipvs-scheduler lc
  ip netns exec blue netspec apply . --node node-1 --state-dir /var/lib/netspec-blue`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &applyFlags{} },
}

var cleanupCommand = &command{
	name:    "cleanup",
	args:    "[--state-dir DIR]",
	summary: "remove what netspec installed on this node: its nftables tables and state files",
	help: `Cleanup deletes the nftables tables ip netspec and ip6 netspec of the network
namespace it runs in, the IPVS virtual servers netspec owns and its interface
netspec-ipvs0 (if --dataplane ipvs was used), and the zone, env and resolv
files, plan.json and plan.log of the state dir. Other tables, virtual servers and
files are left alone. Running it again is harmless. A state dir that does
not exist is not created.

Exit status: 0 removed, or nothing to remove; 1 any error (a usage error
too).

Examples:
  netspec cleanup
  ip netns exec blue netspec cleanup --state-dir /var/lib/netspec-blue`,
	nargs: -1,
	opts:  func() options { return &cleanupFlags{} },
}

func (f *planFlags) register(fs *flag.FlagSet) {
	f.nodeFlags.register(fs)
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "exit 0 when nothing would change, 2 when something would, 1 on error")
	fs.BoolVar(&f.json, "json", false, "print the plan as JSON")
}

func (f *cleanupFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", applier.DefaultStateDir, "the state `DIR` apply wrote into")
}

// loadNode checks the flags of a command that acts on this node and
// loads TREE, printing diagnostics; nil means the command failed
// (already reported).
func (f *nodeFlags) loadNode(e *env, cmd, tree string) *loaded {
	if f.node == "" {
		e.usageError(cmd, "--node is required")
		return nil
	}
	if !f.checkDataplane(e, cmd) {
		return nil
	}
	defer stages.Start("load")()
	return loadValid(e, cmd, tree, &f.loadFlags, "nothing changed")
}

// compileLoaded compiles the plan of node from l with the readiness view
// o (zero: the tree's); nil means the command failed (already reported).
func compileLoaded(e *env, cmd string, l *loaded, node string, o compiler.Options) *plan.Plan {
	defer stages.Start("compile")()
	st, err := compiler.CompileStagedWith(l.tree.Objects, l.Checked, node, o)
	if err != nil {
		e.fail(cmd, "%v", err)
		return nil
	}
	return st.Finish()
}

func (f *planFlags) run(e *env, args []string) int {
	l := f.loadNode(e, "plan", args[0])
	if l == nil {
		return exitError
	}
	ao := f.applierOptions(e)
	ao.NoCreateStateDir = true // plan only reads
	n, err := applier.Open(ao)
	if err != nil {
		return e.fail("plan", "%v", err)
	}
	defer n.Close()
	// The daemon's probes: what it holds out is compared as held out.
	rec, err := daemon.ReadProbeRecord(cmp.Or(f.stateDir, applier.DefaultStateDir))
	if err != nil {
		fmt.Fprintf(e.stderr, "netspec plan: warning: the daemon's record of its probes is not read (%v); readiness is the tree's\n", err)
	}
	view, held := daemon.ProbeView(n.Last(), rec, f.node)
	p := compileLoaded(e, "plan", l, f.node, view)
	if p == nil {
		return exitError
	}
	r, err := n.Plan(p)
	if err != nil {
		return e.fail("plan", "%v", err)
	}
	old := r.Installed(p)
	d := treediff.Diff(map[string]*plan.Plan{f.node: old}, map[string]*plan.Plan{f.node: p})
	drift, err := n.Drift(r, p, d.Empty())
	if err != nil {
		return e.fail("plan", "drift from the last applied plan: %v", err)
	}
	code := exitOK
	if f.json {
		code = e.printJSON("plan", planJSON(r, d, drift, held))
	} else {
		writeNodeChanges(e.stdout, r, d, drift)
		writeHeldOut(e.stdout, held)
		fmt.Fprintln(e.stdout, planSummary(r, d))
	}
	if code == exitOK && f.detailed && !r.Empty() {
		return exitChanges
	}
	return code
}

// planJSON is what plan --json prints: the changes, drift (nil: nothing
// installed) and the endpoints compared as held out.
func planJSON(r *applier.Result, d *treediff.PlanDiff, drift *nft.Changes, held []daemon.ProbeOut) any {
	out := struct {
		Changes  bool               `json:"changes"`
		Services *treediff.PlanDiff `json:"plan"`
		NFTables *nft.Changes       `json:"nftables"`
		Drift    *nft.Changes       `json:"drift"`
		IPVS     any                `json:"ipvs,omitempty"`
		Files    any                `json:"files"`
		HeldOut  []daemon.ProbeOut  `json:"heldOut"`
	}{!r.Empty(), d, r.NFT, drift, r.IPVS, r.Files, held}
	if out.HeldOut == nil {
		out.HeldOut = []daemon.ProbeOut{}
	}
	return out
}

// writeHeldOut tells which endpoints plan compared as held out by the
// daemon's readiness probes (probeView): no change, though a one-shot
// apply puts them back in.
func writeHeldOut(w io.Writer, held []daemon.ProbeOut) {
	if len(held) == 0 {
		return
	}
	fmt.Fprintf(w, "probes: %s held out by netspec watch for failing readiness probes (its record %s); compared as held out, not as a change (apply, which does not probe, puts such endpoints back; a running watch takes them out again):\n",
		treediff.Plural(len(held), "endpoint"), daemon.ProbeRecordFile)
	for _, o := range held {
		fmt.Fprintf(w, "  %s %s: %s\n", o.Service, o.Endpoint, o.Probe)
	}
}

// applyGCPercent is the garbage collector's target for apply, unless the
// environment sets GOGC. A one-shot apply of a big tree peaks at the end of
// validation and compilation and while the kernel takes the batch (when
// the printed diff, the state dir's files and the check of the batch are
// worked out beside it), and Go's default (100) lets the heap grow to
// twice the live data there: at 50,000 Services, warm, the peak RSS was
// 626–636 MiB with 50 and 712–727 MiB with 75 (cold: 568–576 and 646–684
// MiB), for a few per cent more CPU (docs/performance.md, "Node agent
// cost").
const applyGCPercent = 50

// tuneGC sets the collector's target to percent unless GOGC is in the
// environment (lookup is os.LookupEnv): an operator's GOGC always wins.
// It reports whether it set it.
func tuneGC(percent int, lookup func(string) (string, bool)) bool {
	if _, set := lookup("GOGC"); set {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}

func (f *applyFlags) run(e *env, args []string) int {
	if tuneGC(applyGCPercent, os.LookupEnv) {
		defer debug.SetGCPercent(100)
	}
	l := f.loadNode(e, "apply", args[0])
	if l == nil {
		return exitError
	}
	p := compileLoaded(e, "apply", l, f.node, compiler.Options{})
	if p == nil {
		return exitError
	}
	ao := f.applierOptions(e)
	ao.OneShot = true
	n, err := applier.Open(ao)
	if err != nil {
		return e.fail("apply", "%v", err)
	}
	defer n.Close()
	// The diff that is printed is worked out while the kernel takes the
	// batch (at 50,000 Services it takes about 0.7 s, and after the
	// rendering it slowed that as much): from the state dir's last plan,
	// which Result.Installed returns unless the kernel has lost netspec's tables.
	last, nw := n.Last(), map[string]*plan.Plan{f.node: p}
	var d *treediff.PlanDiff
	r, err := n.ApplyBeside(p, func() {
		defer stages.Start("diff (beside)")()
		old := cmp.Or(last, applier.EmptyPlan(p))
		d = treediff.DiffWithoutDataPlane(map[string]*plan.Plan{f.node: old}, nw)
	})
	if err != nil {
		return e.fail("apply", "%v", err)
	}
	if r.Empty() {
		fmt.Fprintln(e.stdout, "no changes")
		return exitOK
	}
	// The data-plane counts are not printed: they are needed only to tell
	// whether the diff is empty (then writeNodeChanges shows drift), so
	// they are computed only when the rest of it is.
	defer stages.Start("output")()
	old := map[string]*plan.Plan{f.node: r.Installed(p)}
	if last != nil && old[f.node] != last {
		d = treediff.DiffWithoutDataPlane(old, nw)
	}
	var drift *nft.Changes
	if d.Empty() {
		// The plan is what the state dir says is installed: whatever
		// the kernel needed was drift.
		d, drift = treediff.Diff(old, nw), r.NFT
	}
	writeNodeChanges(e.stdout, r, d, drift)
	services, endpoints := p.Counts()
	zones, envs := fileCounts(append(r.Files.Added, r.Files.Changed...))
	fmt.Fprintf(e.stdout, "applied in %d ms: %s, %s; dns: %s written; env: %s written",
		r.Took.Milliseconds(), treediff.Plural(services, "service"), treediff.Plural(endpoints, "endpoint"), treediff.Plural(zones, "zone"), treediff.Plural(envs, "file"))
	if len(r.Files.Removed) > 0 {
		fmt.Fprintf(e.stdout, "; %s removed", treediff.Plural(len(r.Files.Removed), "stale file"))
	}
	if r.Conntrack > 0 {
		fmt.Fprintf(e.stdout, "; %s deleted", treediff.Plural(r.Conntrack, "conntrack entry"))
	}
	fmt.Fprintln(e.stdout)
	return exitOK
}

func (f *cleanupFlags) run(e *env, args []string) int {
	if len(args) > 0 {
		return e.usageError("cleanup", "takes no arguments, got %q", args)
	}
	n, err := applier.Open(applier.Options{StateDir: f.stateDir, NoCreateStateDir: true, NFTables: e.nftables})
	if err != nil {
		return e.fail("cleanup", "%v", err)
	}
	defer n.Close()
	tables, files, err := n.Cleanup()
	if err != nil {
		return e.fail("cleanup", "%v", err)
	}
	// The daemon's record of the endpoints it held out, which the
	// removed rules no longer hold out.
	if removed, err := daemon.RemoveProbeRecord(f.stateDir); err != nil {
		return e.fail("cleanup", "%v", err)
	} else if removed {
		files = append(files, daemon.ProbeRecordFile)
	}
	for _, t := range tables {
		if strings.HasPrefix(t, "IPVS ") {
			fmt.Fprintf(e.stdout, "- %s\n", t)
			continue
		}
		fmt.Fprintf(e.stdout, "- table %s\n", t)
	}
	for _, p := range files {
		fmt.Fprintf(e.stdout, "- %s\n", p)
	}
	if len(tables)+len(files) == 0 {
		fmt.Fprintln(e.stdout, "nothing to remove")
	}
	return exitOK
}

// writeNodeChanges prints the +/~/- lines of a plan or apply (one per
// Service at a first install: buffered): r's tables, IPVS and files, the
// Services of d, and drift, the kernel's changes against the last applied
// plan (nil: not told).
func writeNodeChanges(out io.Writer, r *applier.Result, d *treediff.PlanDiff, drift *nft.Changes) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	for _, t := range r.NFT.Tables {
		switch {
		case t.Replace && t.Reason == nft.ReasonMissing:
			fmt.Fprintf(w, "+ table %s netspec (first install)\n", t.Family)
		case t.Replace:
			fmt.Fprintf(w, "~ table %s netspec: replaced whole (%s)\n", t.Family, t.Reason)
		case t.Delete:
			fmt.Fprintf(w, "- table %s netspec (the plan has no service of this family)\n", t.Family)
		}
	}
	if r.IPVS != nil {
		for _, l := range r.IPVS.Lines() {
			fmt.Fprintln(w, l)
		}
	}
	if r.IPVSLeftovers {
		fmt.Fprintf(w, "- ipvs: virtual servers and interface %s of an earlier --dataplane ipvs\n", ipvs.LinkName)
	}
	if !d.Empty() {
		treediff.WriteText(w, d, treediff.TextOptions{NoDataPlane: true})
	}
	if drift != nil {
		writeDrift(w, drift)
	}
	for _, p := range r.Files.Added {
		fmt.Fprintf(w, "+ file %s\n", p)
	}
	for _, p := range r.Files.Changed {
		fmt.Fprintf(w, "~ file %s\n", p)
	}
	for _, p := range r.Files.Removed {
		fmt.Fprintf(w, "- file %s\n", p)
	}
}

// writeDrift prints the changes the kernel needs to hold the last applied
// plan again, ch: what was changed behind netspec's back. Tables replaced
// or deleted whole are told by writeNodeChanges.
func writeDrift(w io.Writer, ch *nft.Changes) {
	for _, t := range ch.Tables {
		for _, d := range t.Differences() {
			fmt.Fprintf(w, "%c drift: %s\n", d.Mark, d.Text)
			writeRuleChanges(w, d.Rules)
		}
	}
}

// maxRuleLines bounds the rules shown for one chain that drifted.
const maxRuleLines = 10

// writeRuleChanges prints, under a chain that drifted, the rules that
// differ: "- rule N: …" as the kernel has it, "+ rule N: …" as the plan
// has it (both for a rule changed in place).
func writeRuleChanges(w io.Writer, rules []nft.RuleChange) {
	for _, r := range rules[:min(len(rules), maxRuleLines)] {
		if r.Old != "" {
			fmt.Fprintf(w, "    - rule %d: %s\n", r.Index, r.Old)
		}
		if r.New != "" {
			fmt.Fprintf(w, "    + rule %d: %s\n", r.Index, r.New)
		}
	}
	if len(rules) > maxRuleLines {
		fmt.Fprintf(w, "    … and %d more rules that differ\n", len(rules)-maxRuleLines)
	}
}

// planSummary is the last line of plan.
func planSummary(r *applier.Result, d *treediff.PlanDiff) string {
	var added, changed, removed int
	for _, s := range d.Services {
		switch s.Change {
		case treediff.DiffAdded:
			added++
		case treediff.DiffRemoved:
			removed++
		default:
			changed++
		}
	}
	line := fmt.Sprintf("Plan: %d services to add, %d to change, %d to remove.", added, changed, removed)
	var ca, cc, cr, ea, er int
	for _, t := range r.NFT.Tables {
		ca, cc, cr = ca+len(t.ChainsAdded), cc+len(t.ChainsChanged), cr+len(t.ChainsRemoved)
		ea, er = ea+len(t.ElementsAdded), er+len(t.ElementsRemoved)
	}
	line += fmt.Sprintf(" nftables: %d chains to add, %d to rewrite, %d to remove; %d elements to add, %d to remove.", ca, cc, cr, ea, er)
	line += fmt.Sprintf(" Files: %d to write, %d to remove.", len(r.Files.Added)+len(r.Files.Changed), len(r.Files.Removed))
	return line
}

func fileCounts(paths []string) (zones, envs int) {
	for _, p := range paths {
		switch {
		case strings.HasPrefix(p, "dns/"):
			zones++
		case strings.HasPrefix(p, "env/"):
			envs++
		}
	}
	return zones, envs
}
