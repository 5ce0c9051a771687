package ipvs

import (
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"netspec.dev/netspec/render/ipvsmodel"
)

// wantDump is what a Fake holding exactly tb dumps.
func wantDump(tb *ipvsmodel.Table) string {
	var b strings.Builder
	b.WriteString("# link " + LinkName + " dummy up\n")
	for _, f := range tb.Frontends() {
		b.WriteString("# addr " + hostPrefix(f).String() + "\n")
	}
	return b.String() + string(tb.AppendText(nil))
}

// applied returns a Fake that holds text, applied to an empty one, with
// its call log cleared.
func applied(t *testing.T, text string) *Fake {
	t.Helper()
	f := NewFake()
	if _, err := applyAll(&Applier{k: f}, fixture(t, text)); err != nil {
		t.Fatal(err)
	}
	f.Calls = nil
	return f
}

// realSets is the kernel's real servers of every virtual server.
type realSets map[ipvsmodel.Key]map[netip.AddrPort]bool

func snapshot(t *testing.T, f *Fake) realSets {
	t.Helper()
	svcs, _ := f.Services()
	out := realSets{}
	for _, s := range svcs {
		reals, err := f.Reals(s.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[s.Key] = map[netip.AddrPort]bool{}
		for _, r := range reals {
			out[s.Key][r.AddrPort()] = true
		}
	}
	return out
}

// checkNeverEmpty replays calls from the state before and asserts the
// ordering invariant: a virtual server of want that had real servers
// before and has some after never, in between, is missing or has none.
func checkNeverEmpty(t *testing.T, before realSets, calls []Call, want *ipvsmodel.Table, after realSets) {
	t.Helper()
	var watch []ipvsmodel.Key
	for _, vs := range want.Services {
		if len(before[vs.Key]) > 0 && len(after[vs.Key]) > 0 {
			watch = append(watch, vs.Key)
		}
	}
	state := realSets{}
	for k, rs := range before {
		state[k] = map[netip.AddrPort]bool{}
		for r := range rs {
			state[k][r] = true
		}
	}
	for i, c := range calls {
		switch c.Op {
		case CallAddService:
			state[c.Key] = map[netip.AddrPort]bool{}
		case CallDeleteService:
			delete(state, c.Key)
		case CallAddReal:
			state[c.Key][c.Real] = true
		case CallDeleteReal:
			delete(state[c.Key], c.Real)
		}
		for _, k := range watch {
			if rs, ok := state[k]; !ok || len(rs) == 0 {
				t.Errorf("after call %d (%s), virtual server %s, which has real servers before and after, has none (exists: %t)", i+1, c, k, ok)
			}
		}
	}
	for k := range state {
		if len(state[k]) != len(after[k]) {
			t.Errorf("replaying the calls gives %s %d real servers, the fake has %d", k, len(state[k]), len(after[k]))
		}
	}
}

const base = `-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-A -t 10.96.0.10:443 -s rr
-a -t 10.96.0.10:443 -r 10.244.1.5:8443 -m -w 1
-A -u 10.96.0.2:53 -s sh -p 10800
-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 1
-A -t [fd00::10]:80 -s wrr
-a -t [fd00::10]:80 -r [fd00:244::5]:8080 -m -w 1
-a -t [fd00::10]:80 -r [fd00:244::6]:8080 -m -w 2
`

// applyCase goes from one table (nil: an empty kernel) to another.
type applyCase struct {
	name     string
	from, to *string
	want     []string // Changes.Lines of the apply
}

var applyCases = []applyCase{
	{
		name: "first install",
		to:   ptr(base),
		want: []string{
			"+ interface netspec-ipvs0",
			"+ address 10.96.0.2/32", "+ address 10.96.0.10/32", "+ address fd00::10/128",
			"+ virtual server udp 10.96.0.2:53", "+ virtual server tcp 10.96.0.10:80", "+ virtual server tcp 10.96.0.10:443", "+ virtual server tcp [fd00::10]:80",
			"+ real server udp 10.96.0.2:53 -> 10.244.1.9:53",
			"+ real server tcp 10.96.0.10:80 -> 10.244.1.5:8080", "+ real server tcp 10.96.0.10:80 -> 10.244.2.7:8080",
			"+ real server tcp 10.96.0.10:443 -> 10.244.1.5:8443",
			"+ real server tcp [fd00::10]:80 -> [fd00:244::5]:8080", "+ real server tcp [fd00::10]:80 -> [fd00:244::6]:8080",
		},
	},
	{name: "no change", from: ptr(base), to: ptr(base)},
	{
		name: "every real server replaced",
		from: ptr(base),
		to:   ptr(strings.Replace(strings.Replace(base, "10.244.1.5:8080", "10.244.3.1:8080", 1), "10.244.2.7:8080", "10.244.3.2:8080", 1)),
		want: []string{
			"+ real server tcp 10.96.0.10:80 -> 10.244.3.1:8080", "+ real server tcp 10.96.0.10:80 -> 10.244.3.2:8080",
			"- real server tcp 10.96.0.10:80 -> 10.244.1.5:8080", "- real server tcp 10.96.0.10:80 -> 10.244.2.7:8080",
		},
	},
	{
		name: "the last real server swapped",
		from: ptr(base),
		to:   ptr(strings.Replace(base, "10.244.1.9:53", "10.244.2.9:53", 1)),
		want: []string{"+ real server udp 10.96.0.2:53 -> 10.244.2.9:53", "- real server udp 10.96.0.2:53 -> 10.244.1.9:53"},
	},
	{
		name: "weights",
		from: ptr(base),
		to:   ptr(strings.Replace(base, "[fd00:244::6]:8080 -m -w 2", "[fd00:244::6]:8080 -m -w 5", 1)),
		want: []string{"~ real server tcp [fd00::10]:80 -> [fd00:244::6]:8080: weight 2 -> 5"},
	},
	{
		name: "scheduler and persistence",
		from: ptr(base),
		to:   ptr(strings.Replace(strings.Replace(base, "-s sh -p 10800", "-s rr", 1), "[fd00::10]:80 -s wrr", "[fd00::10]:80 -s lc -p 60", 1)),
		want: []string{
			"~ virtual server udp 10.96.0.2:53: scheduler sh -> rr, flags 0x1 -> 0x0, persistence 10800s -> 0s",
			"~ virtual server tcp [fd00::10]:80: scheduler wrr -> lc, flags 0x0 -> 0x1, persistence 0s -> 60s",
		},
	},
	{
		name: "a port goes, its address stays",
		from: ptr(base),
		to:   ptr(strings.Replace(base, "-A -t 10.96.0.10:443 -s rr\n-a -t 10.96.0.10:443 -r 10.244.1.5:8443 -m -w 1\n", "", 1)),
		want: []string{"- virtual server tcp 10.96.0.10:443"},
	},
	{
		name: "an address goes",
		from: ptr(base),
		to:   ptr(strings.Replace(base, "-A -u 10.96.0.2:53 -s sh -p 10800\n-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 1\n", "", 1)),
		want: []string{"- address 10.96.0.2/32", "- virtual server udp 10.96.0.2:53"},
	},
	{
		name: "a protocol changes",
		from: ptr(base),
		to:   ptr(strings.ReplaceAll(base, "-t 10.96.0.10:443", "-u 10.96.0.10:443")),
		want: []string{
			"+ virtual server udp 10.96.0.10:443", "- virtual server tcp 10.96.0.10:443",
			"+ real server udp 10.96.0.10:443 -> 10.244.1.5:8443",
		},
	},
	{
		name: "a new service on a new address",
		from: ptr(base),
		to:   ptr(base + "-A -t [fd00::20]:80 -s rr\n-a -t [fd00::20]:80 -r [fd00:244::5]:80 -m -w 1\n"),
		want: []string{"+ address fd00::20/128", "+ virtual server tcp [fd00::20]:80", "+ real server tcp [fd00::20]:80 -> [fd00:244::5]:80"},
	},
	{
		name: "a service loses all its real servers",
		from: ptr(base),
		to:   ptr(strings.Replace(base, "-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 1\n", "", 1)),
		want: []string{"- real server udp 10.96.0.2:53 -> 10.244.1.9:53"},
	},
	{
		name: "everything goes",
		from: ptr(base),
		to:   ptr(""),
		want: []string{
			"- address 10.96.0.2/32", "- address 10.96.0.10/32", "- address fd00::10/128",
			"- virtual server udp 10.96.0.2:53", "- virtual server tcp 10.96.0.10:80", "- virtual server tcp 10.96.0.10:443", "- virtual server tcp [fd00::10]:80",
		},
	},
}

func ptr(s string) *string { return &s }

// setUp returns a Fake holding the case's starting table.
func (c *applyCase) setUp(t *testing.T) *Fake {
	t.Helper()
	if c.from == nil {
		return NewFake()
	}
	return applied(t, *c.from)
}

// TestApply: each case changes exactly what differs, in an order that
// keeps the invariant, lands on the wanted table, and a second Apply
// changes nothing; Plan tells the same beforehand and changes nothing.
func TestApply(t *testing.T) {
	for i := range applyCases {
		c := &applyCases[i]
		t.Run(c.name, func(t *testing.T) {
			f := c.setUp(t)
			a := &Applier{k: f}
			to := fixture(t, *c.to)
			before := snapshot(t, f)

			planned, err := a.Plan(to)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Calls) != 0 {
				t.Fatalf("Plan changed the kernel: %v", f.Calls)
			}
			ch, err := applyAll(a, to)
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.Lines(); !slices.Equal(got, c.want) {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if got, want := planned.Lines(), ch.Lines(); !slices.Equal(got, want) {
				t.Errorf("Plan said\n%s\nApply did\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if ch.Empty() != (len(c.want) == 0) || (ch.Summary() == "no changes") != ch.Empty() {
				t.Errorf("Empty() = %t, Summary() = %q for %d changes", ch.Empty(), ch.Summary(), len(c.want))
			}
			if got, want := f.Dump(), wantDump(to); got != want {
				t.Errorf("kernel:\n%s\nwant:\n%s", got, want)
			}
			checkNeverEmpty(t, before, f.Calls, to, snapshot(t, f))

			f.Calls = nil
			if ch, err := applyAll(a, to); err != nil || !ch.Empty() || len(f.Calls) != 0 {
				t.Errorf("second Apply: %v, %v, calls %v; want no changes", ch.Lines(), err, f.Calls)
			}
		})
	}
}

// TestApplyOrder asserts the exact calls of a change that has every step:
// interface repaired, address added, service added, real servers added,
// changed and removed, a service updated and one deleted, an address
// removed.
func TestApplyOrder(t *testing.T) {
	f := applied(t, `-A -t 10.0.0.1:80 -s rr
-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1
-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1
-A -t 10.0.0.2:80 -s rr
-a -t 10.0.0.2:80 -r 10.1.0.1:80 -m -w 1
`)
	f.SetLinkDown()
	to := fixture(t, `-A -t 10.0.0.1:80 -s wrr
-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 3
-a -t 10.0.0.1:80 -r 10.1.0.3:80 -m -w 1
-A -t 10.0.0.3:80 -s rr
-a -t 10.0.0.3:80 -r 10.1.0.1:80 -m -w 1
`)
	if _, err := applyAll(&Applier{k: f}, to); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SetLinkUp",
		"AddAddr 10.0.0.3/32",
		"AddService tcp 10.0.0.3:80",
		"AddReal tcp 10.0.0.3:80 10.1.0.1:80",
		"AddReal tcp 10.0.0.1:80 10.1.0.3:80",
		"UpdateReal tcp 10.0.0.1:80 10.1.0.2:80",
		"DeleteReal tcp 10.0.0.1:80 10.1.0.1:80",
		"UpdateService tcp 10.0.0.1:80",
		"DeleteService tcp 10.0.0.2:80",
		"DeleteAddr 10.0.0.2/32",
	}
	var got []string
	for _, c := range f.Calls {
		got = append(got, c.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// opVerbs are how errors name the operations of the calls.
var opVerbs = map[string]string{
	CallAddService: "add virtual server ", CallUpdateService: "update virtual server ", CallDeleteService: "delete virtual server ",
	CallAddReal: "add real server ", CallUpdateReal: "update real server ", CallDeleteReal: "delete real server ",
	CallAddLink: "add interface ", CallSetLinkUp: "set interface ", CallDeleteLink: "delete interface ",
	CallAddAddr: "add address ", CallDeleteAddr: "delete address ",
}

// TestApplyInterrupted: an Apply that fails at its Nth change, for every
// N, leaves a state that the next Apply completes, and neither run breaks
// the invariant. An interrupted change can also be rolled back by applying
// the old table.
func TestApplyInterrupted(t *testing.T) {
	for i := range applyCases {
		c := &applyCases[i]
		// The number of changes of the whole apply.
		full := c.setUp(t)
		if _, err := applyAll(&Applier{k: full}, fixture(t, *c.to)); err != nil {
			t.Fatal(err)
		}
		for n := range len(full.Calls) {
			t.Run(c.name+"/"+full.Calls[n].String(), func(t *testing.T) {
				to := fixture(t, *c.to)
				f := c.setUp(t)
				before := snapshot(t, f)
				a := &Applier{k: f}
				f.FailAfter(n)
				ch, err := applyAll(a, to)
				if !errors.Is(err, ErrFakeFailure) {
					t.Fatalf("Apply failing at change %d: %v", n+1, err)
				}
				if len(f.Calls) != n || len(ch.Lines()) != n {
					t.Errorf("after failing at change %d: %d calls made, %d changes reported", n+1, len(f.Calls), len(ch.Lines()))
				}
				if verb := opVerbs[full.Calls[n].Op]; !strings.HasPrefix(err.Error(), verb) {
					t.Errorf("error %q: want it to name the operation (%q…)", err, verb)
				}
				if _, err := applyAll(a, to); err != nil {
					t.Fatalf("Apply after the interruption: %v", err)
				}
				if got, want := f.Dump(), wantDump(to); got != want {
					t.Errorf("kernel after the second Apply:\n%s\nwant:\n%s", got, want)
				}
				checkNeverEmpty(t, before, f.Calls, to, snapshot(t, f))

				if c.from == nil {
					return
				}
				// Or back to where it was.
				g := c.setUp(t)
				g.FailAfter(n)
				applyAll(&Applier{k: g}, to)
				from := fixture(t, *c.from)
				if _, err := applyAll(&Applier{k: g}, from); err != nil {
					t.Fatalf("Apply of the old table after the interruption: %v", err)
				}
				if got, want := g.Dump(), wantDump(from); got != want {
					t.Errorf("kernel after going back:\n%s\nwant:\n%s", got, want)
				}
			})
		}
	}
}

// TestApplyRepairsDrift: what was changed by hand is put back, and only
// that.
func TestApplyRepairsDrift(t *testing.T) {
	a4 := netip.MustParseAddr
	k80 := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.96.0.10"), Port: 80}
	k6 := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("fd00::10"), Port: 80}
	k53 := ipvsmodel.Key{Protocol: ipvsmodel.UDP, Addr: a4("10.96.0.2"), Port: 53}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		drift   func(t *testing.T, f *Fake)
		want    []string
		unowned int
	}{
		{
			name:  "real server deleted",
			drift: func(t *testing.T, f *Fake) { must(t, f.DeleteReal(k80, netip.MustParseAddrPort("10.244.2.7:8080"))) },
			want:  []string{"+ real server tcp 10.96.0.10:80 -> 10.244.2.7:8080"},
		},
		{
			name: "real server added",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.AddReal(k80, ipvsmodel.RealServer{Addr: a4("10.244.9.9"), Port: 8080, Weight: 1}))
			},
			want: []string{"- real server tcp 10.96.0.10:80 -> 10.244.9.9:8080"},
		},
		{
			name: "real server reweighted and switched to direct routing",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.UpdateReal(k6, ipvsmodel.RealServer{Addr: a4("fd00:244::5"), Port: 8080, Weight: 7, Forward: 3}))
			},
			want: []string{"~ real server tcp [fd00::10]:80 -> [fd00:244::5]:8080: weight 7 -> 1, forwarding direct-routing -> masquerade"},
		},
		{
			name: "scheduler changed",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.UpdateService(KernelService{Key: k80, Scheduler: "lc", Netmask: 0xffffffff}))
			},
			want: []string{"~ virtual server tcp 10.96.0.10:80: scheduler lc -> rr"},
		},
		{
			name: "flags, persistence and netmask changed",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.UpdateService(KernelService{Key: k53, Scheduler: "sh", Flags: FlagPersistent | 0x4, Timeout: 5, Netmask: 0xffffff00}))
			},
			want: []string{"~ virtual server udp 10.96.0.2:53: flags 0x5 -> 0x1, persistence 5s -> 10800s, netmask 0xffffff00 -> 0xffffffff"},
		},
		{
			name:  "virtual server deleted",
			drift: func(t *testing.T, f *Fake) { must(t, f.DeleteService(k6)) },
			want: []string{
				"+ virtual server tcp [fd00::10]:80",
				"+ real server tcp [fd00::10]:80 -> [fd00:244::5]:8080", "+ real server tcp [fd00::10]:80 -> [fd00:244::6]:8080",
			},
		},
		{
			name: "virtual server added on a frontend address",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.AddService(KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.96.0.10"), Port: 8080}, Scheduler: "rr", Netmask: 0xffffffff}))
			},
			want: []string{"- virtual server tcp 10.96.0.10:8080"},
		},
		{
			name: "address and virtual server added on the interface",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.AddAddr(netip.MustParsePrefix("10.96.0.99/32")))
				must(t, f.AddService(KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.96.0.99"), Port: 80}, Scheduler: "rr", Netmask: 0xffffffff}))
			},
			want: []string{"- address 10.96.0.99/32", "- virtual server tcp 10.96.0.99:80"},
		},
		{
			name:  "address deleted",
			drift: func(t *testing.T, f *Fake) { must(t, f.DeleteAddr(netip.MustParsePrefix("fd00::10/128"))) },
			want:  []string{"+ address fd00::10/128"},
		},
		{
			name: "address of the wrong length",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.DeleteAddr(netip.MustParsePrefix("fd00::10/128")))
				must(t, f.AddAddr(netip.MustParsePrefix("fd00::10/64")))
				must(t, f.AddAddr(netip.MustParsePrefix("10.96.0.10/24")))
			},
			want: []string{"+ address fd00::10/128", "- address fd00::10/64", "- address 10.96.0.10/24"},
		},
		{
			name: "IPv6 link-local address of the interface",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.AddAddr(netip.MustParsePrefix("fe80::1/64")))
			},
			want: nil, // the kernel's own: left alone
		},
		{
			name:  "interface down",
			drift: func(t *testing.T, f *Fake) { f.SetLinkDown() },
			want:  []string{"~ interface netspec-ipvs0: set up"},
		},
		{
			name:  "interface deleted",
			drift: func(t *testing.T, f *Fake) { must(t, f.DeleteLink()) },
			want:  []string{"+ interface netspec-ipvs0", "+ address 10.96.0.2/32", "+ address 10.96.0.10/32", "+ address fd00::10/128"},
		},
		{
			name: "someone else's virtual servers",
			drift: func(t *testing.T, f *Fake) {
				must(t, f.AddService(KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("192.0.2.1"), Port: 80}, Scheduler: "rr", Netmask: 0xffffffff}))
				must(t, f.AddReal(ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("192.0.2.1"), Port: 80}, ipvsmodel.RealServer{Addr: a4("192.0.2.9"), Port: 80, Forward: 3}))
				f.services[ipvsmodel.Key{}] = &fakeService{svc: KernelService{Scheduler: "rr"}} // a firewall-mark service
			},
			want:    nil,
			unowned: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := applied(t, base)
			tt.drift(t, f)
			foreign := f.Dump()
			f.Calls = nil
			before := snapshot(t, f)
			want := fixture(t, base)
			ch, err := applyAll(&Applier{k: f}, want)
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.Lines(); !slices.Equal(got, tt.want) {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if ch.Unowned != tt.unowned {
				t.Errorf("Unowned = %d, want %d", ch.Unowned, tt.unowned)
			}
			if tt.want == nil {
				if got := f.Dump(); got != foreign {
					t.Errorf("kernel changed:\n%s\nwas:\n%s", got, foreign)
				}
				return
			}
			if got := f.Dump(); got != wantDump(want) {
				t.Errorf("kernel:\n%s\nwant:\n%s", got, wantDump(want))
			}
			checkNeverEmpty(t, before, f.Calls, want, snapshot(t, f))
		})
	}
}

