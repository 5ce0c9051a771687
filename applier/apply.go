package applier

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"time"

	"netspec.dev/netspec/applier/conntrack"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/internal/stages"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/ipvsmodel"
	"netspec.dev/netspec/render/nftmodel"
)

// DefaultStateDir is where a node keeps its zone files, env files and the
// last applied plan.
const DefaultStateDir = "/var/lib/netspec"

// Options say where an applier acts.
type Options struct {
	StateDir string // DefaultStateDir when empty
	// NoCreateStateDir leaves a missing state dir missing (plan and
	// cleanup, which promise not to create it): it then holds no files,
	// and only Apply creates it.
	NoCreateStateDir bool
	// NetNSFd is an open network namespace (/var/run/netns/NAME) to act
	// in; 0 is the namespace the process runs in.
	NetNSFd int
	// NoDataplane leaves the kernel alone (no nftables, no conntrack):
	// only the state dir follows the plan, for a node that serves DNS
	// and env files only (watch --dataplane none).
	NoDataplane bool
	// IPVS makes Services IPVS virtual servers (render.IPVSTable), with the
	// nftables tables doing what IPVS cannot (render.NFTablesIPVS).
	// Without it, a node that used IPVS before has its virtual servers
	// and interface removed: switching leaves nothing of the other mode.
	IPVS bool
	// IPVSScheduler is the scheduler of Services without the annotation
	// netspec.dev/ipvs-scheduler ("" for rr).
	IPVSScheduler string
	// Published, when set, is called by Apply and Update once the state
	// dir holds the new plan, before virtual servers that the plan no
	// longer has are deleted: a daemon publishes its DNS records there,
	// so that a frontend leaves DNS before its virtual server goes.
	Published func()
	// NFTables, when set, is the nftables the Node programs instead of the
	// network namespace's (tests: an nft.Fake). Such a Node touches no
	// other kernel state: no IPVS leftovers are looked for and no
	// conntrack entries deleted.
	NFTables nft.Kernel
	// Incremental makes the Node remember the model it rendered last, so
	// that a daemon's next plan, which differs in a few Services, renders
	// in a few milliseconds and shares the unchanged chains and sets with
	// the last model, which the applier then does not encode again
	// (render.Memo). A one-shot apply leaves it off: the first rendering
	// with a memo costs more than a plain one.
	Incremental bool
	// OneShot tells that the Node applies one plan and is then closed
	// (the CLI's apply): it keeps nothing of what it installed for a
	// later Update, so that the model is garbage once the kernel holds
	// it (a later Update then reads the kernel back, as Apply does).
	OneShot bool
	// KernelBusy, when set, is called as each nftables batch is sent
	// (nft.Applier.OnSend): the kernel applies it within the call. It is
	// called once the Node has started preparing the state dir's files
	// beside the batch (see Node.ApplyStaged). Node.ApplyBeside is the way to
	// use that time.
	KernelBusy func()
}

// Result is what Plan found or Apply did.
type Result struct {
	Last *plan.Plan   // the last applied plan, from the state dir; nil if none
	NFT  *nft.Changes // the kernel's tables
	// IPVS is what changed in the kernel's IPVS (with Options.IPVS).
	IPVS *ipvs.Changes
	// IPVSLeftovers tells that Apply removed virtual servers of an earlier
	// IPVS mode (without Options.IPVS).
	IPVSLeftovers bool
	Files         state.Changes
	Conntrack     int // conntrack entries deleted (Apply)
	Took          time.Duration
	// KernelAt is when the kernel held the plan (Apply, Update), before
	// the state dir is written, which network programming latency does
	// not wait for; with NoDataplane, when the files were written.
	KernelAt time.Time
}

// Empty tells whether nothing changes (Plan) or changed (Apply).
func (r *Result) Empty() bool {
	return r.NFT.Empty() && (r.IPVS == nil || r.IPVS.Empty()) && !r.IPVSLeftovers && r.Files.Empty()
}

// Node applies plans to one node: its kernel's nftables and its state
// dir. It keeps what it installed, so that a daemon can update by
// difference (Update).
type Node struct {
	opts Options
	nft  *nft.Applier  // nil with NoDataplane
	ipvs *ipvs.Applier // with Options.IPVS
	dir  *state.Dir
	last *plan.Plan
	// render remembers what the last model was built from: a daemon's
	// next plan differs in a few Services (render.Memo; nil without
	// Options.Incremental).
	render *render.Memo
	// files gives the zone, env and resolv.conf files whose input did not
	// change the ID they had, which the state dir then recognises without
	// rendering or reading the file (render.FilesMemo; nil without
	// Options.Incremental).
	files *render.FilesMemo
	// beside, while apply waits for the kernel, is the state dir's write
	// to prepare as the nftables batch is sent.
	beside *beside
	// prepared, set by tests, is called when a state dir write prepared
	// beside the kernel's batch is ready, with its error.
	prepared func(error)
	// sent, during ApplyBeside, is its work.
	sent *beside
}

