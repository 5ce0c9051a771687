package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/dnslink"
	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/render"
)

// watchFlags are watch's flags: the daemon's settings, which
// daemon.Settings.Options checks, and the log's.
type watchFlags struct {
	daemon.Settings
	logFormat string
	logLevel  string
}

var watchCommand = &command{
	name:    "watch",
	args:    "TREE --node NODE [--dataplane nftables|ipvs|none] [--ipvs-scheduler rr] [--state-dir DIR] [--dns-link NAME] [--dns-listen ADDR] [--dns-upstream ADDR,...|resolv.conf] [--metrics-listen ADDR] [--resync 60s] [--debounce 200ms] [--removal-grace 2s] [--probes=false] [--probe-concurrency 64] [--gossip-listen IP:PORT --join IP:PORT,... --gossip-key-file FILE] [--log-format text|json]",
	summary: "keep this node in step with TREE as it changes: rules, files, DNS and metrics",
	help: `Watch is apply as a daemon. It applies the plan of NODE once, then watches
every directory of TREE and applies again whenever a file changes:

  - an edit, an editor's atomic save (write a temp file, rename it), a new
    or removed directory, git checkout, and a symlink swapped to a new
    checkout (git-sync's TREE -> rev-abc, a ConfigMap's ..data) all reload;
    a change is applied once the tree has been quiet for 10 ms, and a
    burst of changes (a long checkout) at most once per --debounce;
  - removals wait: an object (Service, Pod, Endpoints, EndpointSlice, by
    kind, namespace and name, whatever its file) that leaves the tree
    stays applied for --removal-grace (2 s), and stays for good when it
    comes back within it: an editor that renames the file away before it
    writes the new one, or a checkout that deletes a file before it
    writes the one a Service moved to, leaves the Service in place;
    additions and edits are applied at once;
  - in a git work tree, no reload runs while git holds .git/index.lock
    (a checkout, merge or pull under way): the tree is read once the
    lock goes, so that half a pull is never applied; a lock older than a
    minute is logged as stale (netspec_git_lock_stale, 'netspec status')
    and no longer waited for;
  - a reload validates only the files whose content changed, compiles the
    plan and updates the kernel by difference with what watch installed;
  - an invalid tree changes nothing: the rules, the state dir and the DNS
    answers of the last good tree stay (or, before the first good tree,
    whatever they hold), the errors are logged (the first one with
    file:line:col) and netspec_tree_valid drops to 0; a tree valid again
    is logged as such;
  - each warning of the tree (a selector that matches no pod) is logged
    once, when it appears, not on every reload;
  - every --resync, the kernel's tables are read back and drift (a rule
    deleted by hand) is repaired, as apply does;
  - SIGHUP reloads now: the whole tree, and the kernel read back, as the
    first sync and the resync (logged kind=full; drift it repairs is
    counted as the resync's); both honour the removal grace of objects
    that left the tree. SIGTERM and SIGINT stop, leaving rules and files
    in place (netspec cleanup removes them; removals still waiting are
    applied at the next start, which reads the tree as it is).

With --dataplane none the kernel is left alone (but for the link of
--dns-link): only the state dir's zone, env and resolv files (and DNS,
with --dns-listen) follow the tree.

--dns-listen serves the plan's zones (cluster domain and reverse zones)
authoritatively over UDP and TCP, swapped atomically on each good reload;
other names are REFUSED (a resolver then asks its next server), unless
--dns-upstream names upstream resolvers, as CoreDNS's 'forward .
/etc/resolv.conf': then a query outside the zones is forwarded to them
(the first that answers, 2 s each; UDP, TCP when truncated; the client's
EDNS0 and DO bit kept; the upstream's answer, RCODE and RA passed back),
an ExternalName Service's CNAME comes with its target's records from the
upstream, and answers carry RA. At most 256 forwarded queries are in
flight (then SERVFAIL); nothing is cached. --dns-upstream takes IP or
IP:PORT, comma-separated, or resolv.conf for the nameservers of the
host's /etc/resolv.conf read at start (127.0.0.53 on systemd-resolved
hosts); the address of --dns-listen itself is skipped with a warning (a
resolv.conf that names netspec first would loop), and watch does not start
if no upstream remains. With it, the pods' resolv.conf (resolv/NS.conf,
netspec alone as nameserver) resolves names outside the cluster. Give it an
address of its own, not 127.0.0.53 (systemd-resolved's) nor 0.0.0.0:53:
--dns-link NAME creates a dummy link NAME holding the address of
--dns-listen (169.254.20.10:53, link-local as NodeLocal DNSCache's, when
--dns-listen is not given), or does nothing when it is there, and leaves
it in place on exit ('ip link del NAME' removes it). deploy/README.md
says how to send cluster.local queries to it (systemd-resolved, or
/etc/resolv.conf).

Every LoadBalancer Service with externalTrafficPolicy Local has a health
check node port (spec.healthCheckNodePort, or allocated and locked like a
node port): watch answers HTTP on it at the node's addresses, 200 with the
count of this node's ready endpoints of the Service when it has some, 503
when it has none, so that the load balancer sends traffic only to nodes
with endpoints (as kube-proxy does; not with --dataplane none).

Readiness probes: watch runs the readinessProbe of each endpoint's Pod
(httpGet, tcpSocket, grpc; exec cannot run from the node and is not
probed): the Pod the selector picked, or the Pod of the tree that the
targetRef of an Endpoints address or EndpointSlice endpoint names. For
endpoints without a Pod it runs the Service annotation
netspec.dev/readiness-probe. Probes go from this node to the endpoint's
address, with the kubelet's timing and thresholds. Each distinct address
and probe is probed once per period, at most --probe-concurrency at once.
An endpoint failing its probe is out of its Services on this node (rules,
IPVS and headless DNS), as if the tree said it was not ready, until it
passes again; when every endpoint a Service port uses here fails, they
are all kept (fail open) and the Service is logged and counted.
--probes=false leaves readiness to the tree.

A fleet: with --gossip-listen IP:PORT the node's agents share readiness
by gossip (SWIM, hashicorp/memberlist) instead of every node probing
every endpoint it forwards to. The member's name is --node; only nodes
named by a Node object of the tree may join. Each node probes the
endpoints whose Pod runs on it, and the endpoints without an agent on
their node (a node that never joined, an endpoint without a Pod) are
probed by two alive members picked by rendezvous hashing (out when both
say so). Every node takes out what the fleet says is out, merged with its
own probes, with fail open as above: an endpoint whose probe fails where
it runs is out everywhere within a second or two, and the endpoints of a
node whose agent dies (no answer to memberlist's probes, then the
suspicion timeout: about 10 s) are out on every other node until it is
back. SIGTERM leaves the fleet: a node that leaves (a restart, an
upgrade) keeps its endpoints in everywhere. A node that sees more than
half of the fleet's nodes dead fails static: it keeps their endpoints,
being more likely cut off itself. --join IP:PORT,... are members to join
through (any one that answers will do; tried again until one does, and
after a partition heals). The gossip is encrypted with the keys of
--gossip-key-file (one base64 key of 16, 24 or 32 bytes a line, the first
encrypts, all decrypt: 'head -c 32 /dev/urandom | base64'); without a key
file gossip is refused unless --gossip-insecure. One port, UDP and TCP,
must be open between every two nodes. 'netspec status --fleet' shows the
members; docs/fleet.md is the design, docs/operations.md the rollout and
key rotation.

--metrics-listen serves Prometheus metrics on /metrics
(netspec_sync_duration_seconds{kind}, netspec_sync_last_timestamp_seconds,
netspec_sync_failures_total, netspec_network_programming_duration_seconds,
netspec_tree_valid, netspec_tree_errors, netspec_drift_repairs_total,
netspec_dns_requests_total{rcode}, netspec_health_check_listeners,
netspec_health_check_listen_failures, netspec_applied_revision_info{revision}:
the tree's git commit applied, or sha256:HASH of its content,
netspec_probe_endpoints{state}, netspec_probe_service_failing_endpoints{namespace,service},
netspec_probe_fail_open_services, netspec_probe_duration_seconds{action,result},
netspec_removal_pending_objects, netspec_removal_pending_since_timestamp_seconds,
netspec_removal_due_timestamp_seconds, netspec_git_lock_held,
netspec_git_lock_since_timestamp_seconds, netspec_git_lock_stale; with
gossip netspec_fleet_members{state}, netspec_fleet_nodes_per_revision{revision},
netspec_fleet_fail_static, netspec_fleet_checks_out{reason},
netspec_fleet_broadcast_queue and the counters of docs/fleet.md), /healthz (200 while the last
successful sync is younger than twice --resync) and /readyz (200 after the
first successful sync).

Its state is served on the unix socket DIR/netspec.sock (--state-dir DIR;
mode 0600, removed on exit, a stale one replaced): 'netspec status' asks it.

Needs root (or CAP_NET_ADMIN, and CAP_NET_BIND_SERVICE for port 53).
deploy/netspec.service is a systemd unit for it.

Exit status: 0 stopped by SIGTERM or SIGINT; 1 any error: it could not
start, a server failed, or a usage error (an unknown flag, no --node).

Examples:
  netspec watch /srv/cluster --node $(hostname)
  netspec watch /srv/git/current --node node-1 --dns-link netspec0 --dns-listen 169.254.20.10:53 --metrics-listen 127.0.0.1:9253
  netspec watch /srv/cluster --node node-1 --dns-link netspec0 --dns-upstream resolv.conf
  netspec watch . --node node-1 --dataplane none --state-dir /tmp/netspec --log-format json
  netspec watch /srv/cluster --node node-3 --gossip-listen 192.0.2.3:7946 --join 192.0.2.1:7946,192.0.2.2:7946 --gossip-key-file /etc/netspec/gossip.key
  kill -HUP $(pidof netspec)   # reload now`,
	nargs: 1, want: "one TREE",
	opts: func() options { return &watchFlags{} },
}

