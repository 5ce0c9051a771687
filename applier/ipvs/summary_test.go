package ipvs

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSummarize: no interface, nothing of netspec's; after an apply, the
// virtual and real servers of the table, and not a virtual server that
// someone else made on an address outside the interface.
func TestSummarize(t *testing.T) {
	f := NewFake()
	got, err := Summarize(f)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Summary{}, got); diff != "" {
		t.Errorf("empty kernel (-want +got):\n%s", diff)
	}
	_, table := goldenTable(t, "../../golden/kitchen-sink/node-1/ipvs.txt")
	if _, err := applyAll(&Applier{k: f}, table); err != nil {
		t.Fatal(err)
	}
	want := Summary{Interface: true}
	for _, vs := range table.Services {
		want.VirtualServers++
		want.RealServers += len(vs.Reals)
	}
	other := KernelService{}
	other.Addr, other.Port, other.Protocol = netip.MustParseAddr("192.0.2.1"), 80, table.Services[0].Protocol
	other.Scheduler, other.Netmask = "rr", 0xffffffff
	if err := f.AddService(other); err != nil {
		t.Fatal(err)
	}
	if got, err = Summarize(f); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after apply (-want +got):\n%s", diff)
	}
	if want.VirtualServers == 0 || want.RealServers == 0 {
		t.Fatalf("the golden table is empty: %+v", want)
	}
}
