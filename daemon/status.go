package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"netspec.dev/netspec/daemon/healthcheck"
)

// SocketName is the name of the status socket in the state dir.
const SocketName = "netspec.sock"

// Status is what a running watcher tells `netspec status`: a snapshot
// made at the end of every sync (no lock of the watcher is held while it
// is served). Its JSON field names are stable: tools may rely on them.
type Status struct {
	Node      string `json:"node"`
	Tree      string `json:"tree"`
	Dataplane string `json:"dataplane"`
	// IPVSScheduler is the scheduler of Services without the annotation
	// netspec.dev/ipvs-scheduler, with the ipvs data plane; "" otherwise.
	IPVSScheduler string    `json:"ipvsScheduler,omitempty"`
	StateDir      string    `json:"stateDir"`
	PID           int       `json:"pid"`
	Started       time.Time `json:"started"`
	// Revision is the tree applied last; nil before the first apply.
	Revision *RevisionStatus `json:"revision"`
	// LastSync is the last sync, whatever its result; nil before the
	// first one ends.
	LastSync *SyncStatus `json:"lastSync"`
	// TreeState is the tree as the last sync read it.
	TreeState    TreeStatus  `json:"treeState"`
	DriftRepairs DriftStatus `json:"driftRepairs"`
	// HealthChecks are the health check node ports served, by service;
	// nil with DataplaneNone, which serves none.
	HealthChecks []HealthCheckStatus `json:"healthChecks"`
	// Probes is the state of the readiness probes as of the last sync,
	// with the latest probe of each endpoint out (its LastError and
	// LastProbe) as of the request; nil when the watcher does not probe.
	Probes *ProbeStatus `json:"probes"`
	// PendingRemoval are the objects that left the tree and stay applied
	// until their removal grace passes; nil when none waits.
	PendingRemoval *PendingRemoval `json:"pendingRemoval,omitempty"`
	// GitLock is git's index lock on the tree's work tree, while it
	// exists: reloads wait for it unless it is stale; nil when there is
	// none.
	GitLock *GitLockStatus `json:"gitLock,omitempty"`
	// Fleet is the fleet this node gossips with: its members (as of the
	// request), the endpoints out for it and fail static; nil without
	// gossip, or before the member started.
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// RevisionStatus is the revision applied and since when.
type RevisionStatus struct {
	ID     string    `json:"id"`              // a commit, "<commit>+sha256:<12 hex>" or "sha256:…" (Revision)
	Source string    `json:"source"`          // RevisionGit or RevisionContent
	Dirty  bool      `json:"dirty,omitempty"` // git, with changes not committed (Revision)
	Since  time.Time `json:"since"`           // when a sync first applied it
}

// Results of a sync.
const (
	ResultApplied   = "applied"   // the kernel and state dir hold the tree's plan (or, at a resync of an invalid tree, the last good one again)
	ResultUnchanged = "unchanged" // files changed but the plan did not: nothing to do
	ResultInvalid   = "invalid"   // the tree has errors: nothing changed
	ResultFailed    = "failed"    // the tree could not be read or compiled, or the kernel or state dir refused the plan
)

// SyncStatus is one sync.
type SyncStatus struct {
	Reason string    `json:"reason"`         // start, change, reload, resync, probe or removal
	Kind   string    `json:"kind,omitempty"` // full or partial; empty when nothing was applied
	Ended  time.Time `json:"ended"`
	// DurationSeconds is the whole sync: reading the tree to the
	// state dir written (the log's took). ApplySeconds is the part that
	// programs the kernel and writes the state dir (the log's apply, the
	// metric netspec_sync_duration_seconds); 0 when nothing was applied.
	DurationSeconds float64 `json:"durationSeconds"`
	ApplySeconds    float64 `json:"applySeconds,omitempty"`
	Result          string  `json:"result"` // ResultApplied, ResultUnchanged, ResultInvalid or ResultFailed
	Error           string  `json:"error,omitempty"`
}

// TreeStatus is the validity of the tree read last.
type TreeStatus struct {
	Valid      bool   `json:"valid"`
	Errors     int    `json:"errors"`               // error diagnostics
	FirstError string `json:"firstError,omitempty"` // file:line:col: message, or why the tree could not be read or compiled
}

// DriftStatus counts the resyncs and reloads (SIGHUP) that repaired drift.
type DriftStatus struct {
	Count int        `json:"count"`
	Last  *time.Time `json:"last,omitempty"`
}

// HealthCheckStatus is one Service's health check node port.
type HealthCheckStatus struct {
	Service        string   `json:"service"` // namespace/name
	Port           uint16   `json:"port"`
	LocalEndpoints int      `json:"localEndpoints"`
	Listening      []string `json:"listening"` // addresses bound
	Failing        []string `json:"failing"`   // addresses that could not bind (tried again at each sync)
}

// StatusSocket is the path of the status socket a watcher serves.
func (w *Watcher) StatusSocket() string { return w.opts.StatusSocket }

// statusHandler serves GET /status.
func (w *Watcher) statusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, r *http.Request) {
		st := *w.status.Load()
		st.Probes = st.Probes.live(w.prober)
		st.Fleet = st.Fleet.live(w.fleetRef.Load())
		b, err := json.Marshal(&st)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Write(b)
	})
	return mux
}

