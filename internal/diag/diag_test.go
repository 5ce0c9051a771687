package diag

import "testing"

func TestPathString(t *testing.T) {
	tests := []struct {
		path Path
		want string
	}{
		{path: nil, want: ""},
		{path: Path{"spec", "ports", 1, "name"}, want: "spec.ports[1].name"},
		{path: Path{"metadata", "labels", "app.kubernetes.io/name"}, want: `metadata.labels["app.kubernetes.io/name"]`},
		{path: Path{"items", 0}, want: "items[0]"},
		{path: Path{"1abc"}, want: `["1abc"]`},
	}
	for _, tc := range tests {
		if got := tc.path.String(); got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestPathKeyDoesNotAlias(t *testing.T) {
	base := make(Path, 1, 8)
	base[0] = "spec"
	a := base.Key("a")
	b := base.Key("b")
	if a.String() != "spec.a" || b.String() != "spec.b" {
		t.Errorf("extending one path changed another: %s, %s", a, b)
	}
}

func TestDiagnosticString(t *testing.T) {
	tests := []struct {
		d    Diagnostic
		want string
	}{
		{d: Diagnostic{Pos: Pos{File: "a.yaml", Line: 3, Col: 7}, Path: Path{"spec", "type"}, Msg: `"X" is not a type`}, want: `a.yaml:3:7: spec.type: "X" is not a type`},
		{d: Diagnostic{Pos: Pos{File: "a.yaml", Line: 3}, Msg: "invalid YAML"}, want: "a.yaml:3: invalid YAML"},
		{d: Diagnostic{Pos: Pos{File: "a.yaml"}, Msg: "too big"}, want: "a.yaml: too big"},
		{d: Diagnostic{Pos: Pos{File: "a.yaml", Line: 1, Col: 1}, Path: Path{"spec"}, Severity: Warning, Msg: "hm"}, want: "a.yaml:1:1: warning: spec: hm"},
	}
	for _, tc := range tests {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestSortOrdersAndDeduplicates(t *testing.T) {
	var l List
	l.Errorf(Pos{File: "b.yaml", Line: 1, Col: 1}, nil, "b1")
	l.Warnf(Pos{File: "a.yaml", Line: 10, Col: 1}, nil, "a10")
	l.Errorf(Pos{File: "a.yaml", Line: 2, Col: 5}, nil, "a2")
	l.Errorf(Pos{File: "a.yaml", Line: 2, Col: 5}, nil, "a2")
	l.Errorf(Pos{File: "a.yaml", Line: 2, Col: 1}, nil, "a2c1")
	l.Sort()
	var got []string
	for _, d := range l {
		got = append(got, d.Msg)
	}
	want := []string{"a2c1", "a2", "a10", "b1"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if l.Errors() != 3 || l.Warnings() != 1 || l.Files() != 2 {
		t.Errorf("counts: %d errors, %d warnings, %d files", l.Errors(), l.Warnings(), l.Files())
	}
	if l.Err() == nil {
		t.Error("Err is nil for a list with errors")
	}
	var w List
	w.Warnf(Pos{File: "x"}, nil, "only a warning")
	if w.Err() != nil {
		t.Error("a warning made Err non-nil")
	}
}
