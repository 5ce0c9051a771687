// Package daemon keeps a node in step with a tree of spec files: it
// watches the tree's directories, and on every change re-validates the
// files that changed, compiles the node's plan and applies it (nftables
// rules, zone and env files, and the records of an optional DNS server).
//
// An invalid tree changes nothing: the last good plan stays installed
// and served, and the errors are logged and exported as metrics; a tree
// valid again is logged. Each warning of the tree is logged once, when it
// appears. A periodic resync (and SIGHUP, Reload) reads the whole tree
// and the kernel back and repairs drift.
//
// Each sync ends with a snapshot of the watcher's state (Status: the
// revision applied, the last sync, the tree's validity, drift repairs,
// health check node ports), served on a unix socket in the state dir for
// `netspec status` (QueryStatus). The revision is the tree's git commit,
// read from its files (GitHead), or a hash of its content
// (ContentRevision), and is exported as netspec_applied_revision_info.
//
// With Options.Probes it runs the readiness probes of the plan's
// endpoints (package probe) and keeps the data plane and the headless DNS
// answers to the endpoints that pass them, failing open when all of a
// Service port's would go (probes.go); a flip is a sync "probe" that
// reads no file (compiler.Memo.Restage). Between reloads it starts the
// garbage collection the next reload would otherwise start and wait for
// (idlegc.go), so that a flip or a change is not slowed by one.
//
// With Options.Gossip the watcher is a member of a fleet (package fleet,
// gossip.go): it probes only what the fleet assigns it, takes readiness
// from the fleet's view merged with its own probes (a change of the view
// is a sync "probe"), tells the fleet its failing checks and revision
// after each sync, and leaves the fleet when Run returns.
//
// The watcher runs in-process (Watcher.Run); `netspec watch` is a thin
// command line around it: Settings checks its flags and makes the
// Options. ExplainView and ProbeView give the daemon's readiness to
// explain --live and netspec plan.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/dnsserver"
	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/daemon/healthcheck"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
)

// Data planes.
const (
	DataplaneNFTables = "nftables" // nftables rules, state dir and DNS
	DataplaneIPVS     = "ipvs"     // IPVS virtual servers with their nftables tables, state dir and DNS
	DataplaneNone     = "none"     // state dir and DNS only; the kernel is left alone
)

// Defaults of Options.
const (
	DefaultResync   = 60 * time.Second
	DefaultDebounce = 200 * time.Millisecond
)

// Options configure a Watcher.
type Options struct {
	Tree string // the tree's root directory (may be a symlink, swapped atomically)
	Node string // the Node object this machine is

	Dataplane string // DataplaneNFTables (default), DataplaneIPVS or DataplaneNone
	// IPVSScheduler is the scheduler of Services without the annotation
	// netspec.dev/ipvs-scheduler under DataplaneIPVS ("" for rr).
	IPVSScheduler string
	StateDir      string // applier.DefaultStateDir when empty
	NetNSFd       int    // network namespace to program; 0: the process's own
	MaxFileSize   int64  // 0: schema.DefaultMaxFileSize

	// DNSListen, when set, is the address (host:port) the DNS server of
	// the plan's records listens on, over UDP and TCP.
	DNSListen string
	// DNSTransferTo are the clients allowed zone transfers.
	DNSTransferTo []netip.Prefix
	// DNSUpstreams (host:port) answer, through the DNS server, names
	// outside the plan's zones and the targets of ExternalName Services
	// (dnsserver.Options.Upstreams). The server's own DNSListen address
	// is left out, with a warning; New fails when none remains.
	DNSUpstreams []string
	// MetricsListen, when set, is the address of the HTTP server of
	// /metrics, /healthz and /readyz.
	MetricsListen string
	// StatusSocket is the path of the unix socket (mode 0600) that
	// `netspec status` asks; StateDir/SocketName when empty.
	StatusSocket string

	Resync time.Duration // DefaultResync when 0; negative: no resync
	// Debounce paces reloads for file changes: a change after a quiet
	// spell is applied once the tree has been quiet for Settle; a burst
	// waits at most Debounce; reloads start at least Debounce apart.
	// DefaultDebounce when 0; negative: every event reloads at once.
	Debounce time.Duration
	// RemovalGrace delays removals: an object (Service, Pod, Endpoints,
	// EndpointSlice, any kind, by kind, namespace and name) that leaves
	// the tree stays applied until the tree has lacked it for
	// RemovalGrace, and stays for good when it comes back within it (an
	// editor's save in two steps, a checkout that moves it to another
	// file). Additions and edits are applied at once.
	// DefaultRemovalGrace when 0; negative: removals are applied at once.
	RemovalGrace time.Duration

	// Probes runs the readiness probes of the plan's endpoints from this
	// node (package probe): an endpoint failing one is out of its
	// Services here (not ready), unless every endpoint a Service port
	// uses here fails (fail open). False leaves readiness to the tree.
	// Probes go out from the process's network namespace (not
	// NetNSFd's): run the daemon on the node, in its namespace.
	Probes bool
	// ProbeConcurrency bounds the probes in flight at once; 0 is
	// probe.DefaultMaxConcurrent.
	ProbeConcurrency int

	// Gossip, when set, makes the watcher a member of a fleet that
	// shares readiness (GossipOptions); it needs Probes. Nil: the node
	// probes what it forwards to, alone.
	Gossip *GossipOptions

	Logger *slog.Logger // slog.Default() when nil
}

