package treediff

import (
	"bytes"
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
			WriteText(&b, &PlanDiff{Env: []EnvDiff{tt.env}}, tt.records)
			// The last line counts the data-plane changes by node: of
			// none, empty.
			if got := b.String(); got != tt.want+"\n" {
				t.Errorf("got\n%s\nwant\n%s\n", got, tt.want)
			}
		})
	}
}
