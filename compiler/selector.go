package compiler

import (
	"cmp"
	"hash/maphash"
	"slices"

	"netspec.dev/netspec/schema"
)

// podIndex finds the pods a label selector matches without scanning every
// pod for every Service: pods are indexed by namespace and label, and a
// selector scans only the pods of its rarest label. Only the label keys
// that selectors use are indexed (a pod's other labels, such as
// pod-template-hash, would cost a memo an entry each and find nothing).
type podIndex struct {
	// keys counts, for each label key of the selectors of the tree's
	// selecting Services, the Services whose selector has it: the keys
	// byLabel indexes.
	keys map[string]int
	// byLabel lists the pods by the labelHash of their namespace and each
	// of their labels of an indexed key, in object order, each pod once.
	// A list may hold pods of another namespace and label whose hash is
	// the same: selectPods checks what it finds.
	byLabel map[uint64][]podEntry
	// selected remembers the pods of each Service's selector: the checks
	// select them once (remember), compiling reads them back. It is
	// written only before the compile's goroutines start.
	selected map[*schema.Service][]*schema.Pod
}

// hashSeed seeds the hashes that key the compiler's indexes of objects.
var hashSeed = maphash.MakeSeed()

// hashMask is and-ed to those hashes: tests narrow it to make different
// names collide.
var hashMask = ^uint64(0)

// labelHash hashes a namespace and a label, for the indexes of pods and
// selectors: a uint64 is a smaller map key than the three strings (a
// memo keeps one per pod label), and the lists it finds are checked.
func labelHash(namespace, key, value string) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(namespace)
	h.WriteByte(0)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(value)
	return h.Sum64() & hashMask
}

// podEntry is a pod of a podIndex list with its rank: ranks grow with the
// object order, so that a memo can insert a pod in its place.
type podEntry struct {
	rank uint64
	pod  *schema.Pod
}

func newPodIndex(objs []*schema.Object) *podIndex {
	idx := emptyPodIndex()
	for _, o := range objs {
		if selects(o) {
			idx.count(o.Service, 1)
		}
	}
	for i, o := range objs {
		if p := o.Pod; p != nil {
			for k, v := range p.Metadata.Labels.All() {
				if idx.keys[k] == 0 {
					continue
				}
				h := labelHash(p.Metadata.Namespace, k, v)
				l := idx.byLabel[h]
				if n := len(l); n > 0 && l[n-1].pod == p {
					continue // another label of p with the same hash
				}
				idx.byLabel[h] = append(l, podEntry{uint64(i), p})
			}
		}
	}
	return idx
}

func emptyPodIndex() *podIndex {
	return &podIndex{keys: map[string]int{}, byLabel: map[uint64][]podEntry{}, selected: map[*schema.Service][]*schema.Pod{}}
}

// count adds d to the counts of the keys of svc's selector. A key whose
// count becomes 0 is no longer in keys; which keys are indexed changes
// only with addKey and dropKey.
func (idx *podIndex) count(svc *schema.Service, d int) {
	for k := range svc.Spec.Selector.All() {
		if n := idx.keys[k] + d; n == 0 {
			delete(idx.keys, k)
		} else {
			idx.keys[k] = n
		}
	}
}

// add indexes the labels of p with a key in keys. No pod of the index
// has p's rank, unless it is p.
func (idx *podIndex) add(p *schema.Pod, rank uint64) {
	for k, v := range p.Metadata.Labels.All() {
		if idx.keys[k] > 0 {
			idx.addLabel(p, rank, labelHash(p.Metadata.Namespace, k, v))
		}
	}
}

// addLabel puts p into the list of h, unless it is there.
func (idx *podIndex) addLabel(p *schema.Pod, rank uint64, h uint64) {
	l := idx.byLabel[h]
	i, found := slices.BinarySearchFunc(l, rank, func(e podEntry, r uint64) int { return cmp.Compare(e.rank, r) })
	if !found { // found: p is there, for another label with the same hash
		idx.byLabel[h] = slices.Insert(l, i, podEntry{rank, p})
	}
}