// Watcher keeps a node in step with a tree. Make it with New, run it with
// Run.
type Watcher struct {
	opts    Options
	log     *slog.Logger
	loader  *loader
	metrics *metrics
	gc      idleGC // collections started between reloads

	metricsLn net.Listener // nil without MetricsListen
	dns       *dnsserver.Server
	dnsReady  chan struct{}
	// health serves the health check node ports of the plan applied
	// last; nil under DataplaneNone, which forwards nothing.
	health *healthcheck.Server

	reload chan struct{} // Reload's requests
	synced chan struct{} // closed after the first successful sync

	// Owned by Run's goroutine.
	node *applier.Node
	good *plan.Plan // the last plan applied successfully
	// publish holds the DNS records of the sync under way, swapped in
	// once the node's files are written (applier.Options.Published).
	publish *dnsserver.Records
	full    bool // the next sync must read the kernel back
	watched watchSet
	// changes are the file events since the last reload: a reload for
	// them alone keeps the directories watched and reads just the paths
	// changed, unless something else happened (changes.full).
	changes changes
	// warned are the warnings of the last reading of the tree, by
	// warningKey: a warning is logged when it appears, not on every
	// reload.
	warned map[string]bool
	// invalid tells that the last reading of the tree failed (invalid,
	// or unreadable): the next good one says the tree is valid again.
	invalid bool

	// idle is received from by Run between syncs only (waitIdle).
	idle chan struct{}

	// probes is the readiness prober's state, nil without
	// Options.Probes; probeKick is signalled when a check flips.
	probes    *probes
	probeKick chan struct{}
	// prober is probes' prober, set before the status server starts, which
	// reads the latest probes of the failing checks from it.
	prober prober
	// probeKicked is when the first flip since the last probe sync was
	// reported (UnixNano; 0: none), for the programming latency.
	probeKicked atomic.Int64
	// newProber makes the prober (probe.New; a fake in tests).
	newProber func(probe.Options) prober

	// cur is the status as of the last sync, owned by Run's goroutine;
	// status is a copy of it made at the end of each sync, which the
	// status server reads.
	cur    Status
	status atomic.Pointer[Status]
	// revErr is the last error of reading the tree's git HEAD, logged
	// when it changes.
	revErr string
	// git watches the files that name the tree's commit; gitMoved
	// tells that one changed since the last reload.
	git      gitWatch
	gitMoved bool
	// deferred is the sync that waits for git's index lock to go (or
	// turn stale): nil when none waits.
	deferred *deferredSync
	// lockTimer fires when the git lock a sync waits for turns stale;
	// removalTimer when the next removal held is due (pendingRemoval).
	lockTimer, removalTimer *time.Timer
	// heldLogged are the objects held at the last reading, so that a
	// removal held is logged once.
	heldLogged map[objectKey]bool

	// fleet is the member of the fleet, with Options.Gossip, once the
	// first good tree started it (gossip.go); fleetRef holds it for the
	// status server. fleetOut are the endpoints out for the fleet after
	// the last sync, for logging changes once. newMember starts it
	// (fleet.New; a fake in tests). fatal gets the error that stops Run
	// from a sync (the member cannot start).
	fleet     member
	fleetRef  atomic.Pointer[memberRef]
	fleetOut  map[string]FleetOut
	newMember func(cfg fleet.Config, nodes []string, checks []fleet.Check) (member, error)
	fatal     chan error
}

