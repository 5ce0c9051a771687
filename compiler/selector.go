package compiler

import (
	"cmp"
	"slices"

	"netspec.dev/netspec/schema"
)

// podIndex finds the pods a label selector matches without scanning every
// pod for every Service: pods are indexed by namespace and label, and a
// selector scans only the pods of its rarest label.
type podIndex struct {
	byLabel map[labelKey][]podEntry // in object order
	// selected remembers the pods of each Service's selector: the checks
	// select them once (remember), compiling reads them back. It is
	// written only before the compile's goroutines start.
	selected map[*schema.Service][]*schema.Pod
}

type labelKey struct {
	namespace, key, value string
}

// podEntry is a pod of a podIndex list with its rank: ranks grow with the
// object order, so that a memo can insert a pod in its place.
type podEntry struct {
	rank uint64
	pod  *schema.Pod
}

func newPodIndex(objs []*schema.Object) *podIndex {
	idx := emptyPodIndex()
	for i, o := range objs {
		if p := o.Pod; p != nil {
			for k, v := range p.Metadata.Labels.All() {
				lk := labelKey{p.Metadata.Namespace, k, v}
				idx.byLabel[lk] = append(idx.byLabel[lk], podEntry{uint64(i), p})
			}
		}
	}
	return idx
}

func emptyPodIndex() *podIndex {
	return &podIndex{byLabel: map[labelKey][]podEntry{}, selected: map[*schema.Service][]*schema.Pod{}}
}

// add indexes p, whose rank is that of no pod of the index.
func (idx *podIndex) add(p *schema.Pod, rank uint64) {
	for k, v := range p.Metadata.Labels.All() {
		lk := labelKey{p.Metadata.Namespace, k, v}
		l := idx.byLabel[lk]
		i, _ := slices.BinarySearchFunc(l, rank, func(e podEntry, r uint64) int { return cmp.Compare(e.rank, r) })
		idx.byLabel[lk] = slices.Insert(l, i, podEntry{rank, p})
	}
}

// remove forgets p, added with rank.
func (idx *podIndex) remove(p *schema.Pod, rank uint64) {
	for k, v := range p.Metadata.Labels.All() {
		lk := labelKey{p.Metadata.Namespace, k, v}
		l := idx.byLabel[lk]
		i, ok := slices.BinarySearchFunc(l, rank, func(e podEntry, r uint64) int { return cmp.Compare(e.rank, r) })
		if !ok || l[i].pod != p {
			continue // not indexed: cannot happen
		}
		if len(l) == 1 {
			delete(idx.byLabel, lk)
		} else {
			idx.byLabel[lk] = slices.Delete(l, i, i+1)
		}
	}
}

// selectPods returns the pods of namespace ns that carry every label of
// sel, in object order. An empty selector selects nothing, as for Services.
func (idx *podIndex) selectPods(ns string, sel schema.StringMap) []*schema.Pod {
	var best []podEntry
	first := true
	for k, v := range sel.All() {
		l := idx.byLabel[labelKey{ns, k, v}]
		if first || len(l) < len(best) {
			best, first = l, false
		}
	}
	var out []*schema.Pod
	for _, e := range best {
		if matches(sel, e.pod.Metadata.Labels) {
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
// now. It only reads the index, so compile's goroutines may share it.
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
