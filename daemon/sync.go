package daemon

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/compiler"
	"netspec.dev/netspec/daemon/dnsserver"
	"netspec.dev/netspec/internal/diag"
	"netspec.dev/netspec/plan"
	"netspec.dev/netspec/schema"
)

// Why a sync runs.
type syncReason int

const (
	syncStart   syncReason = iota // the first sync
	syncChange                    // files changed
	syncReload                    // Reload (SIGHUP)
	syncResync                    // the periodic resync
	syncProbe                     // a readiness check flipped
	syncRemoval                   // the removal grace of objects that left the tree passed
)

func (r syncReason) String() string {
	return [...]string{"start", "change", "reload", "resync", "probe", "removal"}[r]
}

// partial tells whether a sync for r is applied by difference with what
// was installed: a file change, a probe flip, a removal due. The first
// sync, SIGHUP and the resync read the kernel back (kind full).
func (r syncReason) partial() bool {
	return r == syncChange || r == syncProbe || r == syncRemoval
}

// sync reads the tree and applies its plan: by difference (Update) after
// a change, reading the kernel back (Apply) at the first sync, at a
// reload (SIGHUP), at a resync and after a failure. An invalid tree
// leaves everything as it is; a resync then applies the last good plan
// again, repairing drift. since is the time of the first file event that
// led here (zero if none).
//
// Its steps: read the tree (read), decide what to apply (decide), apply
// it (apply) and report (report). The kernel comes first: it is
// programmed from the plan's Services, and only then are the DNS records
// and env files worked out (compiler.Staged) and the state dir and DNS
// answers updated.
func (w *Watcher) sync(why syncReason, since time.Time) {
	if !w.probeSync(why) {
		return
	}
	out := &SyncStatus{Reason: why.String(), Result: ResultInvalid}
	began := time.Now()
	w.gc.begin()
	var rd reading
	defer func() { w.endSync(out, began, rd) }()
	rd = w.read(why)
	st, rev := w.decide(why, rd, out)
	if st == nil && (w.good == nil || why != syncResync) {
		// Nothing good to apply yet, or the tree is not good: only a
		// resync applies the last good plan again (to repair drift).
		return
	}
	w.apply(why, since, rd, st, rev, out, began)
}

// probeSync refreshes the probes' view before a sync, and tells whether
// the sync is to run: a probe sync for a flip that flipped back, or
// before any plan was applied, is not.
func (w *Watcher) probeSync(why syncReason) bool {
	if w.probes == nil {
		return true
	}
	flipped := w.probes.refresh()
	viewed := w.fleet != nil && w.probes.setFleet(w.fleet.View())
	if why == syncProbe {
		if !flipped && !viewed {
			return false // flipped and back before this sync
		}
		if w.good == nil {
			// Nothing applied yet (the first reading failed): the
			// checks are not set before a plan is.
			return false
		}
		// With the tree invalid, the flip applies to the last good
		// plan (its reading compiled again with the new view): the
		// kubelet and kube-proxy act on readiness whatever is pushed,
		// and so does the node. The invalid tree never gets here.
	}
	w.loader.view = w.probes.view()
	return true
}

// endSync ends every sync: it records it in the status, publishes the
// status and arms the timer of the next removal due.
func (w *Watcher) endSync(out *SyncStatus, began time.Time, rd reading) {
	out.Ended = time.Now().UTC().Truncate(time.Millisecond)
	out.DurationSeconds = time.Since(began).Seconds()
	w.cur.LastSync = out
	w.pendingRemoval((rd.res != nil || rd.err != nil) && !rd.restaged)
	w.publishStatus()
	if w.probes != nil {
		// Done now, not by the next probe flip.
		w.loader.memo.IndexProbes()
	}
}

// reading is the read step's result: a reading of the tree (or, for a
// probe flip, the last good one restaged), or why there is none.
type reading struct {
	res      *loadResult
	err      error
	restaged bool // res is the last good reading compiled again with the probes' view
}

// read reads the tree: the files changed (loader.changed), the whole
// tree, or for a probe flip nothing (the last good reading restaged).
func (w *Watcher) read(why syncReason) reading {
	if why == syncResync {
		// A resync works the tree out from scratch, so that a missed
		// change cannot outlive it.
		w.loader.memo = compiler.NewMemo()
	}
	var rd reading
	if why == syncProbe {
		// Nothing below the tree changed: the last reading's Services
		// are compiled again with the new view, only those whose
		// endpoints flipped at any cost.
		rd.res, rd.restaged = w.loader.restage()
		if !rd.restaged {
			w.loader.changed = []string{} // read no file
		}
	}
	if !rd.restaged {
		rd.res, rd.err = w.loader.load()
	}
	if rd.res != nil && !rd.restaged {
		// A restage is the last good reading again: its warnings were
		// logged when it was read.
		w.logWarnings(rd.res.diags)
	}
	return rd
}