// New checks opts and binds the metrics listener (so that a busy port is
// an error now, not later). Nothing is read or applied before Run.
func New(opts Options) (*Watcher, error) {
	if opts.Tree == "" {
		return nil, errors.New("watch: no tree given")
	}
	if opts.Node == "" {
		return nil, errors.New("watch: no node given")
	}
	switch opts.Dataplane {
	case "":
		opts.Dataplane = DataplaneNFTables
	case DataplaneNFTables, DataplaneIPVS, DataplaneNone:
	default:
		return nil, fmt.Errorf("watch: unknown data plane %q: want %s, %s or %s", opts.Dataplane, DataplaneNFTables, DataplaneIPVS, DataplaneNone)
	}
	if opts.StateDir == "" {
		opts.StateDir = applier.DefaultStateDir
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.RemovalGrace == 0 {
		opts.RemovalGrace = DefaultRemovalGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StatusSocket == "" {
		opts.StatusSocket = filepath.Join(opts.StateDir, SocketName)
	}
	if opts.Gossip != nil {
		if err := opts.Gossip.check(opts.Probes); err != nil {
			return nil, err
		}
	}
	w := &Watcher{
		opts: opts,
		log:  opts.Logger,
		loader: &loader{root: opts.Tree, node: opts.Node, maxFileSize: opts.MaxFileSize, cache: cache.NewMemory(), memo: compiler.NewMemo(),
			removals: newRemovals(opts.RemovalGrace), now: time.Now},
		metrics:  newMetrics(max(opts.Resync, 0)),
		reload:   make(chan struct{}, 1),
		synced:   make(chan struct{}),
		dnsReady: make(chan struct{}),
		full:     true,
		idle:     make(chan struct{}),

		lockTimer:    stoppedTimer(),
		removalTimer: stoppedTimer(),

		probeKick: make(chan struct{}, 1),
		newProber: func(o probe.Options) prober { return probe.New(o) },
		newMember: newMember,
		fatal:     make(chan error, 1),
	}
	w.cur = Status{Node: opts.Node, Tree: opts.Tree, Dataplane: opts.Dataplane, StateDir: opts.StateDir,
		PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Millisecond)}
	if opts.Dataplane == DataplaneIPVS {
		w.cur.IPVSScheduler = opts.IPVSScheduler
		if w.cur.IPVSScheduler == "" {
			w.cur.IPVSScheduler = render.DefaultIPVSScheduler
		}
	}
	w.publishStatus()
	if len(opts.DNSUpstreams) > 0 && opts.DNSListen == "" {
		return nil, fmt.Errorf("watch: dns upstreams without a dns listen address")
	}
	if opts.DNSListen != "" {
		upstreams := opts.DNSUpstreams
		if len(upstreams) > 0 {
			var self []string
			upstreams, self = dnsserver.WithoutSelf(upstreams, opts.DNSListen)
			for _, u := range self {
				w.log.Warn("dns upstream is this server's own address, skipped (it would loop)", "upstream", u, "listen", opts.DNSListen)
			}
			if len(upstreams) == 0 {
				return nil, fmt.Errorf("watch: dns: no upstream left: %s is only this server's own address %s", strings.Join(self, ","), opts.DNSListen)
			}
			w.log.Info("dns forwarding", "upstreams", strings.Join(upstreams, ","))
		}
		w.dns = dnsserver.New(dnsserver.Options{TransferTo: opts.DNSTransferTo, OnQuery: w.metrics.dnsQuery, OnForward: w.metrics.dnsForward, Upstreams: upstreams})
	}
	if opts.MetricsListen != "" {
		ln, err := net.Listen("tcp", opts.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("watch: metrics: %w", err)
		}
		w.metricsLn = ln
	}
	return w, nil
}

// Registry is the watcher's Prometheus registry.
func (w *Watcher) Registry() *prometheus.Registry { return w.metrics.reg }

// Handler serves /metrics, /healthz and /readyz (what MetricsListen serves).
func (w *Watcher) Handler() http.Handler { return w.metrics.handler() }

// MetricsAddr is the address the metrics server listens on; nil without
// Options.MetricsListen.
func (w *Watcher) MetricsAddr() net.Addr {
	if w.metricsLn == nil {
		return nil
	}
	return w.metricsLn.Addr()
}

// Synced is closed after the first successful sync.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// DNSReady is closed once the DNS server listens (never without
// Options.DNSListen).
func (w *Watcher) DNSReady() <-chan struct{} { return w.dnsReady }

// Reload asks Run to read the tree again now (SIGHUP), without waiting
// for a file change. It does not block.
func (w *Watcher) Reload() {
	select {
	case w.reload <- struct{}{}:
	default: // one is pending already
	}
}

// publishDNS swaps in the DNS records of the sync under way: the node
// calls it once its files hold the new plan, before it deletes IPVS
// virtual servers that the plan no longer has.
func (w *Watcher) publishDNS() {
	if w.publish != nil {
		w.dns.Swap(w.publish)
		w.publish = nil
	}
}

// Run watches the tree and keeps the node in step with it until ctx is
// done; then it returns nil, leaving the rules and files in place. It
// returns an error when it cannot start (no inotify, the kernel or state
// dir cannot be opened) or when the DNS or metrics server fails.
func (w *Watcher) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var err error
	w.node, err = applier.Open(applier.Options{
		StateDir:      w.opts.StateDir,
		NetNSFd:       w.opts.NetNSFd,
		NoDataplane:   w.opts.Dataplane == DataplaneNone,
		IPVS:          w.opts.Dataplane == DataplaneIPVS,
		IPVSScheduler: w.opts.IPVSScheduler,
		Published:     w.publishDNS,
		Incremental:   true,
	})
	if err != nil {
		if w.metricsLn != nil {
			w.metricsLn.Close()
		}
		return fmt.Errorf("watch: %w", err)
	}
	defer w.node.Close()
	if w.opts.Probes {
		p := w.newProber(probe.Options{
			MaxConcurrent: w.opts.ProbeConcurrency,
			OnChange:      w.kickProbe,
			Observe: func(_ probe.Target, action plan.ProbeAction, d time.Duration, err error) {
				w.metrics.probeObserved(string(action), d, err)
			},
		})
		defer p.Close()
		w.probes, w.prober = newProbes(p), p
		w.probes.gossip = w.opts.Gossip != nil
		defer w.leaveFleet() // before the prober closes: the view stays until the fleet hears
		w.cur.Probes = &ProbeStatus{Out: []ProbeOut{}, FailOpen: []string{}}
	}
	if w.opts.Dataplane != DataplaneNone {
		w.health = healthcheck.New(healthcheck.Options{
			NetNSFd:    w.opts.NetNSFd,
			Logger:     w.log,
			LocalAddrs: func() ([]netip.Addr, error) { return ipvs.LocalAddrs(w.opts.NetNSFd) },
		})
		defer w.health.Close()
	}

	fw, err := fsnotify.NewWatcher()
	if err != nil {
		if w.metricsLn != nil {
			w.metricsLn.Close()
		}
		return fmt.Errorf("watch: %w", err)
	}
	defer fw.Close()
	if gfw, err := fsnotify.NewWatcher(); err == nil {
		w.git.fw = gfw
		defer gfw.Close()
	} else {
		w.log.Warn("cannot watch the tree's git HEAD; a commit shows at the next reload", "err", err)
	}

	statusLn, err := listenStatus(w.opts.StatusSocket)
	if err != nil {
		if w.metricsLn != nil {
			w.metricsLn.Close()
		}
		return fmt.Errorf("watch: status socket: %w", err)
	}
	defer os.Remove(w.opts.StatusSocket)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // stop the servers before waiting for them
	statusSrv := &http.Server{Handler: w.statusHandler(), ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		if err := statusSrv.Serve(statusLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("watch: status server: %w", err))
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		statusSrv.Close()
	})
	if w.metricsLn != nil {
		srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(w.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cancel(fmt.Errorf("watch: metrics server: %w", err))
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
			defer stop()
			srv.Shutdown(shutdown)
		})
		w.log.Info("serving metrics", "addr", w.metricsLn.Addr().String())
	}
	if w.dns != nil {
		wg.Go(func() {
			err := w.dns.ListenAndServe(ctx, w.opts.DNSListen, func() {
				close(w.dnsReady)
				w.log.Info("serving DNS", "addr", w.opts.DNSListen)
			})
			if err != nil {
				cancel(fmt.Errorf("watch: dns server on %s: %w", w.opts.DNSListen, err))
			}
		})
	}

	w.log.Info("watching", "tree", w.opts.Tree, "node", w.opts.Node, "dataplane", w.opts.Dataplane,
		"state_dir", w.opts.StateDir, "status_socket", w.opts.StatusSocket, "resync", w.opts.Resync, "debounce", w.opts.Debounce,
		"removal_grace", max(w.opts.RemovalGrace, 0))
	w.rescan(fw)
	w.sync(syncStart, time.Time{})

	var resync <-chan time.Time
	if w.opts.Resync > 0 {
		t := time.NewTicker(w.opts.Resync)
		defer t.Stop()
		resync = t.C
	}
	// Pacing (pacer): a change is applied once the tree has been quiet
	// for Settle, a burst at most Debounce after its first event, and
	// reloads for changes start at least Debounce apart.
	pace := newPacer(w.opts.Debounce)
	debounce := stoppedTimer()
	defer w.lockTimer.Stop()
	defer w.removalTimer.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			w.log.Info("stopping; rules and files stay in place")
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("watch: fsnotify stopped")
			}
			path := filepath.Clean(ev.Name)
			if !w.watched.matters(path) {
				continue
			}
			w.changes.add(path, ev.Op, w.watched)
			w.log.Debug("file event", "path", ev.Name, "op", ev.Op.String())
			debounce.Reset(pace.event(time.Now()))
		case ev := <-w.git.events():
			if !w.git.set.matters(filepath.Clean(ev.Name)) {
				continue
			}
			w.log.Debug("git event", "path", ev.Name, "op", ev.Op.String())
			w.gitMoved = true
			debounce.Reset(pace.event(time.Now()))
		case err := <-w.git.errors():
			w.log.Debug("git watch error", "err", err)
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("watch: fsnotify stopped")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("file events lost (inotify queue overflow); rescanning the tree")
			} else {
				w.log.Warn("file watch error; rescanning the tree", "err", err)
			}
			w.changes.lost()
			debounce.Reset(pace.event(time.Now()))
		case <-debounce.C:
			w.treeSync(fw, syncChange, pace.fire(time.Now()))
		case <-w.lockTimer.C:
			// The git lock a sync waits for turns stale now.
			w.treeSync(fw, syncChange, time.Time{})
		case <-w.removalTimer.C:
			if pace.pending() || w.deferred != nil {
				continue // the reload on its way applies the removal
			}
			w.loader.changed = []string{} // read no file
			w.sync(syncRemoval, time.Time{})
		case <-w.reload:
			w.log.Info("reload requested: reading the whole tree and the kernel back")
			w.treeSync(fw, syncReload, time.Time{})
		case err := <-w.fatal:
			return err
		case <-w.idle:
		case <-w.probeKick:
			var since time.Time
			if at := w.probeKicked.Swap(0); at != 0 {
				since = time.Unix(0, at)
			}
			w.sync(syncProbe, since)
		case <-resync:
			w.treeSync(fw, syncResync, time.Time{})
		}
	}
}