// Open connects to the node's kernel (unless opts.NoDataplane) and opens
// its state dir, creating it unless opts.NoCreateStateDir.
func Open(opts Options) (*Node, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	open := state.Open
	if opts.NoCreateStateDir {
		open = state.OpenNoCreate
	}
	dir, err := open(opts.StateDir)
	if err != nil {
		return nil, err
	}
	n := &Node{opts: opts, dir: dir}
	if opts.Incremental {
		n.render, n.files = &render.Memo{}, &render.FilesMemo{}
	}
	if n.last, err = n.lastPlan(); err != nil {
		return nil, err
	}
	if opts.NoDataplane {
		return n, nil
	}
	switch {
	case opts.NFTables != nil && opts.IPVS:
		return nil, fmt.Errorf("the IPVS data plane needs the kernel, not a given nftables")
	case opts.NFTables != nil:
		n.nft = nft.New(opts.NFTables)
	default:
		if n.nft, err = nft.Open(opts.NetNSFd); err != nil {
			return nil, err
		}
	}
	n.nft.OnSend(func() {
		n.beside.start()
		n.sent.start()
		if opts.KernelBusy != nil {
			opts.KernelBusy()
		}
	})
	if opts.IPVS {
		if n.ipvs, err = ipvs.Open(opts.NetNSFd); err != nil {
			n.nft.Close()
			return nil, err
		}
	}
	return n, nil
}

// Close releases the node's connections; the rules and files stay.
func (n *Node) Close() error {
	if n.ipvs != nil {
		n.ipvs.Close()
	}
	if n.nft == nil {
		return nil
	}
	return n.nft.Close()
}

// lastPlan reads the state dir's record of the last applied plan: its
// plan.json with plan.log's deltas applied.
func (n *Node) lastPlan() (*plan.Plan, error) {
	data, deltas, err := n.dir.LastPlan()
	if err != nil || data == nil {
		return nil, err
	}
	p, err := render.ParsePlanJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", n.dir.Path(), state.PlanFile, err)
	}
	for i, b := range deltas {
		d, err := render.ParsePlanDeltaJSON(b)
		if err == nil {
			p, err = d.Apply(p)
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s: record %d: %w (remove %s to start the record over from the next apply)",
				n.dir.Path(), state.LogFile, i+1, err, state.LogFile)
		}
	}
	return p, nil
}

// record is what ApplyRecord needs to record p as applied: the delta from
// the last applied plan (nil when there is none, or p is the same), and
// the whole plan, rendered into plan.json as it is made, only if the dir
// writes it.
func (n *Node) record(p *plan.Plan) ([]byte, func(io.Writer) error, error) {
	full := func(w io.Writer) error { return render.WritePlanJSON(w, p) }
	if n.last == nil || n.last.Equal(p) {
		return nil, full, nil
	}
	delta, err := render.PlanDeltaJSON(plan.Diff(n.last, p))
	return delta, full, err
}

// desiredKernel renders what the kernel is programmed from: the ruleset
// (nil with NoDataplane) and the IPVS table (with Options.IPVS). It reads
// only the plan's Node, Cluster and Services.
func (n *Node) desiredKernel(p *plan.Plan) (*nftmodel.Ruleset, *ipvsmodel.Table, error) {
	switch {
	case n.nft == nil:
		return nil, nil, nil
	case n.ipvs == nil:
		return n.render.NFTablesModel(p), nil, nil
	case len(p.Cluster.NodePortAddresses) == 0:
		return render.NFTablesIPVSModel(p), render.IPVSTable(p, n.opts.IPVSScheduler), nil
	}
	// The node ports' virtual servers go on the node's local addresses
	// inside nodePortAddresses, as the nftables rules match them:
	// addresses the plan cannot know.
	local, err := ipvs.LocalAddrs(n.opts.NetNSFd)
	if err != nil {
		return nil, nil, fmt.Errorf("node-port addresses: %w", err)
	}
	return render.NFTablesIPVSModel(p), render.IPVSTableAt(p, n.opts.IPVSScheduler, p.NodePortAddrs(local)), nil
}

