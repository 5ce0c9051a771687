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

func TestFindSerial(t *testing.T) {
	golden, err := os.ReadFile("../../golden/basic/node-1/dns/cluster.local.zone")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		zone    string
		want    uint32
		wantErr string
	}{
		{name: "golden", zone: string(golden), want: 3337470925},
		{name: "renderer", zone: string(zone("cluster.local", 7, "web\tA\t10.0.0.1")), want: 7},
		{name: "class before ttl", zone: "@ IN 5 SOA ns. host. 42 1 2 3 4\n", want: 42},
		{name: "no ttl no class", zone: "example. SOA ns. host. 43 1 2 3 4\n", want: 43},
		{name: "bind ttl units", zone: "@ 1h30m IN SOA ns. host. 44 1 2 3 4\n", want: 44},
		{name: "lower case", zone: "@ 5 in soa ns. host. 45 1 2 3 4\n", want: 45},
		{name: "owner-less line", zone: "@ 5 IN NS ns.\n  5 IN SOA ns. host. 46 1 2 3 4\n", want: 46},
		{name: "max", zone: "@ 5 IN SOA ns. host. 4294967295 1 2 3 4\n", want: 4294967295},
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
		{name: "no SOA", zone: "@ 5 IN NS ns.\n", wantErr: "no SOA record"},
		{name: "empty", zone: "", wantErr: "no SOA record"},
		{name: "two SOAs", zone: "@ 5 IN SOA ns. host. 1 1 2 3 4\n@ 5 IN SOA ns. host. 2 1 2 3 4\n", wantErr: "2 SOA records"},
		{name: "serial too large", zone: "@ 5 IN SOA ns. host. 4294967296 1 2 3 4\n", wantErr: "not a number"},
		{name: "serial not a number", zone: "@ 5 IN SOA ns. host. 12x 1 2 3 4\n", wantErr: "not a number"},
		{name: "serial negative", zone: "@ 5 IN SOA ns. host. -1 1 2 3 4\n", wantErr: "not a number"},
		{name: "serial quoted", zone: "@ 5 IN SOA ns. host. \"1\" 1 2 3 4\n", wantErr: "not a number"},
		{name: "truncated SOA", zone: "@ 5 IN SOA ns. host.\n", wantErr: "has no serial"},
		{name: "unbalanced (", zone: "@ 5 IN SOA ns. host. ( 1 2 3 4 5\n", wantErr: "unbalanced ("},
		{name: "unbalanced )", zone: "@ 5 IN SOA ns. host. 1 2 3 4 5 )\n", wantErr: "unbalanced )"},
		{name: "unterminated string", zone: "@ 5 IN TXT \"abc\n@ 5 IN SOA ns. host. 1 2 3 4 5\n", wantErr: "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := findSerial([]byte(tt.zone))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("findSerial: got %v, %v; want error containing %q", s.value, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("findSerial: %v", err)
			}
			if s.value != tt.want {
				t.Fatalf("serial = %d, want %d", s.value, tt.want)
			}
			if got := tt.zone[s.start:s.end]; got != fmt.Sprint(tt.want) {
				t.Fatalf("serial bytes = %q, want %q", got, fmt.Sprint(tt.want))
			}
			// Replacing the serial changes that token and nothing else.
			re := string(withSerial([]byte(tt.zone), s, 5))
			if want := tt.zone[:s.start] + "5" + tt.zone[s.end:]; re != want {
				t.Fatalf("withSerial = %q, want %q", re, want)
			}
		})
	}
}