// TestCleanup: netspec's virtual servers and interface go, someone else's
// virtual servers stay; a second Cleanup has nothing to do.
func TestCleanup(t *testing.T) {
	f := applied(t, base)
	other := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: netip.MustParseAddr("192.0.2.1"), Port: 80}
	if err := f.AddService(KernelService{Key: other, Scheduler: "rr", Netmask: 0xffffffff}); err != nil {
		t.Fatal(err)
	}
	a := &Applier{k: f}
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Dump(), "-A -t 192.0.2.1:80 -s rr\n"; got != want {
		t.Errorf("after Cleanup:\n%s\nwant:\n%s", got, want)
	}
	f.Calls = nil
	if err := a.Cleanup(); err != nil || len(f.Calls) != 0 {
		t.Errorf("second Cleanup: %v, calls %v", err, f.Calls)
	}
}

// TestNoIPVS: without IPVS nothing is read or changed, and the error says
// what to do.
func TestNoIPVS(t *testing.T) {
	f := NewFake()
	f.NoIPVS = true
	a := &Applier{k: f}
	tb := fixture(t, base)
	_, perr := a.Plan(tb)
	_, aerr := applyAll(a, tb)
	for _, err := range []error{perr, aerr, a.Cleanup()} {
		if !errors.Is(err, ErrNoIPVS) {
			t.Errorf("error %v: want ErrNoIPVS", err)
			continue
		}
		for _, want := range []string{"IPVS is not available", "/proc/net/ip_vs", `"modprobe ip_vs"`, "--dataplane nftables"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %s", err, want)
			}
		}
	}
	if len(f.Calls) != 0 {
		t.Errorf("calls without IPVS: %v", f.Calls)
	}
}

