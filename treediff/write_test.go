package treediff

import (
	"bytes"
	"slices"
	"testing"
)

// TestWriteTextEnv: an env change is one line that counts its variables;
// with records (diff) each variable follows on a line of its own, as a
// zone's records do. A namespace's first env file has a variable for each
// port of each of its Services, which on one line made plan and apply
// print megabytes.
func TestWriteTextEnv(t *testing.T) {
	vars := func(names ...string) []EnvVar {
		var out []EnvVar
		for _, n := range names {
			out = append(out, EnvVar{Name: n, Value: "v"})
		}
		return out
	}
	tests := []struct {
		name    string
		env     EnvDiff
		records bool
		want    string
	}{
		{
			name: "added namespace",
			env:  EnvDiff{Namespace: "shop", Change: DiffAdded, Added: vars("A", "B")},
			want: "+ env shop: 2 variables\n",
		},
		{
			name: "removed namespace, one variable",
			env:  EnvDiff{Namespace: "shop", Change: DiffRemoved, Removed: vars("A")},
			want: "- env shop: 1 variable\n",
		},
		{
			name: "changed",
			env: EnvDiff{Namespace: "shop", Change: DiffChanged, Added: vars("A", "B"),
				Changed: []EnvChange{{Name: "C", Old: "1", New: "2"}}, Removed: vars("D")},
			want: "~ env shop: 2 variables added, 1 changed, 1 removed\n",
		},
		{
			name: "changed only",
			env:  EnvDiff{Namespace: "shop", Change: DiffChanged, Changed: []EnvChange{{Name: "C", Old: "1", New: "2"}}},
			want: "~ env shop: 1 variable changed\n",
		},
		{
			name: "removed only, on a node",
			env:  EnvDiff{Namespace: "shop", Node: "node-1", Change: DiffChanged, Removed: vars("D", "E")},
			want: "~ env shop on node-1: 2 variables removed\n",
		},
		{
			name: "with records",
			env: EnvDiff{Namespace: "shop", Change: DiffChanged, Added: vars("A"),
				Changed: []EnvChange{{Name: "C", Old: "1", New: "2"}}, Removed: vars("D")},
			records: true,
			want:    "~ env shop: 1 variable added, 1 changed, 1 removed\n    + A=v\n    ~ C=1 -> 2\n    - D=v\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteText(&b, &PlanDiff{Env: []EnvDiff{tt.env}}, TextOptions{Records: tt.records})
			// The last line counts the data-plane changes by node: of
			// none, empty.
			if got := b.String(); got != tt.want+"\n" {
				t.Errorf("got\n%s\nwant\n%s\n", got, tt.want)
			}
		})
	}
}

// TestWriteTextNoDataPlane: the last line counts the data-plane changes
// by node; NoDataPlane (plan and apply, which tell the kernel's changes)
// leaves out that line and only it.
func TestWriteTextNoDataPlane(t *testing.T) {
	d := &PlanDiff{
		Nodes:    []NodeDiff{{Name: "node-1", DataPlane: DataPlaneChanges{ChainsRemoved: 2}}},
		Services: []ServiceDiff{{Namespace: "shop", Name: "web", Change: DiffRemoved}},
	}
	tests := []struct {
		name string
		opts TextOptions
		want string
	}{
		{name: "with the data plane", want: "- service shop/web\nnode-1: 2 chains removed\n"},
		{name: "without", opts: TextOptions{NoDataPlane: true}, want: "- service shop/web\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteText(&b, d, tt.opts)
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestServiceSentenceWithoutPorts: a headless Service without ports (the
// plan's sentinel port, with endpoints at port 0) is worded as having no
// ports, not as port 0.
func TestServiceSentenceWithoutPorts(t *testing.T) {
	tests := []struct {
		name string
		si   ServiceInfo
		want string
	}{
		{
			name: "headless without ports",
			si:   ServiceInfo{Type: "ClusterIP", Headless: true, Ports: []PortInfo{{EndpointCount: 2, ReadyCount: 1}}},
			want: "ClusterIP None (headless), no ports (2 endpoints, 1 ready)",
		},
		{
			name: "headless with a port",
			si:   ServiceInfo{Type: "ClusterIP", Headless: true, Ports: []PortInfo{{Name: "db", Protocol: "TCP", Port: 5432, TargetPorts: []uint16{5432}, EndpointCount: 1, ReadyCount: 1}}},
			want: "ClusterIP None (headless), ports db 5432/TCP -> 5432 (1 endpoint)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := serviceSentence(&tc.si); got != tc.want {
				t.Errorf("serviceSentence = %q, want %q", got, tc.want)
			}
		})
	}
	if got := portLabel(PortInfo{}); got != "(none)" {
		t.Errorf("portLabel of the sentinel port = %q, want (none)", got)
	}
}

// TestForwardingPhrases: cluster and external changes that are the same
// are said once; the short-circuit's on their own, also beside those.
func TestForwardingPhrases(t *testing.T) {
	a, b := dfAP("10.244.1.5:8080"), dfAP("10.244.2.7:8080")
	got := forwardingPhrases("", []ForwardingChange{
		{Traffic: TrafficCluster, Change: DiffAdded, Endpoint: a},
		{Traffic: TrafficExternal, Change: DiffAdded, Endpoint: a},
		{Traffic: TrafficShortCircuit, Change: DiffAdded, Endpoint: a},
		{Traffic: TrafficShortCircuit, Change: DiffAdded, Endpoint: b},
		{Traffic: TrafficExternal, Change: DiffRemoved, Endpoint: b},
	})
	want := []string{
		"now forwards traffic to 10.244.1.5:8080",
		"now forwards short-circuited traffic (from pods and the node to the external frontends) to 10.244.1.5:8080, 10.244.2.7:8080",
		"no longer forwards external traffic to 10.244.2.7:8080",
	}
	if !slices.Equal(got, want) {
		t.Errorf("forwardingPhrases:\n%q\nwant\n%q", got, want)
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		word, want string
	}{
		{n: 1, word: "entry", want: "1 entry"},
		{n: 2, word: "conntrack entry", want: "2 conntrack entries"},
		{n: 0, word: "key", want: "0 keys"},
		{n: 3, word: "endpoint", want: "3 endpoints"},
		{n: 2, word: "y", want: "2 ys"},
	} {
		if got := Plural(tc.n, tc.word); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.word, got, tc.want)
		}
	}
}