// Plan tells what Apply would change, changing nothing.
func (n *Node) Plan(p *plan.Plan) (*Result, error) {
	start := time.Now()
	rs, table, err := n.desiredKernel(p)
	if err != nil {
		return nil, err
	}
	files, err := n.files.ZoneEnvTexts(p)
	if err != nil {
		return nil, err
	}
	r := &Result{Last: n.last, NFT: &nft.Changes{}}
	if n.nft != nil {
		if r.NFT, err = n.nft.Plan(rs); err != nil {
			return nil, err
		}
	}
	if n.ipvs != nil {
		if r.IPVS, err = n.ipvs.Plan(table); err != nil {
			return nil, err
		}
	}
	if r.Files, err = n.dir.PlanFiles(files); err != nil {
		return nil, err
	}
	// plan.json, when applying p changes the record of the last applied
	// plan, as ApplyRecord reports it.
	switch {
	case n.last == nil:
		r.Files.Added = append(r.Files.Added, state.PlanFile)
		slices.Sort(r.Files.Added)
	case !n.last.Equal(p):
		r.Files.Changed = append(r.Files.Changed, state.PlanFile)
		slices.Sort(r.Files.Changed)
	}
	r.Took = time.Since(start)
	return r, nil
}

// ApplyStaged makes the node's kernel and state dir hold p: the kernel's
// tables are read back and changed where they differ (drift included),
// conntrack entries of UDP endpoints that left a frontend are deleted,
// then the state dir's files are written. The kernel comes first: the
// state dir's files change, and its plan.json names p, only once the
// kernel holds p. While the kernel takes the nftables batch (seconds at
// 50,000 Services, in one system call), the files are rendered into
// temporary files beside it (state.Dir.PrepareRecord), which are renamed
// into place once the kernel holds p, or removed if it does not.
//
// finish, when not nil, is the second step of a plan compiled in two
// (compiler.Staged): p holds the Services, and the kernel is programmed
// from them first; then finish returns the complete plan (the same
// Services, with DNS records and env files), whose files go to the state
// dir. An error of finish leaves the kernel updated and the state dir as
// it was. The files are then prepared after the kernel step, not beside
// it.
func (n *Node) ApplyStaged(p *plan.Plan, finish func() (*plan.Plan, error)) (*Result, error) {
	return n.apply(p, false, finish)
}

// ApplyBeside is ApplyStaged of a complete plan with the caller's work done beside the kernel: work
// runs in a goroutine of its own as the first nftables batch is sent, while
// the kernel takes it (at 50,000 Services, seconds in one system call, with
// a core otherwise idle). When no batch is sent (only files changed, or no
// data plane), work runs after the apply, unless the apply failed or
// changed nothing; then it does not run at all. ApplyBeside returns once
// work, if it ran, has returned. The CLI's apply works out the diff it
// prints there.
func (n *Node) ApplyBeside(p *plan.Plan, work func()) (*Result, error) {
	b := &beside{work: work}
	n.sent = b
	r, err := n.apply(p, false, nil)
	n.sent = nil
	if err == nil && !r.Empty() {
		b.start()
	}
	b.wait()
	return r, err
}

// UpdateStaged is ApplyStaged for a daemon that is the only writer of
// netspec's tables: the kernel is diffed against what this Node installed
// last rather than read back whole (see nft.Applier.Update).
func (n *Node) UpdateStaged(p *plan.Plan, finish func() (*plan.Plan, error)) (*Result, error) {
	return n.apply(p, true, finish)
}

