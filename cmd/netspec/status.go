package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/daemon/status"
	"netspec.dev/netspec/treediff"
)

type statusFlags struct {
	stateDir string
	socket   string
	json     bool
	fleet    bool
	wait     time.Duration
}

var statusCommand = &command{
	name:    "status",
	args:    "[--state-dir DIR] [--socket PATH] [--json] [--wait DURATION] [--fleet]",
	summary: "show what the daemon on this node applied, and how its syncs go",
	help: `Status asks the netspec watch daemon of this node, over its unix socket
DIR/netspec.sock (mode 0600: run it as the daemon's user, root), and prints:

  - the revision of the tree applied (its git commit; COMMIT+sha256:HASH12
    when the tree's files differ from the commit's; or sha256: and a hash
    of its spec files and netspec.lock when the tree is not a git checkout)
    and since when;
  - the last sync: why (start, change, reload, resync, probe, removal), its kind
    (full reads the kernel back, partial updates by difference), how long
    it took (the whole sync, as the log's took; in parentheses the kernel
    and state dir part, as the log's apply and the metric
    netspec_sync_duration_seconds) and its result (applied, unchanged, invalid, failed, with the error);
  - whether the tree read last is valid, with its first error;
  - the drift repairs of resyncs and SIGHUP (count, last);
  - the removals waiting for --removal-grace, when some do: how many
    objects left the tree and stay applied, since when, and when the next
    is due to go;
  - git's index lock on the tree's work tree, when it exists: since when,
    and whether reloads wait for it or it is stale (older than a minute,
    no longer waited for);
  - the health check node ports: port, service, local endpoints, and the
    addresses listening and failing to bind;
  - the readiness probes: how many checks run and fail, how many endpoints
    are not probed (their Pod's readinessProbe is exec), the endpoints out
    of their Services for a failing probe (service, endpoint, probe, since
    when, the error of the latest probe and when it ran: read from the
    prober when asked, not at the last sync), and the Services that fail
    open (every endpoint they use here fails: all are kept). An httpGet
    probe is shown as the URL asked (the endpoint's address unless the
    probe names a host). Probe flips apply while the tree is invalid too,
    to the last good plan.

Without a daemon (no socket, or a stale one nothing listens on) it says so
and shows what this node holds: netspec's nftables tables (chains, sets and
elements), its IPVS virtual servers and real servers, and the state dir's
record of the last applied plan (or that the state dir does not exist).
Reading the kernel needs root (or CAP_NET_ADMIN); without, status says so
and shows the record only. The rules a daemon applied stay when it stops,
with the endpoints it held out for failing readiness probes: status lists
those (from the daemon's record, probes.json in the state dir, kept to the
endpoints the applied plan still has not ready) and how to put the tree's
readiness back (netspec apply, or start netspec watch); without that
record, the applied plan's probed endpoints that are not ready, for a
probe or for the tree (the plan does not tell which).

--json prints the same as one JSON object: "running" (bool), "daemon" (the
daemon's status, when running: node, tree, dataplane, ipvsScheduler (with
the ipvs data plane), stateDir, pid,
started, revision{id, source, dirty, since}, lastSync{reason, kind, ended,
durationSeconds, applySeconds, result, error}, treeState{valid, errors, firstError},
driftRepairs{count, last}, healthChecks[{service, port, localEndpoints,
listening, failing}], probes{checks, failing, unprobed, out[{service, endpoint,
probe, since, lastError, lastProbe, failOpen}], failOpen[]}: null with --probes=false; until the first sync ends, while
lastSync is null, healthChecks and probes tell nothing), fleet (with watch --gossip-listen: as --fleet --json prints it,
without node), and without a daemon "reason", "kernel"{read, error,
nftables[{family, present, chains, sets, elements}], ipvs{available,
interface, virtualServers, realServers}} and "record"{noDir, present, node,
services, endpoints, recorded, probes{recorded, written, out[], failOpen[]}}.
Times are RFC 3339.

--fleet shows the fleet the daemon gossips with (watch --gossip-listen)
instead: each member (this node first) with its state (alive; suspect:
memberlist's failure detector suspects it, it is dead unless it refutes;
dead; left), address, the revision it applied last and since when it is
in its state as this node saw; how many nodes alive or suspect run each
revision (a fleet split across revisions is a rollout under way, or a node
stuck); the endpoints out on this node for the fleet (a probe failing on
the node the endpoint runs on, or on both probers of an endpoint without
an agent, or the node dead), with the nodes that say so; and whether this
node fails static (more than half of the fleet's nodes dead or suspect: it
keeps the dead nodes' endpoints). With --json: {"node", "members"[{name,
state, address, revision, checks, failing, since}], "revisions"[{revision,
nodes}], "out"[{service, endpoint, probe, reason, by[]}], "failStatic",
"dead", "suspect", "ever"}. Without a daemon, or a daemon without gossip, it fails (exit 1).

--wait waits up to DURATION for a daemon to answer and finish its first
sync (after starting one), then reports.

Exit status: 0 reported (with or without a daemon); 1 any error: the
daemon's socket cannot be used (permission), the state dir cannot be read,
a usage error.

Examples:
  netspec status
  netspec status --json | jq -r .daemon.revision.id
  ip netns exec blue netspec status --state-dir /var/lib/netspec-blue
  netspec status --fleet --json | jq -r '.members[] | select(.state != "alive") | .name'`,
	nargs: -1,
	opts:  func() options { return &statusFlags{} },
}