// TestOtherInterface: an interface named netspec-ipvs0 that is not a dummy
// is not netspec's: nothing is changed and the error says so.
func TestOtherInterface(t *testing.T) {
	f := NewFake()
	f.AddOtherLink("veth")
	a := &Applier{k: f}
	_, aerr := applyAll(a, fixture(t, base))
	for _, err := range []error{aerr, a.Cleanup()} {
		if err == nil || !strings.Contains(err.Error(), `is of kind "veth", not a dummy interface`) {
			t.Errorf("error %v: want it to say the interface is no dummy", err)
		}
	}
	if len(f.Calls) != 0 {
		t.Errorf("calls: %v", f.Calls)
	}
}

// TestApplyBadTable: a table made by hand is checked (ipvsmodel.Table.Check)
// before anything is read or changed.
func TestApplyBadTable(t *testing.T) {
	a4 := netip.MustParseAddr
	k := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.0.0.1"), Port: 80}
	tests := []struct {
		name string
		tb   *ipvsmodel.Table
		want string
	}{
		{name: "twice", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "rr"}, {Key: k, Scheduler: "rr"}}}, want: "in the table twice"},
		{name: "scheduler", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "xx"}}}, want: `unknown scheduler "xx"`},
		{name: "protocol", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: ipvsmodel.Key{Protocol: 1, Addr: k.Addr, Port: 80}, Scheduler: "rr"}}}, want: "unknown protocol 1"},
		{name: "no address", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Port: 80}, Scheduler: "rr"}}}, want: "no address"},
		{name: "real twice", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "rr", Reals: []ipvsmodel.RealServer{{Addr: a4("10.1.0.1"), Port: 1}, {Addr: a4("10.1.0.1"), Port: 1}}}}}, want: "real server 10.1.0.1:1 is in the table twice"},
		{name: "weight", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "rr", Reals: []ipvsmodel.RealServer{{Addr: a4("10.1.0.1"), Port: 1, Weight: -1}}}}}, want: "weight -1"},
		{name: "family", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "rr", Reals: []ipvsmodel.RealServer{{Addr: a4("fd00::1"), Port: 1}}}}}, want: "forwards within its family"},
		{name: "forwarding", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: k, Scheduler: "rr", Reals: []ipvsmodel.RealServer{{Addr: a4("10.1.0.1"), Port: 1, Forward: ipvsmodel.DirectRoute}}}}}, want: "forwarding method direct-routing is not supported"},
		{name: "unsorted", tb: &ipvsmodel.Table{Services: []ipvsmodel.VirtualServer{{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: k.Addr, Port: 81}, Scheduler: "rr"}, {Key: k, Scheduler: "rr"}}}, want: "the table is not sorted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake()
			_, err := applyAll(&Applier{k: f}, tt.tb)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "desired table: ") {
				t.Errorf("Apply: %v, want %q", err, tt.want)
			}
			if len(f.Calls) != 0 {
				t.Errorf("calls: %v", f.Calls)
			}
		})
	}
	// A nil table is an empty one.
	f := applied(t, base)
	if _, err := applyAll(&Applier{k: f}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Dump(), "# link netspec-ipvs0 dummy up\n"; got != want {
		t.Errorf("after Apply(nil):\n%s\nwant:\n%s", got, want)
	}
}