func TestRewriteZone(t *testing.T) {
	a := "web\tA\t10.0.0.1"
	b := "web\tA\t10.0.0.2"
	tests := []struct {
		name       string
		old        []byte // nil: no file
		rendered   []byte
		wantSerial uint32
		unchanged  bool
		wantErr    bool // the file in the dir has no readable serial
	}{
		{name: "new zone keeps the rendered serial", rendered: zone("z", 900, a), wantSerial: 900},
		{name: "same content, other rendered serial", old: zone("z", 5, a), rendered: zone("z", 900, a), wantSerial: 5, unchanged: true},
		{name: "same content, same serial", old: zone("z", 900, a), rendered: zone("z", 900, a), wantSerial: 900, unchanged: true},
		{name: "changed, rendered serial higher", old: zone("z", 5, a), rendered: zone("z", 900, b), wantSerial: 6},
		{name: "changed, rendered serial lower", old: zone("z", 5000, a), rendered: zone("z", 3, b), wantSerial: 5001},
		{name: "changed, rendered serial equal", old: zone("z", 5, a), rendered: zone("z", 5, b), wantSerial: 6},
		{name: "changed TTL/header only", old: zone("z", 5, a), rendered: append(zone("z", 1, a), "; trailer\n"...), wantSerial: 6},
		{name: "before the wrap", old: zone("z", 4294967294, a), rendered: zone("z", 1, b), wantSerial: 4294967295},
		{name: "wrap skips 0", old: zone("z", 4294967295, a), rendered: zone("z", 1, b), wantSerial: 1},
		{name: "old serial 0", old: zone("z", 0, a), rendered: zone("z", 77, b), wantSerial: 1},
		{name: "serial digits change length", old: zone("z", 9, a), rendered: zone("z", 1234567890, b), wantSerial: 10},
		{name: "same content, serial with a leading zero", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", " 007 ", 1)), rendered: zone("z", 900, a), wantSerial: 8},
		{name: "same content, serial quoted", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", ` "7" `, 1)), rendered: zone("z", 900, a), wantErr: true},
		{name: "same content, serial over 32 bits", old: []byte(strings.Replace(string(zone("z", 7, a)), " 7 ", " 4294967296 ", 1)), rendered: zone("z", 900, a), wantErr: true},
		{name: "same content, serial longer than the rendered one", old: zone("z", 4294967295, a), rendered: zone("z", 1, a), wantSerial: 4294967295, unchanged: true},
		{name: "old is the rendered zone with a digit more after the serial", old: zone("z", 5, a+"1"), rendered: zone("z", 5, a), wantSerial: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rewriteZone(tt.old, tt.rendered)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; got\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := findSerial(got)
			if err != nil {
				t.Fatal(err)
			}
			if s.value != tt.wantSerial {
				t.Errorf("serial = %d, want %d", s.value, tt.wantSerial)
			}
			if eq := string(got) == string(tt.old); eq != tt.unchanged {
				t.Errorf("unchanged = %v, want %v", eq, tt.unchanged)
			}
			rs, _ := findSerial(tt.rendered)
			if want := withSerial(tt.rendered, rs, tt.wantSerial); string(got) != string(want) {
				t.Errorf("content other than the serial differs from the rendered zone:\n%s", got)
			}
			if tt.old != nil && !tt.unchanged {
				os, _ := findSerial(tt.old)
				if !serialGreater(s.value, os.value) {
					t.Errorf("serial %d is not greater than %d in RFC 1982 arithmetic", s.value, os.value)
				}
			}
		})
	}
	for _, bad := range []struct{ old, rendered string }{
		{old: "", rendered: "@ 5 IN NS ns.\n"},                                   // rendered has no SOA
		{old: "@ 5 IN NS ns.\n", rendered: string(zone("z", 1, a))},              // old has no SOA
		{old: "@ 5 IN SOA a. b. x 1 2 3 4\n", rendered: string(zone("z", 1, a))}, // old serial unreadable
	} {
		if _, err := rewriteZone([]byte(bad.old), []byte(bad.rendered)); err == nil {
			t.Errorf("rewriteZone(%q, %q): no error", bad.old, bad.rendered)
		}
	}
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
	recs[len(recs)/2] += "0"
	changed := zone("cluster.local", 3184719, recs...)
	b.SetBytes(int64(len(old)))
	for _, c := range []struct {
		name     string
		rendered []byte
	}{{"unchanged", same}, {"changed", changed}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := rewriteZone(old, c.rendered); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
