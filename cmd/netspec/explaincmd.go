package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/explain"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/render/ipvsmodel"
	"netspec.dev/netspec/treediff"
)

type explainFlags struct {
	loadFlags
	node     string
	to       string
	from     string
	json     bool
	live     bool
	stateDir string
	// dataplane and ipvsScheduler are the node's, for --live's check of
	// the kernel when no daemon says them.
	dataplane     string
	ipvsScheduler string
}

var explainCommand = &command{
	name:    "explain",
	args:    "TREE --node NODE (--to IP:PORT[/PROTO] | NAMESPACE/SERVICE) [--from IP] [--live [--state-dir DIR] [--dataplane nftables|ipvs]] [--json]",
	summary: "say what a node does with a packet to a Service, and why",
	help: `Explain walks one packet through the plan of node NODE and prints each
step, one a line: the frontend it matches (cluster IP, external IP,
LoadBalancer IP or node port), the Service and its port, the traffic
policies and topology, session affinity, every endpoint of the port
(taken, or left out and why), the selected pods that are no endpoint and
why, masquerading, and the verdict:

  dnat     forwarded to one of the endpoints listed
  reject   the client is refused at once (no usable endpoint, or a cluster
           IP reached on a port the Service does not serve)
  drop     the client gets no answer (traffic policy Local and no endpoint
           on this node, a source outside loadBalancerSourceRanges, an
           unallocated address of the service CIDR)
  accept   not a service address: the service rules leave the packet alone

For reject, drop and accept it names the cause to look for: a selector
that matches no pod (with the nearest pod and the labels that differ), a
named targetPort the pods do not have, EndpointSlices whose port names
are not the Service's, policy Local with no endpoint on this node, a
source outside loadBalancerSourceRanges, a port the Service does not
serve, an address of the service CIDR that no Service holds, a node port
on an address that is not a node-port address, an address of an IP
family the Service does not have, a health check node port, a
LoadBalancer IP with ipMode Proxy. A packet from one of the endpoints is
masqueraded only when DNATed to that endpoint (hairpin). Traffic of a pod
(--from an address of the Cluster's podCIDRs) or of the node (--from one
of its addresses) to the external frontends of a Service with
externalTrafficPolicy Local is subject to neither traffic policy, as in
kube-proxy (its short-circuit).

With --live, on the node itself, explain also asks the node's netspec
watch daemon (its socket DIR/netspec.sock, --state-dir DIR; root) for its
readiness probes: the plan is then the daemon's, with the endpoints that
fail their probes on this node left out, each named "out for its
readiness probe" with since when and the last error (also as the cause
of a dnat that they would otherwise have shared), and the Services that
fail open said so.

--live also checks, for each frontend explained, that the node's kernel
holds what the plan says (as 'netspec plan' compares them, changing
nothing): the step after the verdict says "kernel: holds what the plan
says for this frontend", or lists what differs (its chains, its map
elements, its endpoints; with IPVS its virtual server and real servers)
with the cause to look for: netspec watch not running, or not applying
this tree. The data plane is the daemon's, or --dataplane's when no
daemon answers (explain then says so and keeps the tree's readiness).
Reading the kernel needs root (or CAP_NET_ADMIN); without it the step
says so and the rest is explained.

With NAMESPACE/SERVICE instead of --to, it explains a packet to each
frontend of that Service: each port on each cluster IP, external IP and
LoadBalancer IP, and each node port on each of the node's node-port
addresses.

The verdict is the one the installed rules give (the plan's own trace,
which the nftables and IPVS renderers implement); without --live,
explain reads only the tree and needs no root; it never changes anything. The packet comes from --from
(default: a client outside the cluster, 198.51.100.10 or 2001:db8::10);
a --from that is one of the node's own IPs is a process on the node.
With NAMESPACE/SERVICE, frontends of the other IP family than --from
get the default source of their family.

Exit status: 0 explained, whatever the verdict; 1 any error (an invalid
tree, an unknown node or Service, a usage error such as a bad --to).

Examples:
  netspec explain examples/basic --node node-1 --to 10.96.0.50:6379
  netspec explain examples/basic --node node-2 --to 192.168.10.12:30090 --from 10.244.1.10
  netspec explain examples/kitchen-sink --node node-1 shop/reports
  netspec explain examples/basic --node node-1 shop/web --json`,
	nargs: -1,
	opts:  func() options { return &explainFlags{} },
}

