package state

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// zone renders a zone the way render.ZoneFile does, with the given SOA
// serial and records (each "name\tTYPE\tdata").
func zone(name string, serial uint32, records ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "; zone %s — written by netspec from the tree; do not edit\n", name)
	fmt.Fprintf(&b, "$ORIGIN %s.\n$TTL 5\n", name)
	fmt.Fprintf(&b, "@\t5\tIN\tSOA\tlocalhost. hostmaster.%s. %d 7200 1800 86400 5\n", name, serial)
	b.WriteString("@\t5\tIN\tNS\tlocalhost.\n")
	for _, r := range records {
		n, rest, _ := strings.Cut(r, "\t")
		fmt.Fprintf(&b, "%s\t5\tIN\t%s\n", n, rest)
	}
	return []byte(b.String())
}

func TestZoneSerial(t *testing.T) {
	golden, err := os.ReadFile("../../golden/basic/node-1/dns/cluster.local.zone")
	if err != nil {
		t.Fatal(err)
	}
	generate := "$GENERATE 0-65535 h$ 5 A 10.0.0.1\n"
	tests := []struct {
		name    string
		zone    string
		origin  string // "": z
		want    uint32
		wantErr string
	}{
		{name: "golden", zone: string(golden), origin: "cluster.local", want: 3337470925},
		{name: "renderer", zone: string(zone("cluster.local", 7, "web\tA\t10.0.0.1")), want: 7},
		{name: "class before ttl", zone: "@ IN 5 SOA ns. host. 42 1 2 3 4\n", want: 42},
		{name: "no ttl no class", zone: "$TTL 5\nexample. SOA ns. host. 43 1 2 3 4\n", want: 43},
		{name: "bind ttl units", zone: "@ 1h30m IN SOA ns. host. 44 1 2 3 4\n", want: 44},
		{name: "lower case", zone: "@ 5 in soa ns. host. 45 1 2 3 4\n", want: 45},
		{name: "owner-less line", zone: "@ 5 IN NS ns.\n  5 IN SOA ns. host. 46 1 2 3 4\n", want: 46},
		{name: "max", zone: "@ 5 IN SOA ns. host. 4294967295 1 2 3 4\n", want: 4294967295},
		{name: "leading zero", zone: "@ 5 IN SOA ns. host. 007 1 2 3 4\n", want: 7},
		{name: "parentheses", zone: "@ 5 IN SOA ns. host. (\n  47 ; serial\n  7200 1800 86400 5 )\nwww 5 IN A 1.2.3.4\n", want: 47},
		{name: "serial on first line of parentheses", zone: "@ 5 IN SOA ns. host. ( 48\n 1 2 3 4 )\n", want: 48},
		{
			name: "SOA in comments, strings and names",
			zone: "; @ 5 IN SOA ns. host. 1 1 2 3 4\n" +
				"soa 5 IN TXT \"@ 5 IN SOA ns. host. 2 1 2 3 4\" ; ( SOA\n" +
				"$ORIGIN soa.\n" +
				"x 5 IN CNAME soa.\n" +
				"@\t5\tIN\tSOA\tns. host. 49 1 2 3 4\n",
			want: 49,
		},
		{name: "origin from the file's name", zone: "@ 5 IN SOA ns. host. 50 1 2 3 4\nweb 5 IN A 10.0.0.1\n", origin: "cluster.local", want: 50},
		{name: "a few generated records", zone: "@ 5 IN SOA ns. host. 51 1 2 3 4\n$GENERATE 1-100 h$ 5 A 10.0.0.$\n", want: 51},
		{name: "no SOA", zone: "@ 5 IN NS ns.\n", wantErr: "no SOA record"},
		{name: "empty", zone: "", wantErr: "no SOA record"},
		{name: "two SOAs", zone: "@ 5 IN SOA ns. host. 1 1 2 3 4\n@ 5 IN SOA ns. host. 2 1 2 3 4\n", wantErr: "2 SOA records"},
		{name: "serial too large", zone: "@ 5 IN SOA ns. host. 4294967296 1 2 3 4\n", wantErr: `bad SOA zone parameter: "4294967296" at line: 1:32`},
		{name: "serial not a number", zone: "@ 5 IN SOA ns. host. 12x 1 2 3 4\n", wantErr: "bad SOA zone parameter"},
		{name: "serial negative", zone: "@ 5 IN SOA ns. host. -1 1 2 3 4\n", wantErr: "bad SOA zone parameter"},
		{name: "serial quoted", zone: "@ 5 IN SOA ns. host. \"1\" 1 2 3 4\n", wantErr: "bad SOA zone parameter"},
		{name: "serial with a unit", zone: "@ 5 IN SOA ns. host. 1h 1 2 3 4\n", wantErr: "bad SOA zone parameter"},
		{name: "truncated SOA", zone: "@ 5 IN SOA ns. host.\n", wantErr: "bad SOA zone parameter"},
		{name: "unbalanced (", zone: "@ 5 IN SOA ns. host. ( 1 2 3 4 5\n", wantErr: "unbalanced brace"},
		{name: "unbalanced )", zone: "@ 5 IN SOA ns. host. 1 2 3 4 5 )\n", wantErr: "extra closing brace"},
		{name: "unterminated string", zone: "@ 5 IN TXT \"abc\n@ 5 IN SOA ns. host. 1 2 3 4 5\n", wantErr: "bad TXT"},
		{name: "not a zone", zone: "hand edited\n", wantErr: "line: 1:"},
		{name: "$INCLUDE refused", zone: "$INCLUDE /etc/hostname\n@ 5 IN SOA ns. host. 1 2 3 4 5\n", wantErr: "$INCLUDE directive not allowed"},
		{
			name:    "more generated records than bytes",
			zone:    "@ 5 IN SOA ns. host. 1 2 3 4 5\n" + strings.Repeat(generate, 3),
			wantErr: "more records than bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := tt.origin
			if origin == "" {
				origin = "z"
			}
			s, err := zoneSerial([]byte(tt.zone), origin)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("zoneSerial: got %v, %v; want error containing %q", s, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("zoneSerial: %v", err)
			}
			if s != tt.want {
				t.Fatalf("serial = %d, want %d", s, tt.want)
			}
		})
	}
}