func (f *watchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.Node, "node", "", "the `NODE` this machine is (a Node object's name)")
	fs.StringVar(&f.Dataplane, "dataplane", daemon.DataplaneNFTables, "the data plane (`nftables|ipvs|none`; ipvs: IPVS virtual servers, see 'netspec apply --help'; none: write the state dir, and serve DNS, only)")
	fs.StringVar(&f.IPVSScheduler, "ipvs-scheduler", render.DefaultIPVSScheduler, "with --dataplane ipvs, the `SCHEDULER` of Services without the annotation netspec.dev/ipvs-scheduler: rr, wrr, lc, wlc, sh, dh, sed, nq or mh")
	fs.StringVar(&f.StateDir, "state-dir", applier.DefaultStateDir, "`DIR` for the node's zone files, env files and record of the last applied plan (plan.json, plan.log)")
	fs.StringVar(&f.DNSListen, "dns-listen", "", "serve the plan's DNS records on `ADDR` (host:port, UDP and TCP); off when empty")
	fs.StringVar(&f.DNSLink, "dns-link", "", "create (if missing) the dummy link `NAME` holding --dns-listen's address, 169.254.20.10:53 by default; off when empty")
	fs.StringVar(&f.DNSUpstream, "dns-upstream", "", "forward DNS queries outside the zones, and ExternalName targets, to `ADDRS` (IP or IP:PORT, comma-separated; resolv.conf: the nameservers of /etc/resolv.conf); REFUSED when empty")
	fs.StringVar(&f.DNSTransferTo, "dns-transfer-to", "", "allow zone transfers (AXFR) to the clients in `CIDRS` (comma-separated); none when empty")
	fs.StringVar(&f.MetricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz over HTTP on `ADDR`; off when empty")
	fs.DurationVar(&f.Resync, "resync", daemon.DefaultResync, "read the kernel back and repair drift every `INTERVAL`; 0 turns it off")
	fs.DurationVar(&f.Debounce, "debounce", daemon.DefaultDebounce, "reload at most once per `DURATION` while files keep changing (a lone change is applied after 10 ms of quiet)")
	fs.DurationVar(&f.RemovalGrace, "removal-grace", daemon.DefaultRemovalGrace, "keep an object that left the tree applied for `DURATION`, unless it comes back (a save or checkout in two steps); additions and edits are applied at once; 0 applies removals at once")
	fs.StringVar(&f.logFormat, "log-format", "text", "the log's format (`text|json`; log/slog, on stderr)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fs.BoolVar(&f.Probes, "probes", true, "run the endpoints' readiness probes from this node and leave failing endpoints out (false: readiness is the tree's)")
	fs.IntVar(&f.ProbeConcurrency, "probe-concurrency", probe.DefaultMaxConcurrent, "at most `N` readiness probes in flight at once")
	fs.StringVar(&f.GossipListen, "gossip-listen", "", "share readiness with the fleet by gossip on `IP:PORT` (UDP and TCP; memberlist's usual port is 7946); off when empty")
	fs.StringVar(&f.Join, "join", "", "join the fleet through the members at `IP:PORT,...` (any one answering will do; retried)")
	fs.StringVar(&f.GossipKeyFile, "gossip-key-file", "", "encrypt the gossip with the keys of `FILE` (base64, one a line; the first encrypts, all decrypt)")
	fs.BoolVar(&f.GossipInsecure, "gossip-insecure", false, "allow gossip without a key, in the clear (a test bed, a trusted network)")
	(*byteSize)(&f.MaxFileSize).register(fs)
}