func (n *Node) apply(p *plan.Plan, update bool, finish func() (*plan.Plan, error)) (*Result, error) {
	start := time.Now()
	end := stages.Start("render")
	rs, table, err := n.desiredKernel(p)
	end()
	if err != nil {
		return nil, err
	}
	if finish == nil {
		// A complete plan: its files are checked before anything
		// changes, so that an error changes nothing; their bytes are
		// rendered beside the kernel's batch, one file at a time into
		// its temporary file, so as not to hold them all (at 50,000
		// Services, 45 MB).
		if _, err = n.files.ZoneEnvTexts(p); err != nil {
			return nil, err
		}
	}
	r := &Result{Last: n.last, NFT: &nft.Changes{}}
	var w *state.Prepared // the state dir's write
	var werr error
	var early *beside // w prepared beside the kernel's batch
	if finish == nil && n.nft != nil {
		early = &beside{work: func() {
			end := stages.Start("state dir (beside)")
			w, werr = n.prepareState(p, update)
			end()
			if n.prepared != nil {
				n.prepared(werr)
			}
		}}
	}
	n.beside = early
	// Until the state dir's write is committed below, any return gives it
	// up: the dir stays as it was.
	defer func() {
		early.wait()
		if w != nil {
			w.Abort() // after Commit, nothing
		}
	}()
	switch {
	case n.nft == nil:
	case update:
		r.NFT, err = n.nft.Update(rs)
	default:
		r.NFT, err = n.nft.Apply(rs)
	}
	n.beside = nil
	if n.opts.OneShot && n.nft != nil {
		n.nft.Forget()
	}
	rs = nil
	if err != nil {
		return r, err
	}
	if err := n.applyIPVS(r, table, update); err != nil {
		return r, err
	}
	r.KernelAt = time.Now()
	if flows := staleFlows(n.last, p); len(flows) > 0 && n.nft != nil && n.opts.NFTables == nil {
		if r.Conntrack, err = conntrack.Delete(n.opts.NetNSFd, flows); err != nil {
			return r, fmt.Errorf("conntrack: %w", err)
		}
	}
	if finish != nil {
		if p, err = finish(); err != nil {
			return r, err
		}
	}
	defer stages.Start("state dir")()
	if !early.wait() { // no batch was sent, or the plan was staged
		w, werr = n.prepareState(p, update)
	}
	if werr != nil {
		return r, werr
	}
	if r.Files, err = w.Commit(); err != nil {
		return r, err
	}
	// The state dir records p now: the next delta is from p, whatever
	// happens below.
	n.last = p
	if n.nft == nil {
		r.KernelAt = time.Now() // no kernel: the files are what changes
	}
	if n.opts.Published != nil {
		n.opts.Published()
	}
	if n.ipvs != nil {
		// Frontends the plan no longer has: out of DNS and of the
		// tables now, their virtual servers can go.
		pruned, err := n.ipvs.Prune(table)
		r.IPVS.Merge(pruned)
		if err != nil {
			return r, fmt.Errorf("ipvs: %w", err)
		}
	}
	r.Took = time.Since(start)
	return r, nil
}

// prepareState prepares the state dir's write of p (state.Dir.PrepareRecord):
// its files in temporary files, which only Commit renames into place.
func (n *Node) prepareState(p *plan.Plan, update bool) (*state.Prepared, error) {
	files, err := n.files.ZoneEnvTexts(p)
	if err != nil {
		return nil, err
	}
	if !update {
		// Apply reads every file back, as it reads the kernel back:
		// it repairs what was changed by hand (state.Dir.Forget).
		n.dir.Forget()
	}
	delta, full, err := n.record(p)
	if err != nil {
		return nil, err
	}
	return n.dir.PrepareRecord(files, delta, full)
}

// beside is work run in a goroutine of its own as the first nftables batch
// of an apply is sent (nft.Applier.OnSend): the kernel applies a batch
// within the system call that sends it, on one core, for seconds at 50,000
// Services, and the work takes the idle one meanwhile. A nil beside does
// nothing.
type beside struct {
	work    func()
	started bool // by start, on apply's goroutine
	wg      sync.WaitGroup
}

// start has the work run in its own goroutine, once.
func (b *beside) start() {
	if b != nil && !b.started {
		b.started = true
		b.wg.Go(b.work)
	}
}

// wait returns once the work, if it started, has returned, and tells
// whether it started.
func (b *beside) wait() bool {
	if b == nil {
		return false
	}
	b.wg.Wait()
	return b.started
}

// applyIPVS installs table into the kernel's IPVS (with Options.IPVS; by
// difference with the last table when update), but for virtual servers the
// plan no longer has, which apply prunes once DNS no longer names them;
// after the nftables tables, which by then mark and filter for it; or,
// without, removes what an earlier IPVS mode left.
func (n *Node) applyIPVS(r *Result, table *ipvsmodel.Table, update bool) error {
	var err error
	switch {
	case n.nft == nil, n.opts.NFTables != nil:
	case n.ipvs != nil && update:
		r.IPVS, err = n.ipvs.Update(table)
	case n.ipvs != nil:
		if err = ipvs.SetSysctls(n.opts.NetNSFd); err == nil {
			r.IPVS, err = n.ipvs.Apply(table)
		}
	default:
		r.IPVSLeftovers, err = ipvs.CleanupLeftovers(n.opts.NetNSFd)
	}
	if err != nil {
		return fmt.Errorf("ipvs: %w", err)
	}
	return nil
}

