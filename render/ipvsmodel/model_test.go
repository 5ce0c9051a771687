package ipvsmodel

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

var a = netip.MustParseAddr

func key(p Protocol, addr string, port uint16) Key {
	return Key{Protocol: p, Addr: a(addr), Port: port}
}

func dest(addr string, port uint16, w int) RealServer {
	return RealServer{Addr: a(addr), Port: port, Forward: Masquerade, Weight: w}
}

// sample is a table with every protocol, IPv4 and IPv6, persistence, and
// a virtual server without real servers, in order.
func sample() *Table {
	return &Table{Services: []VirtualServer{
		{Key: key(UDP, "10.96.0.2", 53), Scheduler: "wrr", Persistence: 10800, Reals: []RealServer{dest("10.244.1.9", 53, 3)}},
		{Key: key(SCTP, "10.96.0.10", 9000), Scheduler: "sh"},
		{Key: key(TCP, "10.96.0.10", 80), Scheduler: "rr", Reals: []RealServer{dest("10.244.1.5", 8080, 1), dest("10.244.2.7", 8080, 1)}},
		{Key: key(TCP, "10.96.0.10", 443), Scheduler: "rr"},
		{Key: key(UDP, "10.96.0.10", 53), Scheduler: "rr"},
		{Key: key(TCP, "fd00::10", 443), Scheduler: "mh", Reals: []RealServer{dest("fd00:244::5", 8443, 65535), dest("fd00:244::6", 8443, 0)}},
	}}
}

// TestAppendText: the table prints as `ipvsadm -S -n` does, in its order.
func TestAppendText(t *testing.T) {
	want := `-A -u 10.96.0.2:53 -s wrr -p 10800
-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 3
-A --sctp-service 10.96.0.10:9000 -s sh
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-A -t 10.96.0.10:443 -s rr
-A -u 10.96.0.10:53 -s rr
-A -t [fd00::10]:443 -s mh
-a -t [fd00::10]:443 -r [fd00:244::5]:8443 -m -w 65535
-a -t [fd00::10]:443 -r [fd00:244::6]:8443 -m -w 0
`
	tb := sample()
	if got := string(tb.AppendText([]byte("# x\n"))); got != "# x\n"+want {
		t.Errorf("AppendText:\n%s\nwant:\n%s", got, want)
	}
	var empty *Table
	if got := string(empty.AppendText(nil)) + string((&Table{}).AppendText(nil)); got != "" {
		t.Errorf("empty tables print %q", got)
	}
	if err := tb.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if got, want := fmt.Sprint(tb.Frontends()), "[10.96.0.2 10.96.0.10 fd00::10]"; got != want {
		t.Errorf("Frontends() = %s, want %s", got, want)
	}
	if empty.Frontends() != nil {
		t.Error("a nil table has frontends")
	}
}

// TestEnums: every protocol and forwarding method has its name and
// ipvsadm option (a new one fails here until it is covered).
func TestEnums(t *testing.T) {
	protos := map[Protocol][2]string{TCP: {"tcp", "-t"}, UDP: {"udp", "-u"}, SCTP: {"sctp", "--sctp-service"}}
	if len(protos) != len(Protocols) {
		t.Errorf("Protocols %v: cover the new ones here", Protocols)
	}
	for _, p := range Protocols {
		if got := [2]string{p.String(), p.Option()}; got != protos[p] || !p.Valid() {
			t.Errorf("protocol %d: %v, valid %t; want %v", uint16(p), got, p.Valid(), protos[p])
		}
	}
	if p := Protocol(1); p.Valid() || p.String() != "protocol-1" || p.Option() != "--protocol-1" {
		t.Errorf("protocol 1: valid %t, %s, %s", p.Valid(), p, p.Option())
	}
	for f, want := range map[Forward][2]string{
		Masquerade: {"masquerade", "-m"}, Local: {"local", "--forward 1"}, Tunnel: {"tunnel", "-i"},
		DirectRoute: {"direct-routing", "-g"}, 9: {"method-9", "--forward 9"},
	} {
		if got := [2]string{f.String(), f.Option()}; got != want {
			t.Errorf("forwarding %d: %v, want %v", uint32(f), got, want)
		}
	}
	if len(Schedulers) != 9 {
		t.Errorf("Schedulers %v: cover the new ones in the schema and the applier's VM test", Schedulers)
	}
}

