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
// The watcher runs in-process (Watcher.Run); `netspec watch` is a thin
// command line around it.
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
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/dnsserver"
	"netspec.dev/netspec/applier/healthcheck"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/probe"
	"netspec.dev/netspec/internal/cache"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/render"
	"netspec.dev/netspec/schema"
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StatusSocket == "" {
		opts.StatusSocket = filepath.Join(opts.StateDir, SocketName)
	}
	w := &Watcher{
		opts:     opts,
		log:      opts.Logger,
		loader:   &loader{root: opts.Tree, node: opts.Node, maxFileSize: opts.MaxFileSize, cache: cache.NewMemory(), memo: compiler.NewMemo()},
		metrics:  newMetrics(max(opts.Resync, 0)),
		reload:   make(chan struct{}, 1),
		synced:   make(chan struct{}),
		dnsReady: make(chan struct{}),
		full:     true,
		idle:     make(chan struct{}),

		probeKick: make(chan struct{}, 1),
		newProber: func(o probe.Options) prober { return probe.New(o) },
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
			OnChange: func() {
				w.probeKicked.CompareAndSwap(0, time.Now().UnixNano())
				select {
				case w.probeKick <- struct{}{}:
				default: // one is pending already
				}
			},
			Observe: func(_ probe.Target, action plan.ProbeAction, d time.Duration, err error) {
				w.metrics.probeObserved(string(action), d, err)
			},
		})
		defer p.Close()
		w.probes, w.prober = newProbes(p), p
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
		"state_dir", w.opts.StateDir, "status_socket", w.opts.StatusSocket, "resync", w.opts.Resync, "debounce", w.opts.Debounce)
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
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
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
			since := pace.fire(time.Now())
			if w.gitMoved {
				// HEAD may name another ref now.
				w.gitMoved = false
				w.git.update(w.opts.Tree)
			}
			if paths, ok := w.changes.take(); ok {
				// Files changed, no directory: the watches stay, and
				// the loader reads just these paths.
				w.loader.changed = paths
				w.log.Debug("reloading the files changed", "paths", len(paths))
			} else {
				w.log.Debug("rescanning the tree")
				w.rescan(fw)
			}
			w.sync(syncChange, since)
		case <-w.reload:
			w.log.Info("reload requested: reading the whole tree and the kernel back")
			w.rescan(fw)
			w.sync(syncReload, time.Time{})
		case <-w.idle:
		case <-w.probeKick:
			var since time.Time
			if at := w.probeKicked.Swap(0); at != 0 {
				since = time.Unix(0, at)
			}
			w.sync(syncProbe, since)
		case <-resync:
			w.rescan(fw) // events may have been missed; cheap when nothing changed
			w.sync(syncResync, time.Time{})
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

// Why a sync runs.
type syncReason int

const (
	syncStart  syncReason = iota // the first sync
	syncChange                   // files changed
	syncReload                   // Reload (SIGHUP)
	syncResync                   // the periodic resync
	syncProbe                    // a readiness check flipped
)

func (r syncReason) String() string {
	return [...]string{"start", "change", "reload", "resync", "probe"}[r]
}