// Cleanup removes netspec's tables from the kernel and its files from the
// state dir; other tables and files stay.
func (n *Node) Cleanup() (tables, files []string, err error) {
	if n.nft != nil {
		if tables, err = n.nft.Cleanup(); err != nil {
			return nil, nil, err
		}
		removed := false
		if n.opts.NFTables == nil {
			removed, err = ipvs.CleanupLeftovers(n.opts.NetNSFd)
		}
		if err != nil {
			return tables, nil, fmt.Errorf("ipvs: %w", err)
		}
		if removed {
			tables = append(tables, "IPVS virtual servers and interface "+ipvs.LinkName)
		}
	}
	if files, err = n.dir.Cleanup(); err != nil {
		return tables, nil, err
	}
	n.last = nil
	return tables, files, nil
}

// staleFlows lists the UDP and TCP frontend→endpoint pairs the old plan
// forwarded and the new one no longer does: their conntrack entries would
// keep sending datagrams, and new connections from a reused source port,
// to an endpoint that left (for TCP, only the connections it never
// answered: conntrack.Flow.Unanswered). Only the
// Services that may have changed are looked at (udpChanged), so that a
// reload's cost follows its change.
func staleFlows(old, new *plan.Plan) []conntrack.Flow {
	if old == nil {
		return nil
	}
	olds, news := udpChanged(old, new)
	keep := map[conntrack.Flow]bool{}
	for _, f := range flowsOf(news, new.Node.IPs) {
		keep[f] = true
	}
	var stale []conntrack.Flow
	for _, f := range flowsOf(olds, old.Node.IPs) {
		if !keep[f] {
			stale = append(stale, f)
			keep[f] = true // once
		}
	}
	return stale
}

// udpChanged returns the Services of old and of new whose flows may
// differ. When both plans list the same Services in the same order for
// the same node addresses, a Service whose frontends and ports new
// shares with old (plan.Shared: the compiler hands an unchanged
// Service's slices on) forwards the same flows and is left out (a flow
// is one Service's: the compiler rejects two Services on one frontend);
// otherwise all are returned.
func udpChanged(old, new *plan.Plan) (olds, news []*plan.Service) {
	all := func() ([]*plan.Service, []*plan.Service) {
		olds, news = olds[:0], news[:0]
		for i := range old.Services {
			olds = append(olds, &old.Services[i])
		}
		for i := range new.Services {
			news = append(news, &new.Services[i])
		}
		return olds, news
	}
	if len(old.Services) != len(new.Services) || !slices.Equal(old.Node.IPs, new.Node.IPs) {
		return all()
	}
	for i := range old.Services {
		o, n := &old.Services[i], &new.Services[i]
		if o.Namespace != n.Namespace || o.Name != n.Name {
			return all()
		}
		if plan.Shared(o.Ports, n.Ports) && plan.Shared(o.ClusterIPs, n.ClusterIPs) &&
			plan.Shared(o.ExternalIPs, n.ExternalIPs) && plan.Shared(o.LoadBalancerIPs, n.LoadBalancerIPs) {
			continue
		}
		olds, news = append(olds, o), append(news, n)
	}
	return olds, news
}

// flowsOf lists the UDP and TCP frontend→endpoint pairs of services on a
// node of addresses nodeIPs.
func flowsOf(services []*plan.Service, nodeIPs []netip.Addr) []conntrack.Flow {
	var flows []conntrack.Flow
	for _, s := range services {
		for j := range s.Ports {
			port := &s.Ports[j]
			// Not SCTP: the conntrack library cannot tell its entries
			// apart by port (see conntrack.Flow).
			proto := uint8(conntrack.ProtoUDP)
			switch port.Protocol {
			case "UDP":
			case "TCP":
				proto = conntrack.ProtoTCP
			default:
				continue
			}
			add := func(addrs []netip.Addr, num uint16, idx []int) {
				for _, a := range addrs {
					for _, k := range idx {
						if k < 0 || k >= len(port.Endpoints) {
							continue
						}
						ep := &port.Endpoints[k]
						if a.Unmap().Is4() != ep.IP.Unmap().Is4() {
							continue // a node address of the other family
						}
						flows = append(flows, conntrack.Flow{
							Endpoint:   netip.AddrPortFrom(ep.IP, ep.Port),
							Frontend:   netip.AddrPortFrom(a, num),
							Protocol:   proto,
							Unanswered: proto == conntrack.ProtoTCP,
						})
					}
				}
			}
			add(s.ClusterIPs, port.Port, port.Cluster)
			// The external frontends' sets: External, and the
			// short-circuit's of pods and the node when it is its own.
			for _, idx := range [][]int{port.External, port.ShortCircuit} {
				add(s.ExternalIPs, port.Port, idx)
				add(s.LoadBalancerIPs, port.Port, idx)
				if port.NodePort != 0 {
					add(nodeIPs, port.NodePort, idx)
				}
			}
		}
	}
	return flows
}
