package compiler

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"netspec.dev/netspec/schema"
)

// LockVersion is the netspec.lock format version this package reads and writes.
const LockVersion = 1

// lockHeader opens every lock file written by Marshal.
const lockHeader = "# netspec.lock — cluster IPs and node ports allocated by netspec. Written by `netspec lock`; commit it.\n"

// Lock is the content of netspec.lock: the cluster IPs, node ports and
// health check node port of each Service, recorded so that they never
// move while the Service exists.
// A nil *Lock means the tree has no lock file.
type Lock struct {
	services map[string]lockEntry // by namespace/name
}

// lockEntry is one Service's record; clusterIPs holds at most one address
// per family, IPv4 first.
type lockEntry struct {
	clusterIPs          []netip.Addr
	nodePorts           map[string]int // by port key, such as http/TCP
	healthCheckNodePort int            // 0 when none
}

func (e lockEntry) empty() bool {
	return len(e.clusterIPs) == 0 && len(e.nodePorts) == 0 && e.healthCheckNodePort == 0
}

// ip returns the entry's address of a family.
func (e lockEntry) ip(family string) (netip.Addr, bool) {
	for _, a := range e.clusterIPs {
		if schema.Family(a) == family {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// set stores an entry, IPv4 first; empty entries are not kept.
func (l *Lock) set(key string, e lockEntry) {
	if e.empty() {
		return
	}
	sort.SliceStable(e.clusterIPs, func(i, j int) bool { return e.clusterIPs[i].Is4() && !e.clusterIPs[j].Is4() })
	l.services[key] = e
}

// entry returns a Service's record; the zero entry when there is none.
func (l *Lock) entry(key string) lockEntry {
	if l == nil {
		return lockEntry{}
	}
	return l.services[key]
}

// lockEqual reports whether two locks hold the same entries; a nil lock
// (none) equals only nil.
func lockEqual(a, b *Lock) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return maps.EqualFunc(a.services, b.services, func(x, y lockEntry) bool {
		return slices.Equal(x.clusterIPs, y.clusterIPs) && maps.Equal(x.nodePorts, y.nodePorts) &&
			x.healthCheckNodePort == y.healthCheckNodePort
	})
}

func (l *Lock) keys() []string {
	if l == nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(l.services))
	return keys
}

// Marshal writes the lock as YAML in a fixed layout: Services sorted by
// namespace/name, node ports by key, one value a line, so that a change to
// one Service is a small diff.
func (l *Lock) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(lockHeader)
	fmt.Fprintf(&b, "version: %d\n", LockVersion)
	keys := l.keys()
	if len(keys) == 0 {
		b.WriteString("services: {}\n")
		return b.Bytes()
	}
	b.WriteString("services:\n")
	for _, k := range keys {
		e := l.services[k]
		fmt.Fprintf(&b, "  %s:\n", yamlString(k))
		if len(e.clusterIPs) > 0 {
			ips := make([]string, len(e.clusterIPs))
			for i, a := range e.clusterIPs {
				ips[i] = yamlString(a.String())
			}
			fmt.Fprintf(&b, "    clusterIPs: [%s]\n", strings.Join(ips, ", "))
		}
		if len(e.nodePorts) > 0 {
			b.WriteString("    nodePorts:\n")
			for _, pk := range sortedKeys(e.nodePorts) {
				fmt.Fprintf(&b, "      %s: %d\n", yamlString(pk), e.nodePorts[pk])
			}
		}
		if e.healthCheckNodePort != 0 {
			fmt.Fprintf(&b, "    healthCheckNodePort: %d\n", e.healthCheckNodePort)
		}
	}
	return b.Bytes()
}

var plainYAML = regexp.MustCompile(`^[a-zA-Z0-9][-a-zA-Z0-9./]*$|^[0-9a-f]+:[0-9a-f:.]*$`)