// logWarnings logs each warning of a reading of the tree that the last
// reading did not have: a warning is logged once when it appears, and
// again only if it went away and came back.
func (w *Watcher) logWarnings(diags diag.List) {
	now := make(map[string]bool)
	for _, d := range diags {
		if d.Severity != diag.Warning {
			continue
		}
		k := warningKey(d)
		if now[k] {
			continue
		}
		now[k] = true
		if !w.warned[k] {
			w.log.Warn("tree warning", "warning", d.String())
		}
	}
	w.warned = now
}

// warningKey identifies a warning by its file, field and message, not by
// its line and column: an edit above it moves it without making it new.
func warningKey(d diag.Diagnostic) string {
	return d.Pos.File + "\x00" + d.Path.String() + "\x00" + d.Msg
}

// waitIdle returns once Run is between syncs (so a sync that had begun
// has finished: its state dir written, its "synced" record logged), or
// when ctx is done. For tests, which must not read the state dir while a
// reload still writes it.
func (w *Watcher) waitIdle(ctx context.Context) error {
	select {
	case w.idle <- struct{}{}: // unbuffered: Run took it, between syncs
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stoppedTimer is a timer that fires when Reset.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// treeSync runs a sync that reads the tree, for file changes (the
// paths changed, or the whole tree when they do not tell all), SIGHUP
// or the resync (the whole tree, rescanned: events may have been missed;
// cheap when nothing changed). While git holds the index lock of the
// tree's work tree (a checkout, merge or pull under way: the files are
// half old, half new), it waits: the sync runs when the lock goes (its
// event reloads) or turns stale (lockTimer), as the strongest of the
// syncs that waited, with the time of their first file event.
func (w *Watcher) treeSync(fw *fsnotify.Watcher, why syncReason, since time.Time) {
	if w.gitMoved {
		// HEAD may name another ref now, the git dir be another.
		w.gitMoved = false
		w.git.update(w.opts.Tree)
	}
	why, since = w.deferred.merge(why, since)
	if until, held := w.gitLocked(time.Now()); held {
		w.deferred = &deferredSync{why: why, since: since}
		w.lockTimer.Reset(max(time.Until(until), 0))
		w.log.Debug("reload waits for git's index lock", "reason", why.String(), "lock", w.git.lock)
		return
	}
	w.deferred = nil
	w.lockTimer.Stop()
	if why == syncChange {
		if paths, ok := w.changes.take(); ok {
			// Files changed, no directory: the watches stay, and
			// the loader reads just these paths.
			w.loader.changed = paths
			w.log.Debug("reloading the files changed", "paths", len(paths))
		} else {
			w.log.Debug("rescanning the tree")
			w.rescan(fw)
		}
	} else {
		w.rescan(fw)
	}
	w.sync(why, since)
}

// deferredSync is a sync waiting for git's index lock to go.
type deferredSync struct {
	why   syncReason
	since time.Time // of its first file event; zero: none
}

// merge folds the sync waiting (d; nil: none) into one for why and
// since: the resync's fresh start outranks SIGHUP's full reading, which
// outranks a change's; the first file event stays.
func (d *deferredSync) merge(why syncReason, since time.Time) (syncReason, time.Time) {
	if d == nil {
		return why, since
	}
	rank := map[syncReason]int{syncChange: 0, syncReload: 1, syncResync: 2}
	if rank[d.why] > rank[why] {
		why = d.why
	}
	if since.IsZero() || !d.since.IsZero() && d.since.Before(since) {
		since = d.since
	}
	return why, since
}

// rescan updates the directories watched to the tree as it is now. The
// sync after it reads the whole tree (the loader is given no changed
// paths), which covers every event so far: they are forgotten. That is
// the rule: a reload reads only the paths of its events when nothing but
// files changed; the first sync, SIGHUP, the periodic resync and any
// event the paths do not describe (changes) rescan and read the tree.
func (w *Watcher) rescan(fw *fsnotify.Watcher) {
	w.changes = changes{}
	w.gitMoved = false
	w.git.update(w.opts.Tree)
	s := scan(w.opts.Tree)
	added, removed := s.sync(fw, w.watched)
	w.watched = s
	if added+removed > 0 {
		w.log.Debug("watching directories", "dirs", len(s), "added", added, "removed", removed)
	}
}
