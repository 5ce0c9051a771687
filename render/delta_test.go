package render

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"netspec.dev/netspec/internal/gen/genplan"
	"netspec.dev/netspec/plan"
)

// TestPlanDeltaJSON: a Delta read back from its JSON applies as the Delta
// itself, and the JSON is one line, small for a one-Service change.
func TestPlanDeltaJSON(t *testing.T) {
	p := genplan.Plan(t, 300, "node-1")
	for name, q := range map[string]*plan.Plan{
		"extra service":  genplan.WithExtraService(t, p),
		"moved endpoint": genplan.WithMovedEndpoint(t, p),
		"same":           p,
	} {
		d := plan.Diff(p, q)
		data, err := PlanDeltaJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(data, []byte("\n")) != 1 || data[len(data)-1] != '\n' {
			t.Errorf("%s: not one line:\n%s", name, data)
		}
		if len(data) > 4096 {
			t.Errorf("%s: %d bytes for a one-service change", name, len(data))
		}
		back, err := ParsePlanDeltaJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := back.Apply(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(q, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", name, diff)
		}
		t.Logf("%s: %d bytes", name, len(data))
	}
	for _, bad := range []string{"", "{}", `{"services":{},"zones":[{}],"env":[],"plan":` + string(mustJSON(t, p)) + `}`, `{"x":1}`} {
		if _, err := ParsePlanDeltaJSON([]byte(bad)); err == nil {
			t.Errorf("ParsePlanDeltaJSON(%.40q): no error", bad)
		}
	}
}

func mustJSON(t *testing.T, p *plan.Plan) []byte {
	b, err := PlanJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