// addKey indexes the label key k of the pods of states, now that keys
// has it.
func (idx *podIndex) addKey(k string, states []*objState) {
	for _, st := range states {
		if p := st.obj.Pod; p != nil {
			if v, ok := p.Metadata.Labels.Lookup(k); ok {
				idx.addLabel(p, st.rank, labelHash(p.Metadata.Namespace, k, v))
			}
		}
	}
}

// dropKey forgets the label key k of the pods of states, now that keys
// has it no more: a pod stays in a list whose hash another of its
// indexed labels has.
func (idx *podIndex) dropKey(k string, states []*objState) {
	done := map[uint64]bool{}
	for _, st := range states {
		p := st.obj.Pod
		if p == nil {
			continue
		}
		v, ok := p.Metadata.Labels.Lookup(k)
		if !ok {
			continue
		}
		h := labelHash(p.Metadata.Namespace, k, v)
		if done[h] {
			continue
		}
		done[h] = true
		l := slices.DeleteFunc(idx.byLabel[h], func(e podEntry) bool { return !idx.indexedUnder(e.pod, h) })
		if len(l) == 0 {
			delete(idx.byLabel, h)
		} else {
			idx.byLabel[h] = l
		}
	}
}

// indexedUnder tells whether a label of p with a key in keys has the
// hash h.
func (idx *podIndex) indexedUnder(p *schema.Pod, h uint64) bool {
	for k, v := range p.Metadata.Labels.All() {
		if idx.keys[k] > 0 && labelHash(p.Metadata.Namespace, k, v) == h {
			return true
		}
	}
	return false
}

// remove forgets p, added with rank, under every label it has.
func (idx *podIndex) remove(p *schema.Pod, rank uint64) {
	for k, v := range p.Metadata.Labels.All() {
		h := labelHash(p.Metadata.Namespace, k, v)
		l := idx.byLabel[h]
		i, ok := slices.BinarySearchFunc(l, rank, func(e podEntry, r uint64) int { return cmp.Compare(e.rank, r) })
		if !ok || l[i].pod != p {
			continue // a label not indexed, or p removed already for another label with the same hash
		}
		if len(l) == 1 {
			delete(idx.byLabel, h)
		} else {
			idx.byLabel[h] = slices.Delete(l, i, i+1)
		}
	}
}

// selectPods returns the pods of namespace ns that carry every label of
// sel, in object order; sel's keys are keys of the index (those of a
// selecting Service of the tree). An empty selector selects nothing, as
// for Services.
func (idx *podIndex) selectPods(ns string, sel schema.StringMap) []*schema.Pod {
	var best []podEntry
	first := true
	for k, v := range sel.All() {
		l := idx.byLabel[labelHash(ns, k, v)]
		if first || len(l) < len(best) {
			best, first = l, false
		}
	}
	var out []*schema.Pod
	for _, e := range best {
		if e.pod.Metadata.Namespace == ns && matches(sel, e.pod.Metadata.Labels) {
			out = append(out, e.pod)
		}
	}
	return out
}

// remember selects the pods of svc and remembers them for servicePods.
func (idx *podIndex) remember(svc *schema.Service) []*schema.Pod {
	pods := idx.selectPods(svc.Metadata.Namespace, svc.Spec.Selector)
	idx.selected[svc] = pods
	return pods
}

// servicePods returns the pods of svc's selector, remembered or selected
// now: svc is a selecting Service of the tree (selects), whose label keys
// the index has. It only reads the index, so compile's goroutines may
// share it.
func (idx *podIndex) servicePods(svc *schema.Service) []*schema.Pod {
	if pods, ok := idx.selected[svc]; ok {
		return pods
	}
	return idx.selectPods(svc.Metadata.Namespace, svc.Spec.Selector)
}

// matches reports whether labels carry every key and value of sel.
func matches(sel, labels schema.StringMap) bool {
	for k, v := range sel.All() {
		if l, ok := labels.Lookup(k); !ok || l != v {
			return false
		}
	}
	return true
}