// decide judges a reading: the staged plan to apply, or nil to keep the
// last good one (the tree is invalid or cannot be read: logged, and in
// the status and metrics); and the revision of the tree read, when it
// is valid and was read.
func (w *Watcher) decide(why syncReason, rd reading, out *SyncStatus) (*compiler.Staged, Revision) {
	// What an invalid tree leaves in place: the last good state, or, when
	// nothing was applied yet (the first reading failed), whatever the
	// kernel and the state dir hold.
	keeping := "keeping last good state"
	if w.good == nil {
		keeping = "nothing applied yet: the kernel and the state dir stay as they are"
	}
	res, err := rd.res, rd.err
	var st *compiler.Staged
	switch {
	case rd.restaged && w.invalid:
		// A probe flip while the tree is invalid: the last good reading
		// with the new view. The tree stays invalid (its state, metrics
		// and log as they are).
		return res.plan, Revision{}
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
		return nil, Revision{}
	case res.errors > 0:
		w.invalid = true
		w.metrics.tree(res.errors)
		w.cur.TreeState = TreeStatus{Errors: res.errors, FirstError: res.firstError()}
		w.log.Error("tree invalid, "+keeping, "reason", why.String(), "errors", res.errors, "first", res.firstError())
		w.logErrors(res)
		return nil, Revision{}
	}
	if w.invalid {
		w.invalid = false
		w.log.Info("tree valid again", "reason", why.String())
	}
	w.metrics.tree(0)
	w.cur.TreeState = TreeStatus{Valid: true}
	st = res.plan
	if rd.restaged {
		return st, Revision{}
	}
	if w.probes != nil {
		w.probes.execPods = schema.ExecPodsByKey(res.tree.Objects)
	}
	w.logRemovals(res)
	rev, revErr := w.loader.revision(res)
	if msg := fmt.Sprint(revErr); revErr != nil && msg != w.revErr {
		w.log.Warn("cannot read the tree's git commit; its revision is a hash of its content", "err", revErr)
	}
	w.revErr = ""
	if revErr != nil {
		w.revErr = revErr.Error()
	}
	return st, rev
}

// logErrors logs the errors of an invalid reading after the first (which
// the line saying the tree is invalid has), ten at most.
func (w *Watcher) logErrors(res *loadResult) {
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
}

// next is the plan a sync applies: the kernel is programmed from
// kernel; finish completes it (DNS records, env files) into applied.
type next struct {
	kernel  *plan.Plan
	applied *plan.Plan
	finish  func() (*plan.Plan, error)
	// changed tells that it differs from the last good plan.
	changed bool
}

// nextPlan is what applying st (nil: the last good plan again) means.
func (w *Watcher) nextPlan(st *compiler.Staged) *next {
	n := &next{kernel: w.good, applied: w.good}
	n.finish = func() (*plan.Plan, error) { return n.applied, nil }
	if st == nil {
		return n
	}
	n.kernel = st.Plan
	n.changed = w.good == nil || !plan.SameDataplane(w.good, st.Plan)
	if !n.changed {
		// The rules stay; the names (DNS, env) may not.
		n.changed = !w.good.Equal(st.Finish())
	}
	n.finish = func() (*plan.Plan, error) {
		q := st.Finish()
		if w.dns != nil && (w.good == nil || !w.good.DNS.Equal(q.DNS) || !dnsserver.SameCluster(w.good, q)) {
			recs, err := dnsserver.Compile(q.DNS, dnsserver.ClusterOf(q))
			if err != nil {
				// A compiler bug: the old answers stay.
				return nil, fmt.Errorf("dns records do not compile: %w", err)
			}
			w.publish = recs
		}
		n.applied = q
		return q, nil
	}
	return n
}

// apply applies st (nil: the last good plan, at a resync) to the node,
// and on success reports it (report).
func (w *Watcher) apply(why syncReason, since time.Time, rd reading, st *compiler.Staged, rev Revision, out *SyncStatus, began time.Time) {
	res := rd.res
	n := w.nextPlan(st)
	if !n.changed && why.partial() && !w.full {
		// A file changed without changing the plan (a comment, a file
		// outside the plan's node): nothing to do.
		w.log.Debug("plan unchanged", "files", res.files, "validated", res.files-res.cached)
		out.Result = ResultUnchanged
		w.appliedRevision(rev)
		w.committed(rd)
		w.gossip(rd, w.good)
		if w.probes != nil {
			// A check flipped without changing the plan (a Service that
			// fails open, an endpoint no traffic of this node uses).
			w.probeReport(w.good, false, true, st.FailOpen)
		}
		w.fleetReport(w.good)
		return
	}

	// Only a file change, a probe flip or a removal due is applied by
	// difference with what was installed; the first sync, SIGHUP and
	// the resync read the kernel back (and say so: kind full).
	full := w.full || !why.partial()
	kind, applyPlan := "partial", w.node.UpdateStaged
	if full {
		kind, applyPlan = "full", w.node.ApplyStaged
	}
	start := time.Now()
	r, err := applyPlan(n.kernel, n.finish)
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
	if !since.IsZero() && n.changed {
		// The state dir's files (and DNS) follow the kernel.
		programming = r.KernelAt.Sub(since)
		w.metrics.programming.Observe(programming.Seconds())
	}
	w.good = n.applied
	p := n.applied
	out.Kind, out.Result = kind, ResultApplied
	if st != nil {
		w.appliedRevision(rev)
		w.committed(rd)
		w.gossip(rd, p) // not for a resync of the last good plan: its reading is invalid
	}
	if w.probes != nil {
		var failOpen []string
		if st != nil {
			failOpen = st.FailOpen
		}
		w.probeReport(p, why != syncProbe, st != nil, failOpen)
	}
	w.fleetReport(p)
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
	w.report(why, kind, r, p, n.changed, res, out, timing{began: began, apply: took, programming: programming})
}