func (f *statusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", applier.DefaultStateDir, "the daemon's state `DIR` (its socket is DIR/netspec.sock)")
	fs.StringVar(&f.socket, "socket", "", "ask the daemon on `PATH` instead of DIR/netspec.sock")
	fs.BoolVar(&f.json, "json", false, "print the status as JSON")
	fs.BoolVar(&f.fleet, "fleet", false, "show the fleet the daemon gossips with: members, revisions, endpoints out, fail static")
	fs.DurationVar(&f.wait, "wait", 0, "wait up to `DURATION` for a daemon to answer after its first sync")
}

func (f *statusFlags) run(e *env, args []string) int {
	if len(args) > 0 {
		return e.usageError("status", "takes no arguments, got %q", args)
	}
	if f.wait < 0 {
		return e.fail("status", "--wait %s: want a positive duration", f.wait)
	}
	sock := cmp.Or(f.socket, filepath.Join(f.stateDir, daemon.SocketName))
	if f.fleet {
		st, err := status.Ask(sock, f.wait)
		return runStatusFleet(e, f, sock, st, err)
	}
	out, err := status.Gather(status.Options{Socket: sock, StateDir: f.stateDir, Wait: f.wait})
	if err != nil {
		return e.fail("status", "%v", err)
	}
	if f.json {
		return e.printJSON("status", out)
	}
	if out.Running {
		writeDaemonStatus(e.stdout, sock, out.Daemon, time.Now())
	} else {
		fmt.Fprintf(e.stdout, "daemon: not running: %s\n", out.Reason)
		writeKernelView(e.stdout, out.Kernel)
		writeRecordView(e.stdout, f.stateDir, out.Record, time.Now())
	}
	return exitOK
}

// ago formats a time as RFC 3339 with its age.
func ago(t, now time.Time) string {
	age, unit := max(now.Sub(t), 0), time.Second
	if age < time.Minute {
		unit = 100 * time.Millisecond
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age.Round(unit))
}