// silentKernel accepts real servers and does nothing, as moby/ipvs does on
// a kernel without IPVS.
type silentKernel struct{ *Fake }

func (silentKernel) AddReal(ipvsmodel.Key, ipvsmodel.RealServer) error { return nil }

// TestApplyVerifies: a kernel that says yes and does nothing is caught by
// the read-back.
func TestApplyVerifies(t *testing.T) {
	_, err := applyAll(&Applier{k: silentKernel{NewFake()}}, fixture(t, base))
	if err == nil || !strings.Contains(err.Error(), "verify: the kernel does not hold what was sent, still to do: real servers 6 added") {
		t.Errorf("Apply: %v, want a verify error", err)
	}
}

// TestApplyRefused: an error of the kernel names the operation, and what
// was done before it is reported.
func TestApplyRefused(t *testing.T) {
	f := applied(t, base)
	f.FailAfter(1)
	ch, err := applyAll(&Applier{k: f}, fixture(t, strings.Replace(base, "10.244.1.5:8443", "10.244.1.6:8443", 1)))
	if err == nil || err.Error() != "delete real server 10.244.1.5:8443 of tcp 10.96.0.10:443: "+ErrFakeFailure.Error() {
		t.Errorf("Apply: %v", err)
	}
	if got := ch.Lines(); !slices.Equal(got, []string{"+ real server tcp 10.96.0.10:443 -> 10.244.1.6:8443"}) {
		t.Errorf("changes made: %v", got)
	}
}