// committed records the objects of a reading whose plan the node now
// holds, for the removals of the next readings.
func (w *Watcher) committed(rd reading) {
	if rd.res != nil && !rd.restaged {
		w.loader.removals.commit(rd.res.tree.Objects, rd.res.held)
	}
}

// timing is how long a sync's parts took.
type timing struct {
	began       time.Time     // the sync's start
	apply       time.Duration // programming the kernel and writing the state dir
	programming time.Duration // file event (or probe flip) → kernel updated; 0: neither
}

// report logs a sync applied, and counts a drift repair: a resync or
// SIGHUP that changed the kernel or the state dir although the plan had
// not changed.
func (w *Watcher) report(why syncReason, kind string, r *applier.Result, p *plan.Plan, changed bool, res *loadResult, out *SyncStatus, tm timing) {
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
		"took", time.Since(tm.began).Round(time.Millisecond), "apply", tm.apply.Round(time.Millisecond)}
	if res != nil {
		attrs = append(attrs, "validated_files", res.files-res.cached)
	}
	if tm.programming > 0 {
		attrs = append(attrs, "programming_latency", tm.programming.Round(time.Millisecond))
	}
	repairs := why == syncResync || why == syncReload
	switch {
	case repairs && !changed && !r.Empty():
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

// logRemovals logs what a valid reading did to the objects that left
// the tree: those newly held for their grace, those back (removal
// cancelled), and those removed at once because holding them would make
// the tree invalid.
func (w *Watcher) logRemovals(res *loadResult) {
	if len(res.back) > 0 {
		w.log.Info("removal cancelled: objects back in the tree within the removal grace", "objects", keyList(res.back))
	}
	if len(res.unheld) > 0 {
		w.log.Warn("objects that left the tree removed at once: with them held, the tree would be invalid",
			"objects", keyList(keysOf(res.unheld)))
	}
	var fresh []objectKey
	for _, o := range res.held {
		if k := keyOf(o); !w.heldLogged[k] {
			fresh = append(fresh, k)
		}
	}
	w.heldLogged = map[objectKey]bool{}
	for _, o := range res.held {
		w.heldLogged[keyOf(o)] = true
	}
	if len(fresh) > 0 {
		w.log.Info("objects left the tree: they stay applied for the removal grace, unless they come back",
			"objects", keyList(fresh), "grace", w.loader.removals.grace)
	}
}

func keysOf(objs []*schema.Object) []objectKey {
	keys := make([]objectKey, len(objs))
	for i, o := range objs {
		keys[i] = keyOf(o)
	}
	return keys
}

// keyList names keys for a log line, ten at most.
func keyList(keys []objectKey) string {
	var b strings.Builder
	for i, k := range keys {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(keys)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.String())
	}
	return b.String()
}

// pendingRemoval puts the removals waiting for their grace in the status
// and the metrics, and, after a sync that read the tree, arms the timer
// of the next one due. A removal due when the tree was read was dealt
// with by that reading: applied, or kept because the tree is invalid (the
// reading that makes it valid applies it): it arms nothing, or the timer
// would fire at once, again and again.
func (w *Watcher) pendingRemoval(read bool) {
	p := w.loader.removals.pending()
	w.cur.PendingRemoval = nil
	if p != nil {
		// The status's times as its others; the timer's exact.
		w.cur.PendingRemoval = &PendingRemoval{Objects: p.Objects,
			Since: p.Since.UTC().Truncate(time.Millisecond), Due: p.Due.UTC().Truncate(time.Millisecond)}
	}
	w.metrics.removalPending(p)
	if !read {
		return // the timer stays as it was
	}
	if p == nil || !p.Due.After(w.loader.readAt) {
		w.removalTimer.Stop()
		return
	}
	w.removalTimer.Reset(max(p.Due.Sub(w.loader.now()), 0))
}