func (f *explainFlags) register(fs *flag.FlagSet) {
	f.loadFlags.register(fs)
	fs.StringVar(&f.node, "node", "", "the `NODE` whose plan the packet goes through (a Node object's name)")
	fs.StringVar(&f.to, "to", "", "the packet's destination `IP:PORT[/PROTO]` (PROTO tcp, udp or sctp; default tcp)")
	fs.StringVar(&f.from, "from", "", "the packet's source `IP` (default a client outside the cluster)")
	fs.BoolVar(&f.json, "json", false, "print the explanations as JSON, for tools")
	fs.BoolVar(&f.live, "live", false, "on the node: ask its daemon for the endpoints out for failing readiness probes, and check that the kernel holds the plan")
	fs.StringVar(&f.stateDir, "state-dir", applier.DefaultStateDir, "with --live, the daemon's state `DIR` (its socket is DIR/netspec.sock)")
	fs.StringVar(&f.dataplane, "dataplane", "nftables", "with --live and no daemon answering, the node's data plane whose kernel state is checked: `nftables|ipvs`")
	fs.StringVar(&f.ipvsScheduler, "ipvs-scheduler", "", "with --live and the ipvs data plane, the node's default IPVS `SCHEDULER` (as watch --ipvs-scheduler; default: the daemon's, else rr)")
}

func (f *explainFlags) run(e *env, args []string) int {
	if len(args) == 0 || len(args) > 2 {
		return e.usageError("explain", "want TREE and, without --to, NAMESPACE/SERVICE; got %d argument(s)", len(args))
	}
	if f.node == "" {
		return e.usageError("explain", "--node is required")
	}
	if (f.to == "") == (len(args) == 1) {
		return e.usageError("explain", "give either --to IP:PORT[/PROTO] or NAMESPACE/SERVICE")
	}
	var pk plan.Packet
	if f.to != "" {
		var err error
		if pk, err = parseTo(f.to); err != nil {
			return e.usageError("explain", "--to: %v", err)
		}
	} else if !strings.Contains(args[1], "/") {
		return e.usageError("explain", "service %q: want NAMESPACE/NAME", args[1])
	}
	var from netip.Addr
	if f.from != "" {
		a, err := netip.ParseAddr(f.from)
		if err != nil {
			return e.usageError("explain", "--from: %q is not an IP address", f.from)
		}
		from = a.Unmap()
	}
	if from.IsValid() && f.to != "" && from.Is4() != pk.Dst.Is4() {
		return e.usageError("explain", "--from %s and --to %s are of different IP families", from, pk.Dst)
	}
	if f.dataplane != "nftables" && f.dataplane != "ipvs" {
		return e.usageError("explain", "--dataplane must be nftables or ipvs, not %q", f.dataplane)
	}
	if f.ipvsScheduler != "" && !slices.Contains(ipvsmodel.Schedulers, f.ipvsScheduler) {
		return e.usageError("explain", "--ipvs-scheduler must be one of %s, not %q", strings.Join(ipvsmodel.Schedulers, ", "), f.ipvsScheduler)
	}
	l, err := loadTree(e, args[0], &f.loadFlags)
	if err != nil {
		return e.fail("explain", "%v", err)
	}
	if n := l.Diags.Errors(); n > 0 {
		printDiags(e, l.Diags)
		fmt.Fprintf(e.stderr, "%s, %s; the tree must be valid to explain it\n", treediff.Plural(l.Diags.Files(), "file"), treediff.Plural(n, "error"))
		return exitError
	}
	var live explain.Options
	var view compiler.Options
	dataplane := f.dataplane
	if f.live {
		st, note := askDaemon(filepath.Join(f.stateDir, daemon.SocketName))
		if st != nil {
			if live, view, err = daemon.ExplainView(st); err != nil {
				return e.fail("explain", "--live: %v", err)
			}
			// The daemon's data plane, and its scheduler unless the
			// command line says another.
			dataplane = cmp.Or(st.Dataplane, dataplane)
			f.ipvsScheduler = cmp.Or(f.ipvsScheduler, st.IPVSScheduler)
		}
		if note != "" {
			fmt.Fprintf(e.stderr, "netspec explain: --live: %s\n", note)
		}
	}
	f.ipvsScheduler = cmp.Or(f.ipvsScheduler, render.DefaultIPVSScheduler)
	p := compileLoaded(e, "explain", l, f.node, view)
	if p == nil {
		return exitError
	}
	var xs []*explain.Explanation
	if f.to != "" {
		pk.Src = from
		if !from.IsValid() {
			pk.Src = explain.DefaultSource(pk.Dst)
		}
		pk.FromLocal = slices.Contains(p.Node.IPs, pk.Src)
		if f.live {
			live.Kernel = applier.CheckKernel(f.kernelOptions(e, dataplane), p, []plan.Packet{pk})
		}
		xs = append(xs, explain.PacketWith(p, l.tree.Objects, pk, live))
	} else {
		s := planService(p, args[1])
		if f.live && s != nil {
			if pks := explain.Frontends(p, s); len(pks) > 0 {
				live.Kernel = applier.CheckKernel(f.kernelOptions(e, dataplane), p, pks)
			}
		}
		xs, err = explain.ServiceWith(p, l.tree.Objects, args[1], from, live)
		if err != nil {
			return e.fail("explain", "%v", err)
		}
		if len(xs) == 0 {
			// Headless and ExternalName Services: an empty list for --json.
			note := noFrontends(p, s)
			if f.json {
				fmt.Fprintf(e.stderr, "netspec explain: %s\n", note)
				fmt.Fprintln(e.stdout, "[]")
				return exitOK
			}
			fmt.Fprintln(e.stdout, note)
			return exitOK
		}
	}
	if f.json {
		return e.printJSON("explain", xs)
	}
	for i, x := range xs {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		local := ""
		if x.FromLocal {
			local = " (a process on the node)"
		}
		fmt.Fprintf(e.stdout, "%s/%s from %s%s on node %s:\n", x.To, x.Protocol, x.From, local, x.Node)
		for _, s := range x.Steps {
			fmt.Fprintf(e.stdout, "  %s\n", s)
		}
	}
	return exitOK
}