// TestKeyOrder: keys are ordered by address (IPv4 first), protocol name,
// then port; Sort orders a table made by hand, real servers included.
func TestKeyOrder(t *testing.T) {
	ordered := []Key{
		key(TCP, "10.0.0.1", 80),
		key(SCTP, "10.0.0.2", 9000),
		key(TCP, "10.0.0.2", 80),
		key(TCP, "10.0.0.2", 443),
		key(UDP, "10.0.0.2", 53),
		key(TCP, "192.0.2.1", 1),
		key(TCP, "fd00::1", 80),
	}
	for i, k := range ordered {
		for j, o := range ordered {
			if got, want := k.Compare(o), cmpInt(i, j); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", k, o, got, want)
			}
		}
	}
	tb := sample()
	slices.Reverse(tb.Services)
	for i := range tb.Services {
		slices.Reverse(tb.Services[i].Reals)
	}
	if err := tb.Check(); err == nil || !strings.Contains(err.Error(), "the table is not sorted") {
		t.Errorf("Check of a reversed table: %v", err)
	}
	// Repeats of a virtual server and of a real server, which Sort drops.
	tb.Services[0].Reals = append(slices.Clone(tb.Services[0].Reals), tb.Services[0].Reals[0])
	tb.Services = append(tb.Services, tb.Services[0])
	tb.Sort()
	if got, want := string(tb.AppendText(nil)), string(sample().AppendText(nil)); got != want {
		t.Errorf("sorted:\n%s\nwant:\n%s", got, want)
	}
	if got, want := key(TCP, "fd00::10", 80).String(), "tcp [fd00::10]:80"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func cmpInt(i, j int) int {
	switch {
	case i < j:
		return -1
	case i > j:
		return 1
	}
	return 0
}

// TestCheck: what netspec cannot install is refused, saying where.
func TestCheck(t *testing.T) {
	k := key(TCP, "10.0.0.1", 80)
	vs := func(v VirtualServer) *Table { return &Table{Services: []VirtualServer{v}} }
	tests := []struct {
		name string
		tb   *Table
		want string
	}{
		{name: "twice", tb: &Table{Services: []VirtualServer{{Key: k, Scheduler: "rr"}, {Key: k, Scheduler: "rr"}}}, want: "virtual server tcp 10.0.0.1:80 is in the table twice"},
		{name: "unsorted", tb: &Table{Services: []VirtualServer{{Key: key(TCP, "10.0.0.2", 80), Scheduler: "rr"}, {Key: k, Scheduler: "rr"}}}, want: "virtual server tcp 10.0.0.1:80 is after tcp 10.0.0.2:80: the table is not sorted"},
		{name: "scheduler", tb: vs(VirtualServer{Key: k, Scheduler: "xx"}), want: `unknown scheduler "xx": want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh`},
		{name: "protocol", tb: vs(VirtualServer{Key: key(1, "10.0.0.1", 80), Scheduler: "rr"}), want: "unknown protocol 1"},
		{name: "persistence", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Persistence: MaxPersistence + 1}), want: "persistence 2678401: want at most 2678400 seconds"},
		{name: "no address", tb: vs(VirtualServer{Key: Key{Protocol: TCP, Port: 80}, Scheduler: "rr"}), want: "no address"},
		{name: "port 0", tb: vs(VirtualServer{Key: key(TCP, "10.0.0.1", 0), Scheduler: "rr"}), want: "port 0"},
		{name: "zone", tb: vs(VirtualServer{Key: Key{Protocol: TCP, Addr: a("fd00::1%eth0"), Port: 80}, Scheduler: "rr"}), want: "has a zone"},
		{name: "mapped", tb: vs(VirtualServer{Key: key(TCP, "::ffff:10.0.0.1", 80), Scheduler: "rr"}), want: "IPv4-mapped"},
		{name: "loopback", tb: vs(VirtualServer{Key: key(TCP, "127.0.0.1", 80), Scheduler: "rr"}), want: "not a unicast address"},
		{name: "broadcast", tb: vs(VirtualServer{Key: key(UDP, "255.255.255.255", 80), Scheduler: "rr"}), want: "not a unicast address"},
		{name: "real twice", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{dest("10.1.0.1", 1, 1), dest("10.1.0.1", 1, 2)}}), want: "real server 10.1.0.1:1 is in the table twice"},
		{name: "reals unsorted", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{dest("10.1.0.2", 1, 1), dest("10.1.0.1", 1, 1)}}), want: "real server 10.1.0.1:1 is after 10.1.0.2:1"},
		{name: "weight", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{dest("10.1.0.1", 1, MaxWeight+1)}}), want: "weight 65536: want 0 to 65535"},
		{name: "forwarding", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{{Addr: a("10.1.0.1"), Port: 1, Forward: Tunnel}}}), want: "forwarding method tunnel is not supported"},
		{name: "family", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{dest("fd00::1", 1, 1)}}), want: "real server fd00::1 is IPv6 and its virtual server IPv4"},
		{name: "real port 0", tb: vs(VirtualServer{Key: k, Scheduler: "rr", Reals: []RealServer{dest("10.1.0.1", 0, 1)}}), want: "real server 10.1.0.1:0: port 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.tb.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want %q", err, tt.want)
			}
		})
	}
	var empty *Table
	if err := empty.Check(); err != nil {
		t.Errorf("a nil table: %v", err)
	}
}

