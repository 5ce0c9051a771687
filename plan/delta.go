package plan

// Delta is the change from one Plan to the next, small when the change is:
// the Services, DNS records and env variables that were added, changed or
// removed, by position. A node keeps its last applied plan as a base plus
// the Deltas applied since (the state dir's plan.json and plan.log), so
// that a reload writes what it changed, not the whole plan.
//
// Positions make a Delta independent of the order the compiler sorts
// lists in: Apply gives back the new Plan exactly, lists in the same order,
// whatever that order is. A Delta applies only to the Plan it was made
// from.
type Delta struct {
	FormatVersion int
	Node          Node
	Cluster       Cluster
	Services      ListDelta[Service]
	// Zones has one entry per zone of the new plan, in its order: the
	// change of the old plan's zone of that name (all records added when
	// it had none). Zones of the old plan not named are gone.
	Zones []ZoneDelta
	// Env has one entry per env file of the new plan, in its order, as
	// Zones.
	Env []EnvDelta
}

// ZoneDelta is the change of one zone's records.
type ZoneDelta struct {
	Name    string
	Records ListDelta[Record]
}

// EnvDelta is the change of one namespace's variables.
type EnvDelta struct {
	Namespace string
	Vars      ListDelta[EnvVar]
}

// ListDelta turns an old list into a new one: drop the old items at
// Removed (ascending indices of the old list), then insert Added[k] at
// index At[k] of the new list (ascending).
type ListDelta[T any] struct {
	Removed []int
	At      []int
	Added   []T
}

// Empty tells whether the list does not change.
func (l *ListDelta[T]) Empty() bool { return len(l.Removed) == 0 && len(l.Added) == 0 }

// Diff is the Delta that turns old into new. old nil is the empty plan.
func Diff(old, new *Plan) *Delta {
	if old == nil {
		old = &Plan{}
	}
	d := &Delta{FormatVersion: new.FormatVersion, Node: new.Node, Cluster: new.Cluster}
	// Keyed by namespace and name without joining them: the kept ends
	// of a list of 10,000 Services are compared on every reload.
	d.Services = diffList(old.Services, new.Services, func(s *Service) [2]string { return [2]string{s.Namespace, s.Name} },
		func(a, b *Service) bool { return a.Equal(b) })
	oldZones := make(map[string]int, len(old.DNS.Zones))
	for i, z := range old.DNS.Zones {
		oldZones[z.Name] = i
	}
	for _, z := range new.DNS.Zones {
		var prev []Record
		if i, ok := oldZones[z.Name]; ok {
			prev = old.DNS.Zones[i].Records
		}
		d.Zones = append(d.Zones, ZoneDelta{Name: z.Name, Records: diffList(prev, z.Records,
			func(r *Record) Record { return *r }, func(a, b *Record) bool { return true })})
	}
	oldEnv := make(map[string]int, len(old.Env))
	for i, f := range old.Env {
		oldEnv[f.Namespace] = i
	}
	for _, f := range new.Env {
		var prev []EnvVar
		if i, ok := oldEnv[f.Namespace]; ok {
			prev = old.Env[i].Vars
		}
		d.Env = append(d.Env, EnvDelta{Namespace: f.Namespace, Vars: diffList(prev, f.Vars,
			func(v *EnvVar) string { return v.Name }, func(a, b *EnvVar) bool { return a.Value == b.Value })})
	}
	return d
}

// diffList is the ListDelta from old to new, whose items are told apart
// by key and compared by eq. An item kept must keep its place relative to
// the other kept ones; one that moves is removed and added. Repeated keys
// make the whole list replaced.
func diffList[T any, K comparable](old, new []T, key func(*T) K, eq func(a, b *T) bool) ListDelta[T] {
	same := func(i, j int) bool { return key(&old[i]) == key(&new[j]) && eq(&old[i], &new[j]) }
	// The ends that did not change are kept as they are: only the middle
	// is looked up by key.
	pre := 0
	for pre < len(old) && pre < len(new) && same(pre, pre) {
		pre++
	}
	suf := 0
	for suf < len(old)-pre && suf < len(new)-pre && same(len(old)-1-suf, len(new)-1-suf) {
		suf++
	}
	d := diffMiddle(old[pre:len(old)-suf], new[pre:len(new)-suf], key, eq)
	for i := range d.Removed {
		d.Removed[i] += pre
	}
	for i := range d.At {
		d.At[i] += pre
	}
	return d
}