// sync reads the tree and applies its plan: by difference (Update) after
// a change, reading the kernel back (Apply) at the first sync, at a
// reload (SIGHUP), at a resync and after a failure. An invalid tree leaves everything as it is;
// a resync then applies the last good plan again, repairing drift.
// since is the time of the first file event that led here (zero if none).
//
// The kernel comes first: it is programmed from the plan's Services, and
// only then are the DNS records and env files worked out (compiler.Staged)
// and the state dir and DNS answers updated.
func (w *Watcher) sync(why syncReason, since time.Time) {
	if w.probes != nil {
		flipped := w.probes.refresh()
		if why == syncProbe {
			if !flipped {
				return // flipped and back before this sync
			}
			if w.good == nil {
				// Nothing applied yet (the first reading failed): the
				// checks are not set before a plan is.
				return
			}
			// With the tree invalid, the flip applies to the last good
			// plan (its reading compiled again with the new view): the
			// kubelet and kube-proxy act on readiness whatever is pushed,
			// and so does the node. The invalid tree never gets here.
		}
		w.loader.view = w.probes.view()
	}
	out := &SyncStatus{Reason: why.String(), Result: ResultInvalid}
	began := time.Now()
	w.gc.begin()
	defer func() {
		out.Ended = time.Now().UTC().Truncate(time.Millisecond)
		out.DurationSeconds = time.Since(began).Seconds()
		w.cur.LastSync = out
		w.publishStatus()
		if w.probes != nil {
			// Done now, not by the next probe flip.
			w.loader.memo.IndexProbes()
		}
	}()
	if why == syncResync {
		// A resync works the tree out from scratch, so that a missed
		// change cannot outlive it.
		w.loader.memo = compiler.NewMemo()
	}
	var res *loadResult
	var err error
	restaged := false
	if why == syncProbe {
		// Nothing below the tree changed: the last reading's Services
		// are compiled again with the new view, only those whose
		// endpoints flipped at any cost.
		res, restaged = w.loader.restage()
		if !restaged {
			w.loader.changed = []string{} // read no file
		}
	}
	if !restaged {
		res, err = w.loader.load()
	}
	if res != nil && !restaged {
		// A restage is the last good reading again: its warnings were
		// logged when it was read.
		w.logWarnings(res.diags)
	}
	// What an invalid tree leaves in place: the last good state, or, when
	// nothing was applied yet (the first reading failed), whatever the
	// kernel and the state dir hold.
	keeping := "keeping last good state"
	if w.good == nil {
		keeping = "nothing applied yet: the kernel and the state dir stay as they are"
	}
	var st *compiler.Staged // the tree's plan; nil: keep the last good one
	switch {
	case restaged && w.invalid:
		// A probe flip while the tree is invalid: the last good reading
		// with the new view. The tree stays invalid (its state, metrics
		// and log as they are).
		st = res.plan
	case err != nil:
		w.invalid = true
		w.metrics.syncFailures.Inc()
		out.Result, out.Error = ResultFailed, err.Error()
		w.cur.TreeState = TreeStatus{FirstError: err.Error()}
		if res != nil {
			w.metrics.tree(res.errors)
			w.cur.TreeState.Errors = res.errors
		}
		w.log.Error("cannot read the tree, "+keeping, "reason", why.String(), "err", err)
	case res.errors > 0:
		w.invalid = true
		w.metrics.tree(res.errors)
		w.cur.TreeState = TreeStatus{Errors: res.errors, FirstError: res.firstError()}
		w.log.Error("tree invalid, "+keeping, "reason", why.String(), "errors", res.errors, "first", res.firstError())
		n := 0
		for _, d := range res.diags {
			if d.Severity != diag.Error {
				continue
			}
			if n == 0 {
				n++ // the first is in the line above
				continue
			}
			if n == 10 {
				w.log.Warn("more tree errors not shown", "errors", res.errors-n)
				break
			}
			w.log.Warn("tree error", "error", d.String())
			n++
		}
	default:
		if w.invalid {
			w.invalid = false
			w.log.Info("tree valid again", "reason", why.String())
		}
		w.metrics.tree(0)
		w.cur.TreeState = TreeStatus{Valid: true}
		st = res.plan
		if w.probes != nil && !restaged {
			w.probes.execPods = schema.ExecPodsByKey(res.tree.Objects)
		}
	}
	var rev Revision // of the tree read, when it is valid and was read
	if st != nil && !restaged {
		var revErr error
		rev, revErr = w.loader.revision(res)
		if msg := fmt.Sprint(revErr); revErr != nil && msg != w.revErr {
			w.log.Warn("cannot read the tree's git commit; its revision is a hash of its content", "err", revErr)
		}
		w.revErr = ""
		if revErr != nil {
			w.revErr = revErr.Error()
		}
	}
	if st == nil && (w.good == nil || why != syncResync) {
		// Nothing good to apply yet, or the tree is not good: only a
		// resync applies the last good plan again (to repair drift).
		return
	}

	// p is what the kernel is programmed from; finish completes it into
	// applied.
	p, applied := w.good, w.good
	finish := func() (*plan.Plan, error) { return applied, nil }
	changed := false
	if st != nil {
		p = st.Plan
		changed = w.good == nil || !plan.SameDataplane(w.good, p)
		if !changed {
			// The rules stay; the names (DNS, env) may not.
			changed = !w.good.Equal(st.Finish())
		}
		finish = func() (*plan.Plan, error) {
			q := st.Finish()
			if w.dns != nil && (w.good == nil || !w.good.DNS.Equal(q.DNS) || !dnsserver.SameCluster(w.good, q)) {
				recs, err := dnsserver.Compile(q.DNS, dnsserver.ClusterOf(q))
				if err != nil {
					// A compiler bug: the old answers stay.
					return nil, fmt.Errorf("dns records do not compile: %w", err)
				}
				w.publish = recs
			}
			applied = q
			return q, nil
		}
	}
	if !changed && (why == syncChange || why == syncProbe) && !w.full {
		// A file changed without changing the plan (a comment, a file
		// outside the plan's node): nothing to do.
		w.log.Debug("plan unchanged", "files", res.files, "validated", res.files-res.cached)
		out.Result = ResultUnchanged
		w.appliedRevision(rev)
		if w.probes != nil {
			// A check flipped without changing the plan (a Service that
			// fails open, an endpoint no traffic of this node uses).
			w.probeReport(w.good, false, true, st.FailOpen)
		}
		return
	}

	// Only a file change or a probe flip is applied by difference with
	// what was installed; the first sync, SIGHUP and the resync read the
	// kernel back (and say so: kind full).
	full := w.full || why != syncChange && why != syncProbe
	kind, apply := "partial", w.node.UpdateStaged
	if full {
		kind, apply = "full", w.node.ApplyStaged
	}
	start := time.Now()
	r, err := apply(p, finish)
	w.publish = nil
	took := time.Since(start)
	if err != nil {
		w.full = true // the kernel may hold anything now: read it back next time
		w.metrics.syncFailures.Inc()
		out.Kind, out.Result, out.Error = kind, ResultFailed, err.Error()
		w.log.Error("sync failed", "reason", why.String(), "kind", kind, "err", err)
		return
	}
	now := time.Now()
	w.full = false
	w.metrics.synced(kind, took, now)
	out.ApplySeconds = took.Seconds()
	var programming time.Duration // file event (or probe flip) → kernel updated; 0: neither
	if !since.IsZero() && changed {
		// The state dir's files (and DNS) follow the kernel.
		programming = r.KernelAt.Sub(since)
		w.metrics.programming.Observe(programming.Seconds())
	}
	w.good = applied
	p = applied
	out.Kind, out.Result = kind, ResultApplied
	if st != nil {
		w.appliedRevision(rev)
	}
	if w.probes != nil {
		var failOpen []string
		if st != nil {
			failOpen = st.FailOpen
		}
		w.probeReport(p, why != syncProbe, st != nil, failOpen)
	}
	if w.health != nil {
		w.health.Sync(p)
		w.metrics.healthChecks(w.health.Stats())
		w.cur.HealthChecks = healthStatus(w.health.Status())
	}
	select {
	case <-w.synced:
	default:
		close(w.synced)
	}
	if full {
		// A full sync builds the whole tree, plan and model anew and
		// leaves most of that as garbage; between full syncs the live
		// heap changes little. Return the garbage's pages to the system
		// now rather than keep them for a peak that comes back only at
		// the next full sync: RSS then follows the live heap
		// (docs/performance.md, "Node agent cost"). Off the sync loop, so
		// that the next reload does not wait for the collection.
		go debug.FreeOSMemory()
	} else {
		w.gc.end()
	}

	services, endpoints := p.Counts()
	var elements, chains int
	for _, t := range r.NFT.Tables {
		elements += len(t.ElementsAdded) + len(t.ElementsRemoved)
		chains += len(t.ChainsAdded) + len(t.ChainsChanged) + len(t.ChainsRemoved)
	}
	files := len(r.Files.Added) + len(r.Files.Changed) + len(r.Files.Removed)
	attrs := []any{"reason", why.String(), "kind", kind, "services", services, "endpoints", endpoints,
		"changed_elements", elements, "changed_chains", chains, "changed_files", files,
		// took is the whole sync, as the status's; apply its kernel and
		// state dir part, as netspec_sync_duration_seconds.
		"took", time.Since(began).Round(time.Millisecond), "apply", took.Round(time.Millisecond)}
	if res != nil {
		attrs = append(attrs, "validated_files", res.files-res.cached)
	}
	if programming > 0 {
		attrs = append(attrs, "programming_latency", programming.Round(time.Millisecond))
	}
	switch {
	case why == syncResync && !changed && !r.Empty():
		w.metrics.driftRepairs.Inc()
		w.cur.DriftRepairs.Count++
		w.cur.DriftRepairs.Last = &out.Ended // set when the sync ends
		if r.IPVS != nil && !r.IPVS.Empty() {
			attrs = append(attrs, "ipvs", r.IPVS.Summary())
		}
		w.log.Warn("drift repaired", append(attrs, "nftables", r.NFT.Summary())...)
	case why == syncResync && r.Empty():
		w.log.Debug("resynced, no drift", attrs...)
	default:
		w.log.Info("synced", attrs...)
	}
}
