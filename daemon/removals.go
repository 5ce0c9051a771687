package daemon

import (
	"slices"
	"strings"
	"time"

	"netspec.dev/netspec/schema"
)

// DefaultRemovalGrace is how long an object that left the tree stays
// applied (Options.RemovalGrace).
const DefaultRemovalGrace = 2 * time.Second

// objectKey is an object's identity: kind, namespace and name, not the
// file it is in, so that an object moved to another file is not a
// removal.
type objectKey struct{ kind, namespace, name string }

func keyOf(o *schema.Object) objectKey {
	m := o.Meta()
	return objectKey{o.Kind, m.Namespace, m.Name}
}

// String is kind/namespace/name (kind/name when not namespaced).
func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind + "/" + k.name
	}
	return k.kind + "/" + k.namespace + "/" + k.name
}

func (k objectKey) compare(o objectKey) int {
	return strings.Compare(k.kind+"\x00"+k.namespace+"\x00"+k.name, o.kind+"\x00"+o.namespace+"\x00"+o.name)
}

// removals delays the removal of objects that left the tree: an editor
// that renames a file away and writes the new one a moment later, or a
// checkout that deletes a file before it writes the one an object moved
// to, would otherwise take a Service out of the kernel and DNS in
// between. An object of the last tree applied that a reading lacks (by
// identity) is held, compiled into the plan as it was, until grace has
// passed since it went missing; its return within the grace cancels the
// removal. Additions and edits are applied at once.
//
// It is pure: the times are given, so that tests need no clock.
type removals struct {
	grace time.Duration // ≤ 0: nothing is held
	// applied are the objects of the last plan applied, held ones
	// included, by identity.
	applied map[objectKey]*schema.Object
	// missing are the objects of applied that a reading lacked, and
	// since when (the first reading that lacked them).
	missing map[objectKey]time.Time
}

func newRemovals(grace time.Duration) *removals {
	return &removals{grace: grace, missing: map[objectKey]time.Time{}}
}

// hold returns the objects of the last tree applied that objs (a
// reading's objects) lack and whose grace has not passed at now, sorted
// by identity, and the identities that were missing and are back
// (cancelled removals), sorted.
func (r *removals) hold(objs []*schema.Object, now time.Time) (held []*schema.Object, back []objectKey) {
	if r.grace <= 0 || len(r.applied) == 0 {
		return nil, nil
	}
	present := make(map[objectKey]bool, len(objs))
	for _, o := range objs {
		present[keyOf(o)] = true
	}
	for k := range r.missing {
		if present[k] {
			back = append(back, k)
			delete(r.missing, k)
		}
	}
	var keys []objectKey
	for k := range r.applied {
		if present[k] {
			continue
		}
		since, ok := r.missing[k]
		if !ok {
			since = now
			r.missing[k] = now
		}
		if now.Before(since.Add(r.grace)) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, objectKey.compare)
	slices.SortFunc(back, objectKey.compare)
	for _, k := range keys {
		held = append(held, r.applied[k])
	}
	return held, back
}

// commit records objs as the objects of the plan applied (held ones
// included): an object missing that is not among them has been removed.
func (r *removals) commit(objs []*schema.Object) {
	r.applied = make(map[objectKey]*schema.Object, len(objs))
	for _, o := range objs {
		r.applied[keyOf(o)] = o
	}
	for k := range r.missing {
		if _, ok := r.applied[k]; !ok {
			delete(r.missing, k)
		}
	}
}

// PendingRemoval describes the objects held: how many, since when the
// first went missing, and when the next is due to go.
type PendingRemoval struct {
	Objects int       `json:"objects"`
	Since   time.Time `json:"since"`
	Due     time.Time `json:"due"`
}

// pending describes the removals that wait for their grace; nil when
// none does.
func (r *removals) pending() *PendingRemoval {
	var p *PendingRemoval
	for k, since := range r.missing {
		if _, ok := r.applied[k]; !ok {
			continue
		}
		due := since.Add(r.grace)
		if p == nil {
			p = &PendingRemoval{Since: since, Due: due}
		}
		p.Objects++
		if since.Before(p.Since) {
			p.Since = since
		}
		if due.Before(p.Due) {
			p.Due = due
		}
	}
	return p
}