func diffMiddle[T any, K comparable](old, new []T, key func(*T) K, eq func(a, b *T) bool) ListDelta[T] {
	var d ListDelta[T]
	if len(old) == 0 && len(new) == 0 {
		return d
	}
	at := make(map[K]int, len(old))
	for i := range old {
		k := key(&old[i])
		if _, dup := at[k]; dup {
			return replaceList(old, new)
		}
		at[k] = i
	}
	kept := make([]bool, len(old))
	last := -1
	seen := make(map[K]bool, len(new))
	for i := range new {
		k := key(&new[i])
		if seen[k] {
			return replaceList(old, new)
		}
		seen[k] = true
		if j, ok := at[k]; ok && j > last && eq(&old[j], &new[i]) {
			kept[j] = true
			last = j
			continue
		}
		d.At = append(d.At, i)
		d.Added = append(d.Added, new[i])
	}
	for j, k := range kept {
		if !k {
			d.Removed = append(d.Removed, j)
		}
	}
	return d
}

func replaceList[T any](old, new []T) ListDelta[T] {
	var d ListDelta[T]
	for j := range old {
		d.Removed = append(d.Removed, j)
	}
	for i := range new {
		d.At = append(d.At, i)
	}
	d.Added = append(d.Added, new...)
	return d
}

// Apply returns the plan d turns old into (old nil: the empty plan); old is
// not changed. It fails when d does not fit old, which means d was made
// from another plan.
func (d *Delta) Apply(old *Plan) (*Plan, error) {
	if old == nil {
		old = &Plan{}
	}
	p := &Plan{FormatVersion: d.FormatVersion, Node: d.Node, Cluster: d.Cluster}
	var err error
	if p.Services, err = d.Services.apply(old.Services); err != nil {
		return nil, errDelta("services", err)
	}
	oldZones := make(map[string]int, len(old.DNS.Zones))
	for i, z := range old.DNS.Zones {
		oldZones[z.Name] = i
	}
	for _, zd := range d.Zones {
		var prev []Record
		if i, ok := oldZones[zd.Name]; ok {
			prev = old.DNS.Zones[i].Records
		}
		recs, err := zd.Records.apply(prev)
		if err != nil {
			return nil, errDelta("zone "+zd.Name, err)
		}
		p.DNS.Zones = append(p.DNS.Zones, Zone{Name: zd.Name, Records: recs})
	}
	oldEnv := make(map[string]int, len(old.Env))
	for i, f := range old.Env {
		oldEnv[f.Namespace] = i
	}
	for _, ed := range d.Env {
		var prev []EnvVar
		if i, ok := oldEnv[ed.Namespace]; ok {
			prev = old.Env[i].Vars
		}
		vars, err := ed.Vars.apply(prev)
		if err != nil {
			return nil, errDelta("env "+ed.Namespace, err)
		}
		p.Env = append(p.Env, EnvFile{Namespace: ed.Namespace, Vars: vars})
	}
	return p, nil
}

// apply turns old into the new list; an unchanged list is old itself.
func (l *ListDelta[T]) apply(old []T) ([]T, error) {
	if l.Empty() {
		return old, nil
	}
	if len(l.At) != len(l.Added) {
		return nil, errorString("positions and items differ in number")
	}
	if len(l.Removed) > len(old) {
		return nil, errorString("removes more items than the list has")
	}
	out := make([]T, 0, len(old)-len(l.Removed)+len(l.Added))
	prev := -1
	next := 0 // index into Removed
	for j := range old {
		if next < len(l.Removed) && l.Removed[next] == j {
			next++
			continue
		}
		out = append(out, old[j])
	}
	if next != len(l.Removed) {
		return nil, errorString("removes an item the list does not have")
	}
	for k, i := range l.At {
		if i <= prev || i > len(out) {
			return nil, errorString("adds an item out of place")
		}
		prev = i
		out = append(out, l.Added[k]) // grow by one, then shift
		copy(out[i+1:], out[i:len(out)-1])
		out[i] = l.Added[k]
	}
	return out, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

func errDelta(what string, err error) error {
	return errorString("plan delta does not fit the plan (" + what + ": " + err.Error() + ")")
}