func TestChangesSummary(t *testing.T) {
	tests := []struct {
		ch   Changes
		want string
	}{
		{ch: Changes{}, want: "no changes"},
		{ch: Changes{Unowned: 3}, want: "no changes"},
		{ch: Changes{Interface: "added", AddressesAdded: []string{"a"}, ServicesAdded: []string{"s"}, RealsAdded: []string{"r", "q"}},
			want: "interface netspec-ipvs0 added; addresses 1 added, 0 removed; virtual servers 1 added, 0 changed, 0 removed; real servers 2 added, 0 changed, 0 removed"},
		{ch: Changes{RealsChanged: []string{"r"}, RealsRemoved: []string{"q"}}, want: "real servers 0 added, 1 changed, 1 removed"},
		{ch: Changes{ServicesChanged: []string{"s"}, AddressesRemoved: []string{"a"}}, want: "addresses 0 added, 1 removed; virtual servers 0 added, 1 changed, 0 removed"},
	}
	for _, tt := range tests {
		if got := tt.ch.Summary(); got != tt.want {
			t.Errorf("Summary() = %q, want %q", got, tt.want)
		}
		if tt.ch.Empty() != (tt.want == "no changes") {
			t.Errorf("%q: Empty() = %t", tt.want, tt.ch.Empty())
		}
	}
}