// TestDiff: virtual servers are added, changed (scheduler, persistence,
// a real server's presence, weight or forwarding) or removed; equal tables
// have no delta.
func TestDiff(t *testing.T) {
	edit := func(f func(tb *Table)) *Table {
		tb := sample()
		f(tb)
		return tb
	}
	k80, k53 := key(TCP, "10.96.0.10", 80), key(UDP, "10.96.0.2", 53)
	tests := []struct {
		name     string
		old, new *Table
		want     Delta
	}{
		{name: "equal", old: sample(), new: sample()},
		{name: "both empty", old: nil, new: &Table{}},
		{name: "all new", old: nil, new: sample(), want: Delta{Added: keysOf(sample())}},
		{name: "all gone", old: sample(), new: nil, want: Delta{Removed: keysOf(sample())}},
		{name: "scheduler", old: sample(), new: edit(func(tb *Table) { tb.Services[2].Scheduler = "lc" }), want: Delta{Changed: []Key{k80}}},
		{name: "persistence", old: sample(), new: edit(func(tb *Table) { tb.Services[0].Persistence = 0 }), want: Delta{Changed: []Key{k53}}},
		{name: "weight", old: sample(), new: edit(func(tb *Table) { tb.Services[2].Reals[1].Weight = 2 }), want: Delta{Changed: []Key{k80}}},
		{name: "forwarding", old: sample(), new: edit(func(tb *Table) { tb.Services[2].Reals[1].Forward = DirectRoute }), want: Delta{Changed: []Key{k80}}},
		{name: "real gone", old: sample(), new: edit(func(tb *Table) { tb.Services[2].Reals = tb.Services[2].Reals[:1] }), want: Delta{Changed: []Key{k80}}},
		{name: "added, changed and removed", old: sample(), new: edit(func(tb *Table) {
			tb.Services[0].Reals = nil                                                                                // changed
			tb.Services = slices.Delete(tb.Services, 3, 4)                                                            // tcp 10.96.0.10:443 removed
			tb.Services = append(tb.Services, VirtualServer{Key: key(TCP, "fd00::20", 80), Scheduler: "rr"})          // added, last
			tb.Services = slices.Insert(tb.Services, 0, VirtualServer{Key: key(TCP, "10.0.0.1", 1), Scheduler: "rr"}) // added, first
		}), want: Delta{Added: []Key{key(TCP, "10.0.0.1", 1), key(TCP, "fd00::20", 80)}, Changed: []Key{k53}, Removed: []Key{key(TCP, "10.96.0.10", 443)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.old, tt.new)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Diff:\n%v\nwant:\n%v", got, tt.want)
			}
			if got.Empty() != (len(tt.want.Keys()) == 0) {
				t.Errorf("Empty() = %t", got.Empty())
			}
			keys := got.Keys()
			if !slices.IsSortedFunc(keys, Key.Compare) || len(keys) != len(got.Added)+len(got.Changed)+len(got.Removed) {
				t.Errorf("Keys() = %v: want every key, ordered", keys)
			}
			if back := Diff(tt.new, tt.old); fmt.Sprint(back.Added, back.Changed, back.Removed) != fmt.Sprint(got.Removed, got.Changed, got.Added) {
				t.Errorf("Diff backwards = %v: want added and removed swapped", back)
			}
		})
	}
}

func keysOf(tb *Table) []Key {
	var out []Key
	for _, vs := range tb.Services {
		out = append(out, vs.Key)
	}
	return out
}

// BenchmarkDiff: the daemon's Update compares the table it installed last
// with the next one, at 10,000 virtual servers of 2 real servers each,
// one real server changed.
func BenchmarkDiff(b *testing.B) {
	old := &Table{}
	for i := range 10000 {
		addr := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		old.Services = append(old.Services, VirtualServer{Key: Key{Protocol: TCP, Addr: addr, Port: 80}, Scheduler: "rr",
			Reals: []RealServer{dest("10.244.1.1", uint16(i+1), 1), dest("10.244.1.2", uint16(i+1), 1)}})
	}
	old.Sort()
	new := &Table{Services: slices.Clone(old.Services)}
	new.Services[5000].Reals = []RealServer{dest("10.244.1.3", 1, 1)}
	b.ReportAllocs()
	for b.Loop() {
		if d := Diff(old, new); len(d.Changed) != 1 {
			b.Fatal(d)
		}
	}
}