// writeDaemonStatus prints a running daemon's status.
func writeDaemonStatus(w io.Writer, sock string, st *daemon.Status, now time.Time) {
	fmt.Fprintf(w, "daemon: running, pid %d, started %s, socket %s\n", st.PID, ago(st.Started, now), sock)
	dp := st.Dataplane
	if st.IPVSScheduler != "" {
		dp += " (default scheduler " + st.IPVSScheduler + ")"
	}
	fmt.Fprintf(w, "node: %s; tree: %s; dataplane: %s; state dir: %s\n", st.Node, st.Tree, dp, st.StateDir)
	if r := st.Revision; r != nil {
		what := "git commit"
		switch {
		case r.Source == daemon.RevisionContent:
			what = "content hash: not a git checkout"
		case r.Dirty:
			what = "git commit with changes not committed: +sha256: starts the hash of the tree's content"
		}
		fmt.Fprintf(w, "revision: %s (%s), applied since %s\n", r.ID, what, ago(r.Since, now))
	} else {
		fmt.Fprintln(w, "revision: none applied since the daemon started")
	}
	if s := st.LastSync; s != nil {
		kind := ""
		if s.Kind != "" {
			kind = s.Kind + ", "
		}
		took := time.Duration(s.DurationSeconds * float64(time.Second)).Round(time.Millisecond)
		apply := ""
		if s.ApplySeconds > 0 {
			apply = fmt.Sprintf(" (kernel and state dir %s)", time.Duration(s.ApplySeconds*float64(time.Second)).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "last sync: %s, %s%s in %s%s, ended %s\n", s.Reason, kind, s.Result, took, apply, ago(s.Ended, now))
		if s.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", s.Error)
		}
	} else {
		fmt.Fprintln(w, "last sync: none yet (the first one is under way)")
	}
	switch t := st.TreeState; {
	case st.LastSync == nil:
		fmt.Fprintln(w, "tree: not read yet")
	case t.Valid:
		fmt.Fprintln(w, "tree: valid")
	case t.Errors > 0:
		fmt.Fprintf(w, "tree: invalid, %s; first: %s\n", treediff.Plural(t.Errors, "error"), t.FirstError)
	default:
		fmt.Fprintf(w, "tree: cannot be read or compiled: %s\n", t.FirstError)
	}
	if d := st.DriftRepairs; d.Count > 0 && d.Last != nil {
		fmt.Fprintf(w, "drift repairs: %d, last %s\n", d.Count, ago(*d.Last, now))
	} else {
		fmt.Fprintln(w, "drift repairs: none")
	}
	if p := st.PendingRemoval; p != nil {
		due := "in " + p.Due.Sub(now).Round(100*time.Millisecond).String()
		if !p.Due.After(now) {
			due = "now (or once the tree is valid again)"
		}
		fmt.Fprintf(w, "removals pending: %s left the tree and stay applied, since %s; the next goes %s\n",
			treediff.Plural(p.Objects, "object"), ago(p.Since, now), due)
	}
	if l := st.GitLock; l != nil {
		what := "reloads wait for it (a checkout, merge or pull under way)"
		if l.Stale {
			what = "STALE (older than a minute; left by a git that died?), no longer waited for: remove it once no git runs"
		}
		fmt.Fprintf(w, "git lock: %s since %s: %s\n", l.Path, ago(l.Since, now), what)
	}
	if st.LastSync == nil {
		// Neither is set up before the first sync: nil says nothing of
		// the daemon's flags yet.
		fmt.Fprintln(w, "health check node ports: not known yet (the first sync is under way)")
		fmt.Fprintln(w, "readiness probes: not known yet (the first sync is under way)")
		return
	}
	switch {
	case st.HealthChecks == nil:
		fmt.Fprintf(w, "health check node ports: not served (dataplane %s)\n", st.Dataplane)
	case len(st.HealthChecks) == 0:
		fmt.Fprintln(w, "health check node ports: none")
	default:
		fmt.Fprintln(w, "health check node ports:")
		for _, h := range st.HealthChecks {
			line := fmt.Sprintf("  %d %s: %s", h.Port, h.Service, treediff.Plural(h.LocalEndpoints, "local endpoint"))
			if len(h.Listening) > 0 {
				line += "; listening on " + strings.Join(h.Listening, ", ")
			}
			if len(h.Failing) > 0 {
				line += "; FAILING to listen on " + strings.Join(h.Failing, ", ")
			}
			if len(h.Listening)+len(h.Failing) == 0 {
				line += "; no node address to listen on"
			}
			fmt.Fprintln(w, line)
		}
	}
	writeProbeStatus(w, st.Probes, now)
	if fs := st.Fleet; fs != nil {
		static := "no"
		if fs.FailStatic {
			static = "YES"
		}
		fmt.Fprintf(w, "fleet: %d members, %d alive; %s out for the fleet; fail static: %s (netspec status --fleet)\n",
			len(fs.Members), fs.Alive(), treediff.Plural(len(fs.Out), "endpoint"), static)
	}
}

// writeProbeStatus prints the readiness probes' section.
func writeProbeStatus(w io.Writer, ps *daemon.ProbeStatus, now time.Time) {
	switch {
	case ps == nil:
		fmt.Fprintln(w, "readiness probes: off (--probes=false): readiness is the tree's")
		return
	case ps.Checks == 0 && ps.Unprobed == 0:
		fmt.Fprintln(w, "readiness probes: none in the plan")
		return
	}
	unprobed := ""
	if ps.Unprobed > 0 {
		unprobed = fmt.Sprintf("; %s not probed (exec readinessProbe: it runs in the container, not from the node; the tree's Ready stands)", treediff.Plural(ps.Unprobed, "endpoint"))
	}
	fmt.Fprintf(w, "readiness probes: %s, %d failing%s\n", treediff.Plural(ps.Checks, "check"), ps.Failing, unprobed)
	var out, kept []daemon.ProbeOut
	for _, o := range ps.Out {
		if o.FailOpen {
			kept = append(kept, o)
		} else {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "endpoints out for failing probes: none")
	} else {
		fmt.Fprintln(w, "endpoints out for failing probes:")
		for _, o := range out {
			writeProbeOut(w, o, now)
		}
	}
	if len(ps.FailOpen) == 0 {
		fmt.Fprintln(w, "fail open: none")
		return
	}
	fmt.Fprintf(w, "fail open (every endpoint fails its probe on this node; all are kept): %s\n", strings.Join(ps.FailOpen, ", "))
	for _, o := range kept {
		writeProbeOut(w, o, now)
	}
}