// yamlString writes s as a plain scalar when that reads back as the same
// string, else double-quoted.
func yamlString(s string) string {
	switch strings.ToLower(s) {
	case "null", "true", "false", "yes", "no", "on", "off", "y", "n":
		return strconv.Quote(s)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil || !plainYAML.MatchString(s) {
		return strconv.Quote(s)
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	keys := slices.Sorted(maps.Keys(m))
	return keys
}

var (
	lockServiceKey = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	lockPortKey    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/(TCP|UDP|SCTP)$`)
	yamlErrLine    = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// ParseLock reads netspec.lock. Unknown fields, bad addresses, ports out of
// range and unknown versions are errors, each as "netspec.lock:LINE: ...".
func ParseLock(data []byte) (*Lock, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlErrLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("netspec.lock:%s: %s", m[1], m[2])
		}
		return nil, fmt.Errorf("netspec.lock: %s", msg)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("netspec.lock: is empty; it needs at least \"version: %d\"", LockVersion)
	}
	return ParseLockNode(doc.Content[0])
}

// ParseLockNode reads the lock from a parsed YAML mapping: a lock that is
// one document of a stream (netspec validate -). Errors are as ParseLock's,
// with the lines of the node's source.
func ParseLockNode(root *yaml.Node) (*Lock, error) {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	p := &lockParser{lock: &Lock{services: map[string]lockEntry{}}}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("netspec.lock:%d: must be a mapping with version and services", root.Line)
	}
	version := false
	p.mapping(root, "", func(k, v *yaml.Node) {
		switch k.Value {
		case "version":
			version = true
			if n, err := strconv.Atoi(v.Value); v.Kind != yaml.ScalarNode || err != nil || n != LockVersion {
				p.errorf(v, "version %s is not supported; this netspec reads version %d", v.Value, LockVersion)
			}
		case "services":
			p.mapping(v, "services: ", p.service)
		default:
			p.errorf(k, "unknown field %q (known: version, services)", k.Value)
		}
	})
	if !version && len(p.errs) == 0 {
		p.errs = append(p.errs, fmt.Errorf("netspec.lock:%d: version is missing; write \"version: %d\"", root.Line, LockVersion))
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return p.lock, nil
}

type lockParser struct {
	lock *Lock
	errs []error
}

func (p *lockParser) errorf(n *yaml.Node, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("netspec.lock:%d: %s", n.Line, fmt.Sprintf(format, args...)))
}

// mapping calls f for each key and value of n, reporting keys that are not
// strings or appear twice. A null value is an empty mapping.
func (p *lockParser) mapping(n *yaml.Node, ctx string, f func(k, v *yaml.Node)) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%smust be a mapping", ctx)
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, "%skeys must be strings", ctx)
			continue
		}
		if line, dup := seen[k.Value]; dup {
			p.errorf(k, "%s%q is defined twice (also at line %d)", ctx, k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		f(k, v)
	}
}

// service reads one entry of services.
func (p *lockParser) service(k, v *yaml.Node) {
	key := k.Value
	if !lockServiceKey.MatchString(key) {
		p.errorf(k, "services: %q is not NAMESPACE/NAME", key)
		return
	}
	ctx := "services: " + key + ": "
	var e lockEntry
	p.mapping(v, ctx, func(fk, fv *yaml.Node) {
		switch fk.Value {
		case "clusterIPs":
			e.clusterIPs = p.clusterIPs(fv, ctx+"clusterIPs: ")
		case "nodePorts":
			p.mapping(fv, ctx+"nodePorts: ", func(pk, pv *yaml.Node) {
				if !lockPortKey.MatchString(pk.Value) {
					p.errorf(pk, "%snodePorts: %q is not PORT/PROTOCOL (such as http/TCP)", ctx, pk.Value)
					return
				}
				n, err := strconv.Atoi(pv.Value)
				if pv.Kind != yaml.ScalarNode || err != nil || n < 1 || n > 65535 {
					p.errorf(pv, "%snodePorts: %s: %q is not a port (1-65535)", ctx, pk.Value, pv.Value)
					return
				}
				if e.nodePorts == nil {
					e.nodePorts = map[string]int{}
				}
				e.nodePorts[pk.Value] = n
			})
		case "healthCheckNodePort":
			n, err := strconv.Atoi(fv.Value)
			if fv.Kind != yaml.ScalarNode || err != nil || n < 1 || n > 65535 {
				p.errorf(fv, "%shealthCheckNodePort: %q is not a port (1-65535)", ctx, fv.Value)
				return
			}
			e.healthCheckNodePort = n
		default:
			p.errorf(fk, "%sunknown field %q (known: clusterIPs, nodePorts, healthCheckNodePort)", ctx, fk.Value)
		}
	})
	p.lock.set(key, e)
}

// clusterIPs reads a list of at most one address per family.
func (p *lockParser) clusterIPs(n *yaml.Node, ctx string) []netip.Addr {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%smust be a list of addresses", ctx)
		return nil
	}
	var out []netip.Addr
	for _, item := range n.Content {
		a, err := netip.ParseAddr(item.Value)
		if item.Kind != yaml.ScalarNode || err != nil || a.Zone() != "" {
			p.errorf(item, "%s%q is not an IP address", ctx, item.Value)
			continue
		}
		a = a.Unmap()
		if _, dup := (lockEntry{clusterIPs: out}).ip(schema.Family(a)); dup {
			p.errorf(item, "%s%s is a second %s address; there is at most one per family", ctx, a, schema.Family(a))
			continue
		}
		out = append(out, a)
	}
	return out
}

// LockDiff lists how have (the lock file, nil when there is none) differs
// from want (what the tree allocates), one line per value: "missing: ..."
// for values want has and have lacks, "stale: ..." for the reverse and
// "differs: ..." for changed ones. It is empty when the locks are equal.
func LockDiff(have, want *Lock) []string {
	keys := map[string]bool{}
	for _, k := range have.keys() {
		keys[k] = true
	}
	for _, k := range want.keys() {
		keys[k] = true
	}
	all := slices.Sorted(maps.Keys(keys))
	var out []string
	line := func(what string, h, w string, hok, wok bool) {
		switch {
		case wok && !hok:
			out = append(out, "missing: "+what+" "+w)
		case hok && !wok:
			out = append(out, "stale: "+what+" "+h)
		case hok && wok && h != w:
			out = append(out, "differs: "+what+" is "+h+" in netspec.lock, want "+w)
		}
	}
	for _, k := range all {
		h, w := have.entry(k), want.entry(k)
		for _, f := range []string{"IPv4", "IPv6"} {
			ha, hok := h.ip(f)
			wa, wok := w.ip(f)
			line(k+" clusterIP "+f, ha.String(), wa.String(), hok, wok)
		}
		ports := map[string]bool{}
		for pk := range h.nodePorts {
			ports[pk] = true
		}
		for pk := range w.nodePorts {
			ports[pk] = true
		}
		pks := slices.Sorted(maps.Keys(ports))
		for _, pk := range pks {
			hp, hok := h.nodePorts[pk]
			wp, wok := w.nodePorts[pk]
			line(k+" nodePort "+pk, strconv.Itoa(hp), strconv.Itoa(wp), hok, wok)
		}
		hh, wh := h.healthCheckNodePort, w.healthCheckNodePort
		line(k+" healthCheckNodePort", strconv.Itoa(hh), strconv.Itoa(wh), hh != 0, wh != 0)
	}
	return out
}
