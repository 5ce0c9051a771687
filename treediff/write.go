package treediff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// The writers of a diff: text for a terminal, markdown for a pull-request
// comment, JSON for scripts. All three are deterministic: the same diff
// gives the same bytes.

// FormatVersion is the version of the JSON that WriteJSON writes.
const FormatVersion = 1

// EveryNode names the node a tree without Node objects is compiled for, so
// that two such trees can be compared; the writers call it "every node"
// (text) and "any node" (markdown).
const EveryNode = "*"

// WriteJSON writes the JSON format of a diff: its format version, whether
// there are differences, and the whole diff, with stable lowerCamelCase
// field names.
func WriteJSON(w io.Writer, d *PlanDiff) error {
	out := struct {
		FormatVersion int  `json:"formatVersion"`
		Differences   bool `json:"differences"`
		*PlanDiff
	}{FormatVersion: FormatVersion, Differences: !d.Empty(), PlanDiff: d}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ---- text ----

func nodeName(n string) string {
	if n == EveryNode {
		return "every node"
	}
	return n
}

// TextOptions are the choices of WriteText.
type TextOptions struct {
	// Records puts each record and variable on a line of its own under
	// its zone's or namespace's line (diff, for review; plan and apply
	// show the Services whose records and variables they are, and a
	// namespace's first env file has a variable for each of its
	// Services' ports).
	Records bool
	// NoDataPlane leaves out the last line, the data-plane counts by
	// node (plan and apply, which tell the kernel's own changes).
	NoDataPlane bool
}

// WriteText writes the text format of a diff: a line per change. A
// zone's change is one short line that counts its records, and a
// namespace's environment one that counts its variables; o.Records adds
// the records and variables themselves.
func WriteText(w io.Writer, d *PlanDiff, o TextOptions) {
	if d.Empty() {
		fmt.Fprintln(w, "no differences")
		return
	}
	for _, n := range d.Nodes {
		if n.Change != "" {
			fmt.Fprintf(w, "%s node %s\n", changeMark(n.Change), n.Name)
		}
		if len(n.Fields) > 0 {
			fmt.Fprintf(w, "~ node %s: %s\n", n.Name, fieldPhrases(n.Fields))
		}
	}
	if len(d.Cluster) > 0 {
		fmt.Fprintf(w, "~ cluster: %s\n", fieldPhrases(d.Cluster))
	}
	for i := range d.Services {
		s := &d.Services[i]
		subject := "service " + s.Key() + onNode(s.Node)
		switch s.Change {
		case DiffAdded:
			fmt.Fprintf(w, "+ %s: %s\n", subject, serviceSentence(s.Service))
		case DiffRemoved:
			fmt.Fprintf(w, "- %s\n", subject)
		default:
			for _, p := range servicePhrases(s) {
				fmt.Fprintf(w, "~ %s: %s\n", subject, p)
			}
		}
	}
	// file writes the line of a zone's or a namespace's change, and with
	// records its lines.
	file := func(change, what, node, summary string, lines []string) {
		fmt.Fprintf(w, "%s %s%s: %s\n", changeMark(change), what, onNode(node), summary)
		if o.Records {
			for _, l := range lines {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
	for _, z := range d.DNS {
		summary := changeSummary(z.Change, "record", len(z.Added), 0, len(z.Removed))
		file(z.Change, "dns "+z.Zone, z.Node, summary, zoneLines(z))
	}
	for _, v := range d.Env {
		summary := changeSummary(v.Change, "variable", len(v.Added), len(v.Changed), len(v.Removed))
		file(v.Change, "env "+v.Namespace, v.Node, summary, envLines(v, false))
	}
	if !o.NoDataPlane {
		fmt.Fprintln(w, dataPlaneLine(d.Nodes))
	}
}

func changeMark(c string) string {
	switch c {
	case DiffAdded:
		return "+"
	case DiffRemoved:
		return "-"
	}
	return "~"
}

func onNode(n string) string {
	if n == "" {
		return ""
	}
	return " on " + nodeName(n)
}

func orNone(s string) string { return cmp.Or(s, "(none)") }

func fieldPhrase(f FieldChange) string {
	return fmt.Sprintf("%s %s -> %s", f.Field, orNone(f.Old), orNone(f.New))
}

func fieldPhrases(fs []FieldChange) string {
	var s []string
	for _, f := range fs {
		s = append(s, fieldPhrase(f))
	}
	return strings.Join(s, ", ")
}

// serviceSentence sums up a Service: ClusterIP 10.96.14.3, ports http
// 80/TCP -> 8080 (2 endpoints).
func serviceSentence(si *ServiceInfo) string {
	var parts []string
	switch {
	case si.Type == "ExternalName":
		return "ExternalName " + si.ExternalName
	case si.Headless:
		parts = append(parts, si.Type+" None (headless)")
	default:
		parts = append(parts, si.Type+" "+join(si.ClusterIPs))
	}
	if len(si.ExternalIPs) > 0 {
		parts = append(parts, "externalIPs "+join(si.ExternalIPs))
	}
	if len(si.LoadBalancerIPs) > 0 {
		parts = append(parts, "loadBalancer "+join(si.LoadBalancerIPs))
	}
	if len(si.SourceRanges) > 0 {
		parts = append(parts, "sourceRanges "+join(si.SourceRanges))
	}
	if si.AffinitySeconds > 0 {
		parts = append(parts, fmt.Sprintf("ClientIP affinity %ds", si.AffinitySeconds))
	}
	if si.InternalTrafficPolicy == "Local" {
		parts = append(parts, "internalTrafficPolicy Local")
	}
	if si.ExternalTrafficPolicy == "Local" {
		parts = append(parts, "externalTrafficPolicy Local")
	}
	if si.HealthCheckNodePort != 0 {
		parts = append(parts, fmt.Sprintf("healthCheckNodePort %d", si.HealthCheckNodePort))
	}
	if si.ProxyName != "" {
		parts = append(parts, "served by proxy "+si.ProxyName+", not by netspec")
	}
	var ports []string
	for _, p := range si.Ports {
		ports = append(ports, portSentence(p))
	}
	switch {
	case len(si.Ports) == 1 && si.Ports[0].Port == 0:
		// A headless Service without ports: its endpoints are for DNS.
		parts = append(parts, "no ports ("+endpointCount(si.Ports[0])+")")
	case len(ports) > 0:
		parts = append(parts, "ports "+strings.Join(ports, ", "))
	}
	return strings.Join(parts, ", ")
}

// portSentence: http 80/TCP -> 8080 nodePort 30080 (2 endpoints).
func portSentence(p PortInfo) string {
	s := portLabel(p)
	if len(p.TargetPorts) > 0 {
		s += " -> " + join(p.TargetPorts)
	}
	if p.NodePort != 0 {
		s += fmt.Sprintf(" nodePort %d", p.NodePort)
	}
	return s + " (" + endpointCount(p) + ")"
}

// portLabel: http 80/TCP, or 80/TCP for an unnamed port; "(none)" for
// the plan's sentinel port of a headless Service without ports.
func portLabel(p PortInfo) string {
	if p.Port == 0 {
		return "(none)"
	}
	s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	if p.Name != "" {
		s = p.Name + " " + s
	}
	return s
}

func endpointCount(p PortInfo) string {
	switch {
	case p.EndpointCount == 0:
		return "no endpoints"
	case p.ReadyCount == p.EndpointCount:
		return Plural(p.EndpointCount, "endpoint")
	}
	return fmt.Sprintf("%s, %d ready", Plural(p.EndpointCount, "endpoint"), p.ReadyCount)
}

// servicePhrases words the changes of a changed Service, one a line.
func servicePhrases(s *ServiceDiff) []string {
	var out []string
	for _, f := range s.Fields {
		out = append(out, fieldPhrase(f))
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		switch p.Change {
		case DiffAdded:
			out = append(out, "port "+portSentence(p.PortInfo)+" added")
			continue
		case DiffRemoved:
			out = append(out, "port "+portLabel(p.PortInfo)+" removed")
			continue
		}
		// Name the port when it has a name; an unnamed port is the only one.
		prefix := ""
		if p.Name != "" {
			prefix = "port " + p.Name + ": "
		}
		for _, f := range p.Fields {
			out = append(out, prefix+fieldPhrase(f))
		}
		if len(s.Ports) == 1 && len(p.Fields) == 0 {
			prefix = "" // endpoints of a single port need no label
		}
		for _, e := range p.Endpoints {
			out = append(out, prefix+endpointPhrase(e))
		}
		out = append(out, forwardingPhrases(prefix, p.Forwarding)...)
	}
	return out
}

// endpointPhrase: endpoint 10.244.2.7:8080 added (ready, node-2).
func endpointPhrase(e EndpointDiff) string {
	switch e.Change {
	case DiffAdded, DiffRemoved:
		where := e.State()
		if e.NodeName != "" {
			where += ", " + e.NodeName
		}
		return fmt.Sprintf("endpoint %s %s (%s)", e.Endpoint, e.Change, where)
	}
	var s []string
	for _, f := range e.Fields {
		if f.Field == "state" {
			s = append(s, f.Old+" -> "+f.New)
			continue
		}
		s = append(s, fieldPhrase(f))
	}
	return fmt.Sprintf("endpoint %s: %s", e.Endpoint, strings.Join(s, ", "))
}

// forwardingPhrases: now forwards traffic to A, B; no longer forwards
// external traffic to C. Cluster and external changes that are the same
// are said once, as traffic; short-circuit changes on their own.
func forwardingPhrases(prefix string, fs []ForwardingChange) []string {
	set := map[[2]string][]string{}
	for _, f := range fs {
		k := [2]string{f.Change, f.Traffic}
		set[k] = append(set[k], f.Endpoint.String())
	}
	var out []string
	for _, change := range []string{DiffAdded, DiffRemoved} {
		verb := "now forwards"
		if change == DiffRemoved {
			verb = "no longer forwards"
		}
		c, x := set[[2]string{change, TrafficCluster}], set[[2]string{change, TrafficExternal}]
		switch {
		case len(c) > 0 && strings.Join(c, ",") == strings.Join(x, ","):
			out = append(out, fmt.Sprintf("%s%s traffic to %s", prefix, verb, strings.Join(c, ", ")))
		default:
			if len(c) > 0 {
				out = append(out, fmt.Sprintf("%s%s cluster traffic to %s", prefix, verb, strings.Join(c, ", ")))
			}
			if len(x) > 0 {
				out = append(out, fmt.Sprintf("%s%s external traffic to %s", prefix, verb, strings.Join(x, ", ")))
			}
		}
		if sc := set[[2]string{change, TrafficShortCircuit}]; len(sc) > 0 {
			out = append(out, fmt.Sprintf("%s%s short-circuited traffic (from pods and the node to the external frontends) to %s", prefix, verb, strings.Join(sc, ", ")))
		}
	}
	return out
}

// zoneLines: + name type data, one per record.
func zoneLines(z ZoneDiff) []string {
	var out []string
	for _, r := range z.Added {
		out = append(out, "+ "+r.String())
	}
	for _, r := range z.Removed {
		out = append(out, "- "+r.String())
	}
	return out
}

// changeSummary counts the entries (records, variables: noun) a file's
// change adds, changes and removes, in one short line: "21 variables" for
// a file added or removed; "4 variables added, 3 changed, 4 removed"; "3
// records added, 1 removed".
func changeSummary(change, noun string, added, changed, removed int) string {
	switch change {
	case DiffAdded:
		return Plural(added, noun)
	case DiffRemoved:
		return Plural(removed, noun)
	}
	return countWords(added, changed, removed, noun)
}

// envLines: + KEY=value, ~ KEY=old -> new, - KEY=value; for markdown's
// diff a variable changed is - KEY=old, + KEY=new.
func envLines(v EnvDiff, markdown bool) []string {
	var out []string
	for _, a := range v.Added {
		out = append(out, "+ "+a.Name+"="+a.Value)
	}
	for _, c := range v.Changed {
		if markdown {
			out = append(out, "- "+c.Name+"="+c.Old, "+ "+c.Name+"="+c.New)
		} else {
			out = append(out, "~ "+c.Name+"="+c.Old+" -> "+c.New)
		}
	}
	for _, r := range v.Removed {
		out = append(out, "- "+r.Name+"="+r.Value)
	}
	return out
}

// dataPlanePhrase: 3 map elements and 2 chains added, 1 chain changed, 1
// set declared anew.
func dataPlanePhrase(c DataPlaneChanges) string {
	if c.Zero() {
		return "no data-plane changes"
	}
	var out []string
	group := func(elements, chains int, verb string) {
		var g []string
		if elements > 0 {
			g = append(g, Plural(elements, "map element"))
		}
		if chains > 0 {
			g = append(g, Plural(chains, "chain"))
		}
		if len(g) > 0 {
			out = append(out, strings.Join(g, " and ")+" "+verb)
		}
	}
	group(c.ElementsAdded, c.ChainsAdded, "added")
	group(c.ElementsRemoved, c.ChainsRemoved, "removed")
	group(0, c.ChainsChanged, "changed")
	if c.SetsChanged > 0 {
		out = append(out, Plural(c.SetsChanged, "set")+" declared anew")
	}
	return strings.Join(out, ", ")
}

// dataPlaneLine: node-1: 3 map elements and 2 chains added; node-2: same.
func dataPlaneLine(nodes []NodeDiff) string {
	var out []string
	prev := ""
	for _, n := range nodes {
		p := dataPlanePhrase(n.DataPlane)
		name := nodeName(n.Name)
		if n.Change != "" {
			name += " (" + n.Change + ")"
		}
		if p == prev {
			out = append(out, name+": same")
			continue
		}
		out = append(out, name+": "+p)
		prev = p
	}
	return strings.Join(out, "; ")
}

// ---- markdown ----

// WriteMarkdown writes the markdown format of a diff, for a pull-request
// comment: a summary line, a section per kind of change, and a table of
// each node's data-plane counts.
func WriteMarkdown(w io.Writer, d *PlanDiff) {
	fmt.Fprintf(w, "## netspec diff\n\n")
	if d.Empty() {
		fmt.Fprintf(w, "No differences on %s.\n", nodesWord(d.Nodes))
		return
	}
	fmt.Fprintf(w, "%s\n", markdownSummary(d))

	var nodeLines []string
	for _, n := range d.Nodes {
		if n.Change != "" {
			nodeLines = append(nodeLines, fmt.Sprintf("- `%s` %s", n.Name, n.Change))
		}
		if len(n.Fields) > 0 {
			nodeLines = append(nodeLines, fmt.Sprintf("- `%s`: %s", n.Name, fieldPhrases(n.Fields)))
		}
	}
	if len(nodeLines) > 0 {
		fmt.Fprintf(w, "\n### Nodes\n\n%s\n", strings.Join(nodeLines, "\n"))
	}
	if len(d.Cluster) > 0 {
		fmt.Fprintf(w, "\n### Cluster\n\n")
		for _, f := range d.Cluster {
			fmt.Fprintf(w, "- %s\n", fieldPhrase(f))
		}
	}
	if len(d.Services) > 0 {
		fmt.Fprintf(w, "\n### Services\n")
		prev := ""
		for i := range d.Services {
			s := &d.Services[i]
			if s.Key() != prev {
				fmt.Fprintf(w, "\n#### `%s` %s\n", s.Key(), s.Change)
				prev = s.Key()
			}
			if s.Node != "" {
				fmt.Fprintf(w, "\nOn `%s`:\n", nodeName(s.Node))
			}
			switch s.Change {
			case DiffAdded:
				writeServiceMarkdown(w, s.Service)
			case DiffRemoved:
				fmt.Fprintf(w, "\nWas: %s.\n", serviceSentence(s.Service))
			default:
				fmt.Fprintln(w)
				for _, p := range servicePhrases(s) {
					fmt.Fprintf(w, "- %s\n", p)
				}
			}
		}
	}
	if len(d.DNS) > 0 {
		fmt.Fprintf(w, "\n### DNS\n")
		for _, z := range d.DNS {
			fmt.Fprintf(w, "\nZone `%s`%s %s:\n\n```diff\n%s\n```\n", z.Zone, onNode(z.Node), z.Change, strings.Join(zoneLines(z), "\n"))
		}
	}
	if len(d.Env) > 0 {
		fmt.Fprintf(w, "\n### Environment\n")
		for _, v := range d.Env {
			fmt.Fprintf(w, "\nNamespace `%s`%s %s:\n\n```diff\n%s\n```\n", v.Namespace, onNode(v.Node), v.Change, strings.Join(envLines(v, true), "\n"))
		}
	}
	fmt.Fprintf(w, "\n### Data plane (nftables estimate)\n\n")
	fmt.Fprintf(w, "| node | map elements added | map elements removed | chains added | chains removed | chains changed |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|\n")
	for _, n := range d.Nodes {
		c := n.DataPlane
		name := "`" + nodeName(n.Name) + "`"
		if n.Change != "" {
			name += " (" + n.Change + ")"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d |\n", name, c.ElementsAdded, c.ElementsRemoved, c.ChainsAdded, c.ChainsRemoved, c.ChainsChanged)
	}
}

func writeServiceMarkdown(w io.Writer, si *ServiceInfo) {
	head := si
	if si.Type != "ExternalName" && len(si.Ports) > 0 {
		c := *si
		c.Ports = nil
		head = &c
	}
	fmt.Fprintf(w, "\n%s.\n", serviceSentence(head))
	if head == si {
		return
	}
	fmt.Fprintf(w, "\n| port | target | node port | endpoints |\n|---|---|---|---|\n")
	for _, p := range si.Ports {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", portLabel(p), join(p.TargetPorts), portWords(p.NodePort), endpointCount(p))
	}
}

func nodesWord(nodes []NodeDiff) string {
	var names []string
	for _, n := range nodes {
		if n.Name == EveryNode {
			return "any node"
		}
		names = append(names, "`"+n.Name+"`")
	}
	if len(names) == 0 {
		return "no node"
	}
	return Plural(len(names), "node") + " (" + strings.Join(names, ", ") + ")"
}

// markdownSummary: **Services:** 1 added, 1 changed. **DNS:** 2 records
// added. **Env:** 8 variables added. Compared on 2 nodes (node-1, node-2).
func markdownSummary(d *PlanDiff) string {
	var parts []string
	counts := map[string]int{}
	seen := map[string]bool{}
	for _, s := range d.Services {
		if !seen[s.Key()] {
			seen[s.Key()] = true
			counts[s.Change]++
		}
	}
	var sv []string
	for _, c := range []string{DiffAdded, DiffChanged, DiffRemoved} {
		if counts[c] > 0 {
			sv = append(sv, fmt.Sprintf("%d %s", counts[c], c))
		}
	}
	if len(sv) > 0 {
		parts = append(parts, "**Services:** "+strings.Join(sv, ", ")+".")
	}
	var added, removed int
	for _, z := range d.DNS {
		added += len(z.Added)
		removed += len(z.Removed)
	}
	if s := countWords(added, 0, removed, "record"); s != "" {
		parts = append(parts, "**DNS:** "+s+".")
	}
	var eadd, echg, erem int
	for _, v := range d.Env {
		eadd += len(v.Added)
		echg += len(v.Changed)
		erem += len(v.Removed)
	}
	if s := countWords(eadd, echg, erem, "variable"); s != "" {
		parts = append(parts, "**Env:** "+s+".")
	}
	if len(d.Cluster) > 0 {
		parts = append(parts, "**Cluster:** "+Plural(len(d.Cluster), "setting")+" changed.")
	}
	parts = append(parts, "Compared on "+nodesWord(d.Nodes)+".")
	return strings.Join(parts, " ")
}

// countWords counts entries (noun) added, changed and removed: "4
// variables added, 3 changed, 4 removed"; "" for none.
func countWords(added, changed, removed int, noun string) string {
	var s []string
	for _, c := range []struct {
		n    int
		verb string
	}{{added, "added"}, {changed, "changed"}, {removed, "removed"}} {
		if c.n == 0 {
			continue
		}
		if len(s) == 0 {
			s = append(s, Plural(c.n, noun)+" "+c.verb)
		} else {
			s = append(s, fmt.Sprintf("%d %s", c.n, c.verb))
		}
	}
	return strings.Join(s, ", ")
}

// Plural is "1 word" or "n words" ("n entries" for "entry"): a count as
// the writers' lines, and netspec's commands, say it.
func Plural(n int, word string) string {
	switch {
	case n == 1:
		return fmt.Sprintf("%d %s", n, word)
	case len(word) > 1 && word[len(word)-1] == 'y' && !strings.ContainsRune("aeiou", rune(word[len(word)-2])):
		return fmt.Sprintf("%d %sies", n, word[:len(word)-1])
	}
	return fmt.Sprintf("%d %ss", n, word)
}
