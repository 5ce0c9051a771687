package compiler

import "netspec.dev/netspec/schema"

// podIndex finds the pods a label selector matches without scanning every
// pod for every Service: pods are indexed by namespace and label, and a
// selector scans only the pods of its rarest label.
type podIndex struct {
	byLabel map[labelKey][]*schema.Pod // in object order
	// selected remembers the pods of each Service's selector: the checks
	// select them once (remember), compiling reads them back. It is
	// written only before the compile's goroutines start.
	selected map[*schema.Service][]*schema.Pod
}

type labelKey struct {
	namespace, key, value string
}

func newPodIndex(objs []*schema.Object) *podIndex {
	idx := &podIndex{byLabel: map[labelKey][]*schema.Pod{}, selected: map[*schema.Service][]*schema.Pod{}}
	for _, o := range objs {
		if p := o.Pod; p != nil {
			for k, v := range p.Metadata.Labels {
				lk := labelKey{p.Metadata.Namespace, k, v}
				idx.byLabel[lk] = append(idx.byLabel[lk], p)
			}
		}
	}
	return idx
}

// selectPods returns the pods of namespace ns that carry every label of
// sel, in object order. An empty selector selects nothing, as for Services.
func (idx *podIndex) selectPods(ns string, sel map[string]string) []*schema.Pod {
	var best []*schema.Pod
	first := true
	for k, v := range sel {
		l := idx.byLabel[labelKey{ns, k, v}]
		if first || len(l) < len(best) {
			best, first = l, false
		}
	}
	var out []*schema.Pod
	for _, p := range best {
		if matches(sel, p.Metadata.Labels) {
			out = append(out, p)
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
func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}
