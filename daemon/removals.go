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
// between. An object of the last plan applied that a reading lacks (by
// identity) is held, compiled into the plan as it was, until grace has
// passed since the first reading that lacked it; its return within the
// grace cancels the removal. Additions and edits are applied at once.
//
// A reload must not pay for the whole tree: a reading is compared with
// the objects of the last plan applied by pointer (the schema's cache
// gives an unchanged file's objects again), and only the objects between
// their common prefix and suffix, those of the files that changed, are
// compared by identity. It is pure: the times are given, so that tests
// need no clock.
type removals struct {
	grace time.Duration // ≤ 0: nothing is held
	// applied are the tree's objects in the plan applied last (nil
	// before one is), held those that the plan held, by identity.
	applied []*schema.Object
	held    map[objectKey]*schema.Object
	// since is when each object of the plan applied last that the
	// readings lack was first lacked.
	since map[objectKey]time.Time
}

func newRemovals(grace time.Duration) *removals {
	return &removals{grace: grace, held: map[objectKey]*schema.Object{}, since: map[objectKey]time.Time{}}
}

// hold returns the objects of the last plan applied that objs (a
// reading's objects) lack and whose grace has not passed at now, sorted
// by identity, and the identities that were missing and are back
// (cancelled removals), sorted.
func (r *removals) hold(objs []*schema.Object, now time.Time) (held []*schema.Object, back []objectKey) {
	if r.grace <= 0 || r.applied == nil {
		return nil, nil
	}
	gone, added := middle(r.applied, objs)
	present := make(map[objectKey]bool, len(added))
	for _, o := range added {
		present[keyOf(o)] = true
	}
	// What the plan applied has and objs lacks: an object of the
	// applied tree's changed part not among objs' changed part (the
	// rest is the same objects), or one the plan held and objs lacks.
	missing := map[objectKey]*schema.Object{}
	for _, o := range gone {
		if k := keyOf(o); !present[k] {
			missing[k] = o
		}
	}
	for k, o := range r.held {
		if !present[k] {
			missing[k] = o
		}
	}
	for k := range r.since {
		if _, ok := missing[k]; !ok {
			back = append(back, k)
			delete(r.since, k)
		}
	}
	var keys []objectKey
	for k := range missing {
		since, ok := r.since[k]
		if !ok {
			since = now
			r.since[k] = now
		}
		if now.Before(since.Add(r.grace)) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, objectKey.compare)
	slices.SortFunc(back, objectKey.compare)
	for _, k := range keys {
		held = append(held, missing[k])
	}
	return held, back
}

// middle returns what lies between the longest common prefix and suffix
// of a and b, compared by pointer.
func middle(a, b []*schema.Object) (aMid, bMid []*schema.Object) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return a[p : len(a)-s], b[p : len(b)-s]
}

// commit records the plan applied: made of tree, a reading's objects
// (not changed afterwards), and held, the objects hold returned for it.
// An object missing that is not held has been removed.
func (r *removals) commit(tree, held []*schema.Object) {
	r.applied = tree
	if r.applied == nil {
		r.applied = []*schema.Object{}
	}
	r.held = make(map[objectKey]*schema.Object, len(held))
	for _, o := range held {
		r.held[keyOf(o)] = o
	}
	for k := range r.since {
		if _, ok := r.held[k]; !ok {
			delete(r.since, k)
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

// pending describes the removals that wait for their grace: the objects
// of the plan applied last that the last reading lacks; nil when none
// does.
func (r *removals) pending() *PendingRemoval {
	var p *PendingRemoval
	for _, since := range r.since {
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
