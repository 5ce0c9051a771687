package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"netspec.dev/netspec/daemon/dnsserver"
)

// metrics are the watcher's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg *prometheus.Registry

	syncDuration       *prometheus.HistogramVec // kind=full|partial
	syncLast           prometheus.Gauge
	syncFailures       prometheus.Counter
	programming        prometheus.Histogram
	treeValid          prometheus.Gauge
	treeErrors         prometheus.Gauge
	driftRepairs       prometheus.Counter
	dnsRequests        *prometheus.CounterVec // rcode
	dnsForwards        *prometheus.CounterVec // upstream, result
	lastSuccessNano    atomic.Int64           // for /healthz
	ready              atomic.Bool            // for /readyz
	healthyWithinNanos int64
	startedNano        int64

	healthListeners prometheus.Gauge // health check node port listeners serving
	healthFailed    prometheus.Gauge // and those that could not bind

	revision *prometheus.GaugeVec // revision: 1 for the revision applied last

	probeEndpoints      *prometheus.GaugeVec     // state=ready|failing
	probeServiceFailing *prometheus.GaugeVec     // namespace, service: only Services with failing endpoints
	probeFailOpen       prometheus.Gauge         // Services failing open
	probeDuration       *prometheus.HistogramVec // action, result

	removalObjects prometheus.Gauge // objects held for their removal grace
	removalSince   prometheus.Gauge // when the first of them left the tree; 0: none
	removalDue     prometheus.Gauge // when the next is due to go; 0: none
	gitLockHeld    prometheus.Gauge // 1 while reloads wait for git's index lock
	gitLockSince   prometheus.Gauge // the lock's time; 0: none
	gitLockStale   prometheus.Gauge // 1 while a stale lock is ignored
}