// writeRecordView prints the state dir's record of the last applied plan,
// as status shows it without a daemon.
func writeRecordView(w io.Writer, dir string, r *status.Record, now time.Time) {
	switch {
	case r.NoDir:
		fmt.Fprintf(w, "state dir %s: does not exist (a mistyped --state-dir? the daemon's is its --state-dir, %s by default)\n", dir, applier.DefaultStateDir)
		return
	case !r.Present:
		fmt.Fprintf(w, "state dir %s: no record of an applied plan\n", dir)
		return
	}
	fmt.Fprintf(w, "state dir %s: last applied plan, of node %s: %s, %s; recorded %s\n",
		dir, r.Node, treediff.Plural(r.Services, "service"), treediff.Plural(r.Endpoints, "endpoint"), ago(r.Recorded, now))
	h := r.Probes
	if h == nil {
		return
	}
	restore := "to put the tree's readiness back: netspec apply TREE --node " + r.Node + ", or start netspec watch (it probes again)"
	out := h.Out
	switch {
	case h.Recorded && len(out) == 0:
		fmt.Fprintf(w, "readiness probes: the kernel holds the probe view the daemon last applied (recorded %s): no endpoint held out\n", ago(h.Written, now))
	case h.Recorded:
		fmt.Fprintf(w, "readiness probes: the kernel holds the probe view the daemon last applied (recorded %s), with %s held out for failing probes, though no daemon probes them now:\n",
			ago(h.Written, now), treediff.Plural(len(out), "endpoint"))
		for _, o := range out {
			writeProbeOut(w, o, now)
		}
		fmt.Fprintln(w, restore)
	case len(out) == 0:
		fmt.Fprintln(w, "readiness probes: no record of the daemon's probes; every probed endpoint is ready in the applied plan")
	default:
		fmt.Fprintf(w, "readiness probes: no record of the daemon's probes; %s of the applied plan not ready although probed (out for a failing probe, or not Ready in the tree: the record does not tell which):\n",
			treediff.Plural(len(out), "endpoint"))
		for _, o := range out {
			fmt.Fprintf(w, "  %s %s: %s\n", o.Service, o.Endpoint, o.Probe)
		}
		fmt.Fprintln(w, restore)
	}
	if len(h.FailOpen) > 0 {
		fmt.Fprintf(w, "fail open when the daemon stopped (all kept): %s\n", strings.Join(h.FailOpen, ", "))
	}
}

// writeProbeOut writes the line of an endpoint out for a failing probe:
// since when, the latest error and when the latest probe ran.
func writeProbeOut(w io.Writer, o daemon.ProbeOut, now time.Time) {
	if o.Since.IsZero() {
		fmt.Fprintf(w, "  %s %s: %s, failing\n", o.Service, o.Endpoint, o.Probe)
		return
	}
	last := ""
	if !o.LastProbe.IsZero() {
		last = "; last probe " + ago(o.LastProbe, now)
	}
	fmt.Fprintf(w, "  %s %s: %s, failing since %s: %s%s\n", o.Service, o.Endpoint, o.Probe, ago(o.Since, now), cmp.Or(o.LastError, "-"), last)
}

// writeKernelView prints what the kernel holds of netspec, as status
// shows it without a daemon.
func writeKernelView(w io.Writer, k *status.Kernel) {
	if !k.Read {
		fmt.Fprintf(w, "kernel: not read: %s\n", k.Error)
		return
	}
	fmt.Fprintln(w, "kernel:")
	for _, t := range k.NFTables {
		if !t.Present {
			fmt.Fprintf(w, "  nftables: no table %s %s\n", t.Family, nft.TableName)
			continue
		}
		fmt.Fprintf(w, "  nftables: table %s %s: %s, %s, %s\n", t.Family, nft.TableName,
			treediff.Plural(t.Chains, "chain"), treediff.Plural(t.Sets, "set"), treediff.Plural(t.Elements, "element"))
	}
	switch v := k.IPVS; {
	case !v.Available:
		fmt.Fprintln(w, "  ipvs: not in the kernel")
	case !v.Interface:
		fmt.Fprintf(w, "  ipvs: no interface %s, no virtual server of netspec\n", ipvs.LinkName)
	default:
		fmt.Fprintf(w, "  ipvs: %s, %s (on %s)\n", treediff.Plural(v.VirtualServers, "virtual server"), treediff.Plural(v.RealServers, "real server"), ipvs.LinkName)
	}
}