func TestRenderedSerial(t *testing.T) {
	golden, err := os.ReadFile("../../golden/basic/node-1/dns/10.in-addr.arpa.zone")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		zone    string
		want    uint32
		wantErr string
	}{
		{name: "golden", zone: string(golden), want: 694177931},
		{name: "renderer", zone: string(zone("cluster.local", 7, "web\tA\t10.0.0.1")), want: 7},
		{name: "no records", zone: string(zone("z", 4294967295)), want: 4294967295},
		{name: "spaces, blank lines, CRLF", zone: "\n; c\r\n$TTL 5\r\n\n@ 5 IN SOA ns. host. 8 1 2 3 4\r\nx 5 IN A 10.0.0.8\r\n", want: 8},
		{name: "no SOA", zone: "@ 5 IN NS ns.\n", wantErr: "no SOA record"},
		{name: "SOA not first", zone: "@ 5 IN NS ns.\n@ 5 IN SOA ns. host. 1 1 2 3 4\n", wantErr: "no SOA record first"},
		{name: "empty", zone: "", wantErr: "no SOA record"},
		{name: "SOA over lines", zone: "@ 5 IN SOA ns. host. (\n 1 2 3 4 5 )\n", wantErr: "not alone on its line"},
		{name: "comment on the SOA's line", zone: "@ 5 IN SOA ns. host. 1 2 3 4 5 ; x\n", wantErr: "not alone on its line"},
		{name: "serial with a leading zero", zone: "@ 5 IN SOA ns. host. 01 2 3 4 5\n", wantErr: "not written as a plain decimal"},
		{name: "unreadable", zone: "@ 5 IN SOA ns. host. x 2 3 4 5\n", wantErr: "bad SOA zone parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := renderedSerial([]byte(tt.zone), "z")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("renderedSerial: got %v, %v; want error containing %q", s.value, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("renderedSerial: %v", err)
			}
			if s.value != tt.want {
				t.Fatalf("serial = %d, want %d", s.value, tt.want)
			}
			if got := tt.zone[s.start:s.end]; got != fmt.Sprint(tt.want) {
				t.Fatalf("serial bytes = %q, want %q", got, fmt.Sprint(tt.want))
			}
			// Replacing the serial changes that token and nothing else,
			// and the parser reads the new serial.
			re := withSerial([]byte(tt.zone), s, 5)
			if want := tt.zone[:s.start] + "5" + tt.zone[s.end:]; string(re) != want {
				t.Fatalf("withSerial = %q, want %q", re, want)
			}
			if v, err := zoneSerial(re, "z"); err != nil || v != 5 {
				t.Fatalf("serial after withSerial = %d, %v; want 5", v, err)
			}
		})
	}
}