// watchGCPercent is the garbage collector's target for watch, unless the
// environment sets GOGC. Between full syncs the watcher's live heap (the
// tree, the compiler's memos, render's pieces) barely changes while each
// reload leaves a few megabytes of garbage; Go's default (100) lets the
// heap grow to twice the live data before collecting, which at 10,000
// Services doubled the daemon's RSS. 25 keeps it within a quarter of the
// live data for a few more collections (docs/performance.md, "Node agent
// cost").
const watchGCPercent = 25

func (f *watchFlags) run(e *env, args []string) int {
	if tuneGC(watchGCPercent, os.LookupEnv) {
		defer debug.SetGCPercent(100)
	}
	if f.Node == "" {
		return e.usageError("watch", "--node is required")
	}
	f.Tree = args[0]
	o, err := f.Options()
	if err != nil {
		return e.usageError("watch", "%v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return e.usageError("watch", "--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "text":
		o.Logger = slog.New(slog.NewTextHandler(e.stderr, hopts))
	case "json":
		o.Logger = slog.New(slog.NewJSONHandler(e.stderr, hopts))
	default:
		return e.usageError("watch", "--log-format %q: want text or json", f.logFormat)
	}
	if f.DNSLink != "" {
		addr, err := f.LinkAddr()
		if err != nil {
			return e.usageError("watch", "%v", err)
		}
		res, err := dnslink.Ensure(f.DNSLink, addr)
		if err != nil {
			return e.fail("watch", "%v", err)
		}
		o.Logger.Info("dns link ready", "link", f.DNSLink, "addr", addr, "created", res.CreatedLink, "addr_added", res.AddedAddr)
	}
	w, err := daemon.New(o)
	if err != nil {
		return e.fail("watch", "%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				w.Reload()
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := w.Run(ctx); err != nil {
		o.Logger.Error("stopped", "err", err)
		return exitError
	}
	return exitOK
}