// readCounter is a Fake that counts the real-server reads.
type readCounter struct {
	*Fake
	reals []ipvsmodel.Key
}

func (r *readCounter) Reals(k ipvsmodel.Key) ([]ipvsmodel.RealServer, error) {
	r.reals = append(r.reals, k)
	return r.Fake.Reals(k)
}

// TestUpdate: Update after Apply reads and changes only the virtual
// servers that differ from the last table, and nothing when none does;
// drift elsewhere is left to Apply, which repairs it.
func TestUpdate(t *testing.T) {
	const base = `-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-A -t 10.96.0.11:80 -s rr
-a -t 10.96.0.11:80 -r 10.244.1.6:8080 -m -w 1
-A -t 10.96.0.12:80 -s rr
-a -t 10.96.0.12:80 -r 10.244.1.7:8080 -m -w 1
`
	changed := strings.Replace(base, "10.244.1.6:8080", "10.244.2.6:8080", 1)
	parse := func(s string) *ipvsmodel.Table { return fixture(t, s) }
	k := &readCounter{Fake: NewFake()}
	a := &Applier{k: k}
	if _, err := a.Update(parse(base)); err != nil { // no last table: an Apply
		t.Fatal(err)
	}
	k.reals, k.Calls = nil, nil
	ch, err := a.Update(parse(changed))
	if err != nil {
		t.Fatal(err)
	}
	want := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: netip.MustParseAddr("10.96.0.11"), Port: 80}
	for _, r := range k.reals {
		if r != want {
			t.Errorf("Update read the real servers of %s, which did not change", r)
		}
	}
	if len(ch.RealsAdded) != 1 || len(ch.RealsRemoved) != 1 || len(ch.ServicesAdded)+len(ch.ServicesRemoved) != 0 {
		t.Errorf("Update: %s", ch.Summary())
	}
	k.reals, k.Calls = nil, nil
	if ch, err := a.Update(parse(changed)); err != nil || !ch.Empty() || len(k.reals)+len(k.Calls) != 0 {
		t.Errorf("Update with nothing changed: %v %s, reads %v, calls %v", err, ch.Summary(), k.reals, k.Calls)
	}
	// Drift on a virtual server the update does not touch: Update leaves
	// it, Apply repairs it.
	other := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: netip.MustParseAddr("10.96.0.12"), Port: 80}
	if err := k.DeleteReal(other, netip.MustParseAddrPort("10.244.1.7:8080")); err != nil {
		t.Fatal(err)
	}
	if ch, err := applyAll(a, parse(changed)); err != nil || len(ch.RealsAdded) != 1 {
		t.Errorf("Apply after drift: %v %s", err, ch.Summary())
	}
}