func TestRewriteZone(t *testing.T) {
	a := "web\tA\t10.0.0.1"
	b := "web\tA\t10.0.0.2"
	// handWritten is zone("z", serial, a) as a person would write it:
	// other spacing, names fully qualified, comments, the SOA over lines.
	handWritten := func(serial uint32, records ...string) []byte {
		s := fmt.Sprintf("$TTL 5\nz. 5 SOA localhost. hostmaster.z. ( %d ; serial\n 7200 1800 86400 5 )\nz.  5 NS localhost.\n", serial)
		for _, r := range records {
			s += "; a record\n" + strings.ReplaceAll(strings.Replace(r, "\t", ".z. 5 IN ", 1), "\t", "  ") + "\n"
		}
		return []byte(s)
	}
	tests := []struct {
		name       string
		old        []byte // nil: no file
		rendered   []byte
		wantSerial uint32
		unchanged  bool // old is kept as it is
		wantErr    bool // the file in the dir has no readable serial
	}{
		{name: "new zone keeps the rendered serial", rendered: zone("z", 900, a), wantSerial: 900},
		{name: "same content, other rendered serial", old: zone("z", 5, a), rendered: zone("z", 900, a), wantSerial: 5, unchanged: true},
		{name: "same content, same serial", old: zone("z", 900, a), rendered: zone("z", 900, a), wantSerial: 900, unchanged: true},
		{name: "changed, rendered serial higher", old: zone("z", 5, a), rendered: zone("z", 900, b), wantSerial: 6},
		{name: "changed, rendered serial lower", old: zone("z", 5000, a), rendered: zone("z", 3, b), wantSerial: 5001},
		{name: "changed, rendered serial equal", old: zone("z", 5, a), rendered: zone("z", 5, b), wantSerial: 6},
		{name: "a record added", old: zone("z", 5, a), rendered: zone("z", 1, a, b), wantSerial: 6},
		{name: "a record removed", old: zone("z", 5, a, b), rendered: zone("z", 1, a), wantSerial: 6},
		{name: "records reordered", old: zone("z", 5, a, b), rendered: zone("z", 1, b, a), wantSerial: 6},
		{name: "a TTL changed", old: zone("z", 5, a), rendered: []byte(strings.Replace(string(zone("z", 1, a)), "web\t5", "web\t6", 1)), wantSerial: 6},
		{name: "the SOA changed but for its serial", old: zone("z", 5, a), rendered: []byte(strings.Replace(string(zone("z", 1, a)), " 7200 ", " 7201 ", 1)), wantSerial: 6},
		{name: "a comment added: no record changed", old: zone("z", 5, a), rendered: append(zone("z", 1, a), "; trailer\n"...), wantSerial: 5, unchanged: true},
		{name: "written by hand, same records", old: handWritten(5, a), rendered: zone("z", 900, a), wantSerial: 5, unchanged: true},
		{name: "written by hand, other records", old: handWritten(5, a), rendered: zone("z", 900, b), wantSerial: 6},
		{name: "owner names in another case", old: []byte(strings.Replace(string(zone("z", 5, a)), "web", "WEB", 1)), rendered: zone("z", 900, a), wantSerial: 5, unchanged: true},
		{name: "before the wrap", old: zone("z", 4294967294, a), rendered: zone("z", 1, b), wantSerial: 4294967295},
		{name: "wrap skips 0", old: zone("z", 4294967295, a), rendered: zone("z", 1, b), wantSerial: 1},
		{name: "old serial 0", old: zone("z", 0, a), rendered: zone("z", 77, b), wantSerial: 1},
		{name: "serial digits change length", old: zone("z", 9, a), rendered: zone("z", 1234567890, b), wantSerial: 10},
		{name: "same content, serial with a leading zero", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", " 007 ", 1)), rendered: zone("z", 900, a), wantSerial: 7, unchanged: true},
		{name: "changed, serial with a leading zero", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", " 007 ", 1)), rendered: zone("z", 900, b), wantSerial: 8},
		{name: "same content, serial quoted", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", ` "7" `, 1)), rendered: zone("z", 900, a), wantErr: true},
		{name: "same content, serial over 32 bits", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", " 4294967296 ", 1)), rendered: zone("z", 900, a), wantErr: true},
		{name: "same content, serial longer than the rendered one", old: zone("z", 4294967295, a), rendered: zone("z", 1, a), wantSerial: 4294967295, unchanged: true},
		{name: "old is the rendered zone with a digit more after the serial", old: zone("z", 5, a+"1"), rendered: zone("z", 5, a), wantSerial: 6},
		{name: "same records and a second SOA", old: append(zone("z", 5, a), "@ 5 IN SOA localhost. hostmaster.z. 9 7200 1800 86400 5\n"...), rendered: zone("z", 900, a), wantErr: true},
		{name: "old cut short in a record", old: zone("z", 5, a)[:len(zone("z", 5, a))-4], rendered: zone("z", 900, a), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rewriteZone(tt.old, tt.rendered, "z")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; got\n%s", got)
				}
				if !strings.Contains(err.Error(), "zone file in the state dir") {
					t.Fatalf("error %q does not blame the zone file in the state dir", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := zoneSerial(got, "z")
			if err != nil {
				t.Fatal(err)
			}
			if s != tt.wantSerial {
				t.Errorf("serial = %d, want %d", s, tt.wantSerial)
			}
			if eq := string(got) == string(tt.old); eq != tt.unchanged {
				t.Errorf("unchanged = %v, want %v", eq, tt.unchanged)
			}
			if tt.unchanged {
				return
			}
			rs, err := renderedSerial(tt.rendered, "z")
			if err != nil {
				t.Fatal(err)
			}
			if want := withSerial(tt.rendered, rs, tt.wantSerial); string(got) != string(want) {
				t.Errorf("content other than the serial differs from the rendered zone:\n%s", got)
			}
			if tt.old != nil {
				os, _ := zoneSerial(tt.old, "z")
				if !serialGreater(s, os) {
					t.Errorf("serial %d is not greater than %d in RFC 1982 arithmetic", s, os)
				}
			}
		})
	}
	for _, bad := range []struct{ old, rendered, wantErr string }{
		{old: "", rendered: "@ 5 IN NS ns.\n", wantErr: "rendered zone: no SOA record"},
		{old: "@ 5 IN NS ns.\n", rendered: string(zone("z", 1, a)), wantErr: "zone file in the state dir: no SOA record"},
		{old: "@ 5 IN SOA a. b. x 1 2 3 4\n", rendered: string(zone("z", 1, a)), wantErr: "zone file in the state dir: dns: bad SOA zone parameter"},
		{old: string(zone("z", 1, a)), rendered: string(zone("z", 1, a)) + "x 5 IN A 1.2.3\n", wantErr: "rendered zone: dns: bad A A"},
	} {
		if _, err := rewriteZone([]byte(bad.old), []byte(bad.rendered), "z"); err == nil || !strings.Contains(err.Error(), bad.wantErr) {
			t.Errorf("rewriteZone(%q, %q) = %v, want an error containing %q", bad.old, bad.rendered, err, bad.wantErr)
		}
	}
}

// FuzzRewriteZone: whatever the file in the dir holds, rewriteZone does
// not panic, and when it does not refuse the file it keeps it (the same
// records, or the rendered zone with its serial the file's) or writes the
// rendered zone with the file's serial + 1.
func FuzzRewriteZone(f *testing.F) {
	a := "web\tA\t10.0.0.1"
	rendered := zone("z", 900, a)
	rs, err := renderedSerial(rendered, "z")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(zone("z", 5, a)), string(zone("z", 5, "web\tA\t10.0.0.2")), "", "@ 5 IN SOA ns. host. ( 1\n",
		"$GENERATE 1-3 h$ 5 A 10.0.0.$\n@ 5 IN SOA ns. host. 1 2 3 4 5\n", "$INCLUDE /dev/zero\n", "@ 5 IN TXT \"\\\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, old []byte) {
		got, err := rewriteZone(old, rendered, "z")
		if err != nil {
			return
		}
		prev, err := zoneSerial(old, "z")
		if err != nil {
			if !sameButSerial(old, rendered, rs) {
				t.Fatalf("an unreadable file (%v) taken for %q", err, got)
			}
			return
		}
		if string(got) == string(old) {
			return
		}
		if want := withSerial(rendered, rs, nextSerial(prev)); string(got) != string(want) {
			t.Fatalf("got %q, want the rendered zone with serial %d", got, nextSerial(prev))
		}
	})
}

// serialGreater is s1 > s2 in RFC 1982 serial arithmetic (SERIAL_BITS 32).
func serialGreater(s1, s2 uint32) bool {
	return (s1 < s2 && s2-s1 > 1<<31) || (s1 > s2 && s1-s2 < 1<<31)
}

func TestNextSerialMonotonicAcrossTheWrap(t *testing.T) {
	s := uint32(4294967290)
	for range 20 {
		n := nextSerial(s)
		if n == 0 || !serialGreater(n, s) || n-s > 2 {
			t.Fatalf("nextSerial(%d) = %d", s, n)
		}
		s = n
	}
	if s != 15 {
		t.Fatalf("after 20 steps from 4294967290: %d, want 15 (0 skipped)", s)
	}
}

// BenchmarkRewriteZone: a reload's serial rule on a zone of 30,000
// records (a 10,000-Service tree's cluster zone is about 1.7 MB), unchanged
// and changed.
func BenchmarkRewriteZone(b *testing.B) {
	recs := make([]string, 30000)
	for i := range recs {
		recs[i] = fmt.Sprintf("svc-%d.ns-%d.svc\tA\t10.%d.%d.%d", i, i%10, i>>16&255, i>>8&255, i&255)
	}
	old := zone("cluster.local", 41, recs...)
	same := zone("cluster.local", 3184719, recs...)
	recs[len(recs)/2] = "changed.svc\tA\t10.255.255.255"
	changed := zone("cluster.local", 3184719, recs...)
	b.SetBytes(int64(len(old)))
	for _, c := range []struct {
		name     string
		rendered []byte
	}{{"unchanged", same}, {"changed", changed}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := rewriteZone(old, c.rendered, "cluster.local"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanUnchangedZones: what the zones cost an apply of an
// unchanged plan (Plan, as Apply compares before it writes; every file
// read, as an Apply after Forget does): a cluster zone of 30,000 records
// and 64 reverse zones of 500, each rendered with another serial than
// the one in the dir.
func BenchmarkPlanUnchangedZones(b *testing.B) {
	records := func(n int, f func(i int) string) []string {
		rs := make([]string, n)
		for i := range rs {
			rs[i] = f(i)
		}
		return rs
	}
	d, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	files := func(serial uint32) map[string][]byte {
		m := map[string][]byte{"dns/cluster.local.zone": zone("cluster.local", serial, records(30000, func(i int) string {
			return fmt.Sprintf("svc-%d.ns-%d.svc\tA\t10.%d.%d.%d", i, i%10, i>>16&255, i>>8&255, i&255)
		})...)}
		for z := range 64 {
			name := fmt.Sprintf("%d.10.in-addr.arpa", z)
			m["dns/"+name+".zone"] = zone(name, serial+uint32(z), records(500, func(i int) string {
				return fmt.Sprintf("%d.%d\tPTR\tsvc-%d.ns-%d.svc.cluster.local.", i&255, i>>8, i, z)
			})...)
		}
		return m
	}
	if _, err := d.ApplyRecord(bytesFiles(files(7)), nil, fullOf("{}")); err != nil {
		b.Fatal(err)
	}
	again := bytesFiles(files(3184719))
	for b.Loop() {
		ch, err := d.PlanFiles(again)
		if err != nil || !ch.Empty() {
			b.Fatalf("PlanFiles = %+v, %v; want no change", ch, err)
		}
	}
}

// Serial returns the SOA serial of the zone file the dir holds for zone
// (a zone name, with or without the trailing dot), and false when there is
// none or it cannot be read.
func (d *Dir) Serial(zone string) (uint32, bool) {
	rel := dnsDir + "/" + strings.TrimSuffix(zone, ".") + ".zone"
	if !IsManaged(rel) {
		return 0, false
	}
	b, err := d.readHeld(rel)
	if err != nil || b == nil {
		return 0, false
	}
	s, err := zoneSerial(b, zone)
	if err != nil {
		return 0, false
	}
	return s, true
}

// zoneSerial is the serial of the one SOA of a zone file of the dir, as
// sameRecords reads it.
func zoneSerial(data []byte, origin string) (uint32, error) {
	_, serial, err := sameRecords(data, data, origin)
	return serial, err
}