// kernelOptions are the applier.Options of the node's data plane, whose
// kernel --live checks (on e's nftables).
func (f *explainFlags) kernelOptions(e *env, dataplane string) applier.Options {
	return applier.Options{StateDir: f.stateDir, NoDataplane: dataplane == daemon.DataplaneNone, IPVS: dataplane == daemon.DataplaneIPVS,
		IPVSScheduler: f.ipvsScheduler, NFTables: e.nftables}
}

// planService is the Service key (namespace/name) of p; nil for none.
func planService(p *plan.Plan, key string) *plan.Service {
	for i := range p.Services {
		if p.Services[i].Key() == key {
			return &p.Services[i]
		}
	}
	return nil
}

// noFrontends says why Service s has no frontends on p's node: it is
// headless, or of type ExternalName.
func noFrontends(p *plan.Plan, s *plan.Service) string {
	key := s.Key()
	switch {
	case s.Type == "ExternalName" && !s.HasCNAME():
		return fmt.Sprintf("Service %s has no frontends on node %s: it is of type ExternalName, and its externalName %s reads as an IPv4 address, which Kubernetes takes as a DNS name of digits: as CoreDNS, netspec gives the Service's name no record; no rule of the node is involved", key, p.Node.Name, s.ExternalName)
	case s.Type == "ExternalName":
		return fmt.Sprintf("Service %s has no frontends on node %s: it is of type ExternalName, so its DNS name is a CNAME to %s and clients connect to that name; no rule of the node is involved", key, p.Node.Name, s.ExternalName)
	}
	return fmt.Sprintf("Service %s has no frontends on node %s: it is headless, so its DNS name resolves to the endpoints' own addresses and clients connect to them directly", key, p.Node.Name)
}

// parseTo parses IP:PORT[/PROTO] (an IPv6 address in brackets).
func parseTo(s string) (plan.Packet, error) {
	proto := "TCP"
	if i := strings.LastIndex(s, "/"); i >= 0 {
		proto = strings.ToUpper(s[i+1:])
		s = s[:i]
		if proto != "TCP" && proto != "UDP" && proto != "SCTP" {
			return plan.Packet{}, fmt.Errorf("protocol %q: want tcp, udp or sctp", strings.ToLower(proto))
		}
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return plan.Packet{}, fmt.Errorf("%q: want IP:PORT[/PROTO], for example 10.96.0.10:80/tcp or [fd00::10]:53/udp", s)
	}
	if ap.Port() == 0 {
		return plan.Packet{}, fmt.Errorf("%q: port 0", s)
	}
	return plan.Packet{Dst: ap.Addr().Unmap(), Port: ap.Port(), Protocol: proto}, nil
}

// askDaemon asks the daemon on sock for its status: its readiness probes
// (daemon.ExplainView), data plane and IPVS scheduler. A daemon that does
// not answer (nil), or does not probe, is a note: readiness is then the
// tree's (the kernel is still checked).
func askDaemon(sock string) (*daemon.Status, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := daemon.QueryStatus(ctx, sock)
	switch {
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Sprintf("%s: permission denied: the socket is for the daemon's user (root) only; readiness is the tree's", sock)
	case err != nil:
		return nil, fmt.Sprintf("%v; readiness is the tree's", err)
	case st.Probes == nil:
		return st, "the daemon runs with --probes=false: readiness is the tree's"
	}
	return st, ""
}