// listenStatus makes the status socket at path, mode 0600: bound under a
// temporary name, restricted, then renamed into place, so that it is
// never reachable by others. A socket left at path by a daemon that died
// (nothing answers) is replaced; one a live daemon answers on is an
// error, and so is a path that is not a socket.
func listenStatus(path string) (net.Listener, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket", path)
	default:
		c, err := dialUnix(context.Background(), path)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another netspec watch answers on it (one daemon per state dir)", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		// Stale: its daemon is gone.
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp"+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	var ln net.Listener
	err = shortPath(tmp, func(addr string) error {
		var err error
		ln, err = net.Listen("unix", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	return ln, nil
}

// Errors of QueryStatus when no daemon answers.
var (
	ErrNoDaemon    = errors.New("no daemon: the socket does not exist")
	ErrStaleSocket = errors.New("no daemon: nothing listens on the socket (left by a daemon that stopped)")
)

// QueryStatus asks the daemon serving the status socket at path for its
// status. With no daemon it returns an error wrapping ErrNoDaemon or
// ErrStaleSocket.
func QueryStatus(ctx context.Context, path string) (*Status, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialUnix(ctx, path)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://netspec/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		return nil, fmt.Errorf("%s: %w", path, ErrNoDaemon)
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%s: %w", path, ErrStaleSocket)
	case err != nil:
		var op *net.OpError
		if errors.As(err, &op) {
			err = op
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// appliedRevision records rev as the revision applied, in the status and
// the metric netspec_applied_revision_info.
func (w *Watcher) appliedRevision(rev Revision) {
	if rev.ID == "" {
		return
	}
	if w.cur.Revision == nil || w.cur.Revision.ID != rev.ID {
		w.cur.Revision = &RevisionStatus{ID: rev.ID, Source: rev.Source, Dirty: rev.Dirty, Since: time.Now().UTC().Truncate(time.Millisecond)}
		w.metrics.applied(rev.ID)
		w.log.Info("revision applied", "revision", rev.ID, "source", rev.Source)
	}
}

// publishStatus makes the status server serve a copy of w.cur. The
// copy shares only data that is never changed once published.
func (w *Watcher) publishStatus() {
	st := w.cur
	if st.LastSync != nil {
		ls := *st.LastSync
		st.LastSync = &ls
	}
	if st.Revision != nil {
		r := *st.Revision
		st.Revision = &r
	}
	if st.DriftRepairs.Last != nil {
		t := *st.DriftRepairs.Last
		st.DriftRepairs.Last = &t
	}
	st.HealthChecks = slices.Clone(st.HealthChecks)
	if st.PendingRemoval != nil {
		p := *st.PendingRemoval
		st.PendingRemoval = &p
	}
	if st.GitLock != nil {
		l := *st.GitLock
		st.GitLock = &l
	}
	w.status.Store(&st)
}

// healthStatus converts the health check server's status.
func healthStatus(in []healthcheck.Status) []HealthCheckStatus {
	out := make([]HealthCheckStatus, 0, len(in))
	for _, s := range in {
		h := HealthCheckStatus{Service: s.Namespace + "/" + s.Name, Port: s.Port, LocalEndpoints: s.LocalEndpoints,
			Listening: []string{}, Failing: []string{}}
		for _, a := range s.Listening {
			h.Listening = append(h.Listening, a.String())
		}
		for _, a := range s.Failing {
			h.Failing = append(h.Failing, a.String())
		}
		out = append(out, h)
	}
	return out
}

// maxSocketPath is the longest path a unix socket address holds
// (sun_path, with its terminating NUL).
const maxSocketPath = 107

// shortPath calls fn with path, or, when path is too long for a socket
// address, with /proc/self/fd/N/NAME, N an open descriptor of its
// directory: a state dir deep in the file system still has its socket.
func shortPath(path string, fn func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
}

// dialUnix connects to the unix socket at path (of any length).
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := shortPath(path, func(addr string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", addr)
		return err
	})
	return c, err
}