func newMetrics(resync time.Duration) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), healthyWithinNanos: int64(2 * resync), startedNano: time.Now().UnixNano()}
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	m.syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "netspec_sync_duration_seconds",
		Help:    "Time to apply a plan to the node, programming the kernel and writing the state dir (not reading and compiling the tree: the status's durationSeconds and the log's took are the whole sync, its applySeconds and apply this): kind=full reads the kernel back (first sync, resync), kind=partial updates by difference (a reload).",
		Buckets: buckets,
	}, []string{"kind"})
	m.syncLast = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_sync_last_timestamp_seconds",
		Help: "Unix time of the last successful sync.",
	})
	m.syncFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "netspec_sync_failures_total",
		Help: "Syncs that failed: the tree could not be read or compiled, or the kernel or state dir refused the plan. An invalid tree is not counted here (see netspec_tree_valid).",
	})
	m.programming = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "netspec_network_programming_duration_seconds",
		Help:    "Time from the first file change event of a reload (or the readiness probe flip of a sync \"probe\") to the kernel holding the changed plan (debounce and any wait for git's index lock included; the state dir and DNS follow right after). With --dataplane none, to the files written.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
	})
	m.treeValid = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_tree_valid",
		Help: "1 when the tree read last is valid, 0 when it has errors (the last good plan stays installed).",
	})
	m.treeErrors = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_tree_errors",
		Help: "Errors in the tree read last.",
	})
	m.driftRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "netspec_drift_repairs_total",
		Help: "Resyncs and reloads (SIGHUP) that changed the kernel or state dir although the plan had not changed (rules or files changed by hand).",
	})
	m.dnsRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "netspec_dns_requests_total",
		Help: "DNS queries answered, by response code.",
	}, []string{"rcode"})
	m.dnsForwards = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "netspec_dns_forward_requests_total",
		Help: "Queries sent to an upstream resolver (--dns-upstream), by upstream and result: the upstream's response code, error (timeout, network error, a reply to another question), or busy (upstream \"\": not sent, 256 forwards in flight already).",
	}, []string{"upstream", "result"})
	m.healthListeners = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_health_check_listeners",
		Help: "Listeners of health check node ports (one per Service with a healthCheckNodePort and node address) serving.",
	})
	m.healthFailed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_health_check_listen_failures",
		Help: "Listeners of health check node ports that could not bind at the last sync (tried again at each sync); the load balancer sees such a node as down.",
	})
	m.revision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "netspec_applied_revision_info",
		Help: "1 for the revision of the tree applied last: its git commit when the tree is in a git checkout and its files are the commit's, <commit>+sha256:<12 hex> when they differ (changes not committed), else sha256: and a hash of its spec files and netspec.lock. Only the current revision has a series.",
	}, []string{"revision"})
	m.reg.MustRegister(m.revision)
	m.probeEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "netspec_probe_endpoints",
		Help: "Distinct readiness checks (endpoint address and probe) this node runs, by state: ready, or failing (the endpoint is out of its Services here, unless they fail open).",
	}, []string{"state"})
	m.probeServiceFailing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "netspec_probe_service_failing_endpoints",
		Help: "Endpoints (addresses) of a Service that fail a readiness probe on this node; only Services with failing endpoints have a series.",
	}, []string{"namespace", "service"})
	m.probeFailOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netspec_probe_fail_open_services",
		Help: "Services every endpoint of which (on some port, as this node uses them) fails its readiness probe here: they keep them all.",
	})
	m.probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "netspec_probe_duration_seconds",
		Help:    "Time a readiness probe took, by action (httpGet, tcpSocket, grpc) and result (success, failure).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"action", "result"})
	m.reg.MustRegister(m.probeEndpoints, m.probeServiceFailing, m.probeFailOpen, m.probeDuration)
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		m.reg.MustRegister(g)
		return g
	}
	m.removalObjects = gauge("netspec_removal_pending_objects",
		"Objects (Services, Pods, Endpoints, EndpointSlices, ...) that left the tree and stay applied until the removal grace (--removal-grace) passes, unless they come back.")
	m.removalSince = gauge("netspec_removal_pending_since_timestamp_seconds",
		"Unix time the first of the objects of netspec_removal_pending_objects left the tree; 0 when none waits.")
	m.removalDue = gauge("netspec_removal_due_timestamp_seconds",
		"Unix time the next of the objects of netspec_removal_pending_objects is due to be removed; 0 when none waits. Past while the tree is invalid: the removal waits for a valid tree.")
	m.gitLockHeld = gauge("netspec_git_lock_held",
		"1 while git holds the index lock (.git/index.lock) of the tree's work tree, less than a minute old: reloads wait for it to go (a checkout, merge or pull under way); else 0.")
	m.gitLockSince = gauge("netspec_git_lock_since_timestamp_seconds",
		"Unix time (modification time) of git's index lock on the tree's work tree; 0 when there is none.")
	m.gitLockStale = gauge("netspec_git_lock_stale",
		"1 while git's index lock on the tree's work tree is older than a minute: taken as left by a git that died, and no longer waited for; else 0.")
	m.reg.MustRegister(m.syncDuration, m.syncLast, m.syncFailures, m.programming,
		m.treeValid, m.treeErrors, m.driftRepairs, m.dnsRequests, m.dnsForwards, m.healthListeners, m.healthFailed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// synced records a successful sync.
func (m *metrics) synced(kind string, took time.Duration, now time.Time) {
	m.syncDuration.WithLabelValues(kind).Observe(took.Seconds())
	m.syncLast.Set(float64(now.UnixNano()) / 1e9)
	m.lastSuccessNano.Store(now.UnixNano())
	m.ready.Store(true)
}

// tree records the validity of the tree read last.
func (m *metrics) tree(errors int) {
	m.treeErrors.Set(float64(errors))
	if errors == 0 {
		m.treeValid.Set(1)
	} else {
		m.treeValid.Set(0)
	}
}

// applied records the revision of the tree applied: its series alone.
func (m *metrics) applied(revision string) {
	m.revision.Reset()
	m.revision.WithLabelValues(revision).Set(1)
}

// removalPending records the removals held for their grace (nil: none).
func (m *metrics) removalPending(p *PendingRemoval) {
	if p == nil {
		m.removalObjects.Set(0)
		m.removalSince.Set(0)
		m.removalDue.Set(0)
		return
	}
	m.removalObjects.Set(float64(p.Objects))
	m.removalSince.Set(float64(p.Since.UnixNano()) / 1e9)
	m.removalDue.Set(float64(p.Due.UnixNano()) / 1e9)
}

// gitLock records git's index lock (nil: none).
func (m *metrics) gitLock(l *GitLockStatus) {
	held, since, stale := 0.0, 0.0, 0.0
	if l != nil {
		since = float64(l.Since.UnixNano()) / 1e9
		if l.Stale {
			stale = 1
		} else {
			held = 1
		}
	}
	m.gitLockHeld.Set(held)
	m.gitLockSince.Set(since)
	m.gitLockStale.Set(stale)
}

// healthChecks records the health check listeners after a sync.
func (m *metrics) healthChecks(listening, failed int) {
	m.healthListeners.Set(float64(listening))
	m.healthFailed.Set(float64(failed))
}

// probeObserved records one finished probe.
func (m *metrics) probeObserved(action string, d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	m.probeDuration.WithLabelValues(action, result).Observe(d.Seconds())
}

// probeState records the checks' states after a sync: the totals, the
// failing endpoints of each Service that has some (the series of others
// are removed) and the Services failing open.
func (m *metrics) probeState(checks, failing int, perService map[string]int, failOpen int) {
	m.probeEndpoints.WithLabelValues("ready").Set(float64(checks - failing))
	m.probeEndpoints.WithLabelValues("failing").Set(float64(failing))
	m.probeServiceFailing.Reset()
	for key, n := range perService {
		ns, name, _ := strings.Cut(key, "/")
		m.probeServiceFailing.WithLabelValues(ns, name).Set(float64(n))
	}
	m.probeFailOpen.Set(float64(failOpen))
}

// dnsQuery counts one DNS answer.
func (m *metrics) dnsQuery(rcode int) {
	m.dnsRequests.WithLabelValues(dnsserver.RcodeName(rcode)).Inc()
}

// dnsForward counts one query sent to an upstream (dnsserver.Options.OnForward).
func (m *metrics) dnsForward(upstream, result string) {
	m.dnsForwards.WithLabelValues(upstream, result).Inc()
}

// handler serves /metrics, /healthz and /readyz.
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		// Before the first sync, the watcher's start counts as one: a
		// daemon is given twice the resync interval to get there.
		what, last := "last successful sync", m.lastSuccessNano.Load()
		if last == 0 {
			what, last = "started, no successful sync yet", m.startedNano
		}
		age := time.Since(time.Unix(0, last))
		if m.healthyWithinNanos > 0 && int64(age) > m.healthyWithinNanos {
			http.Error(w, fmt.Sprintf("unhealthy: %s %s ago, more than twice the resync interval", what, age.Round(time.Second)), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok: %s %s ago\n", what, age.Round(time.Millisecond))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "not ready: no successful sync yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