// TestRenderEqualsFake: for every golden ipvs.txt, the table render builds
// from the golden plan.json, applied to a Fake, leaves it holding the
// file: its virtual and real servers print as the golden text, byte for
// byte (TestInVMRenderEqualsKernel asserts the same of a real kernel).
func TestRenderEqualsFake(t *testing.T) {
	files, err := filepath.Glob("../../golden/*/*/ipvs.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden ipvs.txt (%v)", err)
	}
	for _, path := range files {
		golden, want := goldenTable(t, path)
		f := NewFake()
		if _, err := applyAll(&Applier{k: f}, want); err != nil {
			t.Fatalf("%s: Apply: %v", path, err)
		}
		var servers []string
		for _, l := range strings.SplitAfter(f.Dump(), "\n") {
			if !strings.HasPrefix(l, "#") {
				servers = append(servers, l)
			}
		}
		if got := strings.Join(servers, ""); got != golden {
			t.Errorf("%s: the fake holds\n%s\nthe file says\n%s", path, got, golden)
		}
	}
}

// TestFakeRefusesWhole: a call the kernel refuses, or one FailAfter
// interrupts, changes nothing in the Fake and is not in its Calls: each
// call is all or nothing, as each netlink request is.
func TestFakeRefusesWhole(t *testing.T) {
	a4 := netip.MustParseAddr
	k80 := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.96.0.10"), Port: 80}
	missing := ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("10.96.0.99"), Port: 80}
	r := ipvsmodel.RealServer{Addr: a4("10.244.1.5"), Port: 8080, Weight: 1}
	tests := []struct {
		name string
		call func(f *Fake) error
		want error
	}{
		{name: "service twice", call: func(f *Fake) error {
			return f.AddService(KernelService{Key: k80, Scheduler: "rr", Netmask: 0xffffffff})
		}, want: unix.EEXIST},
		{name: "unknown scheduler", call: func(f *Fake) error { return f.AddService(KernelService{Key: missing, Scheduler: "xx"}) }, want: unix.ENOENT},
		{name: "IPv6 netmask", call: func(f *Fake) error {
			return f.AddService(KernelService{Key: ipvsmodel.Key{Protocol: ipvsmodel.TCP, Addr: a4("fd00::99"), Port: 80}, Scheduler: "rr", Netmask: 0xffffffff})
		}, want: unix.EINVAL},
		{name: "update a missing service", call: func(f *Fake) error { return f.UpdateService(KernelService{Key: missing, Scheduler: "rr"}) }, want: unix.ESRCH},
		{name: "delete a missing service", call: func(f *Fake) error { return f.DeleteService(missing) }, want: unix.ESRCH},
		{name: "real of a missing service", call: func(f *Fake) error { return f.AddReal(missing, r) }, want: unix.ESRCH},
		{name: "real twice", call: func(f *Fake) error { return f.AddReal(k80, r) }, want: unix.EEXIST},
		{name: "real of the other family", call: func(f *Fake) error {
			return f.AddReal(k80, ipvsmodel.RealServer{Addr: a4("fd00::5"), Port: 1, Weight: 1})
		}, want: unix.EINVAL},
		{name: "update a missing real", call: func(f *Fake) error {
			return f.UpdateReal(k80, ipvsmodel.RealServer{Addr: a4("10.244.9.9"), Port: 1, Weight: 2})
		}, want: unix.ENOENT},
		{name: "delete a missing real", call: func(f *Fake) error { return f.DeleteReal(k80, netip.MustParseAddrPort("10.244.9.9:1")) }, want: unix.ENOENT},
		{name: "address twice", call: func(f *Fake) error { return f.AddAddr(netip.MustParsePrefix("10.96.0.10/32")) }, want: unix.EEXIST},
		{name: "delete a missing address", call: func(f *Fake) error { return f.DeleteAddr(netip.MustParsePrefix("10.96.0.99/32")) }, want: unix.EADDRNOTAVAIL},
		{name: "link twice", call: func(f *Fake) error { return f.AddLink() }, want: unix.EEXIST},
		{name: "interrupted service delete", call: func(f *Fake) error { f.FailAfter(0); return f.DeleteService(k80) }, want: ErrFakeFailure},
		{name: "interrupted link delete", call: func(f *Fake) error { f.FailAfter(0); return f.DeleteLink() }, want: ErrFakeFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := applied(t, base)
			before := f.Dump()
			if err := tt.call(f); !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if got := f.Dump(); got != before || len(f.Calls) != 0 {
				t.Errorf("the refused call changed the fake (calls %v):\n%s\nwas:\n%s", f.Calls, got, before)
			}
		})
	}
}
