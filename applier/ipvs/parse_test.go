package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// sample is a table in every form the grammar has: IPv4 and IPv6, TCP,
// UDP and SCTP, persistence, comments and blank lines, lines out of order.
const sample = `# netspec ipvs table
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1

  # the DNS service
-A -u 10.96.0.2:53 -s wrr -p 10800
-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 3
-A --sctp-service 10.96.0.10:9000 -s sh
-A -t [fd00::10]:443 -s mh
-a -t [fd00::10]:443 -r [fd00:244::5]:8443 -m -w 65535
-a -t [fd00::10]:443 -r [fd00:244::6]:8443 -m -w 0
`

func TestParse(t *testing.T) {
	tb, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	want := &Table{Services: []VirtualServer{
		{Key: Key{Protocol: UDP, Addr: a("10.96.0.2"), Port: 53}, Scheduler: "wrr", Persistence: 10800,
			Reals: []RealServer{{Addr: a("10.244.1.9"), Port: 53, Weight: 3}}},
		{Key: Key{Protocol: TCP, Addr: a("10.96.0.10"), Port: 80}, Scheduler: "rr",
			Reals: []RealServer{{Addr: a("10.244.1.5"), Port: 8080, Weight: 1}, {Addr: a("10.244.2.7"), Port: 8080, Weight: 1}}},
		{Key: Key{Protocol: SCTP, Addr: a("10.96.0.10"), Port: 9000}, Scheduler: "sh"},
		{Key: Key{Protocol: TCP, Addr: a("fd00::10"), Port: 443}, Scheduler: "mh",
			Reals: []RealServer{{Addr: a("fd00:244::5"), Port: 8443, Weight: 65535}, {Addr: a("fd00:244::6"), Port: 8443, Weight: 0}}},
	}}
	if !reflect.DeepEqual(tb, want) {
		t.Errorf("Parse:\n%s\nwant:\n%s", tb, want)
	}
	if got, want := fmt.Sprint(tb.Frontends()), "[10.96.0.2 10.96.0.10 fd00::10]"; got != want {
		t.Errorf("Frontends() = %s, want %s", got, want)
	}

	// String is sorted, in the grammar, and parses back to the same.
	wantText := `-A -u 10.96.0.2:53 -s wrr -p 10800
-a -u 10.96.0.2:53 -r 10.244.1.9:53 -m -w 3
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-A --sctp-service 10.96.0.10:9000 -s sh
-A -t [fd00::10]:443 -s mh
-a -t [fd00::10]:443 -r [fd00:244::5]:8443 -m -w 65535
-a -t [fd00::10]:443 -r [fd00:244::6]:8443 -m -w 0
`
	if got := tb.String(); got != wantText {
		t.Errorf("String:\n%s\nwant:\n%s", got, wantText)
	}
	again, err := Parse([]byte(tb.String()))
	if err != nil || !reflect.DeepEqual(again, tb) {
		t.Errorf("Parse(String()) = %v, %v; want the table again", again, err)
	}
}

// TestParseEmpty: no servers is a table, with no frontends.
func TestParseEmpty(t *testing.T) {
	for _, text := range []string{"", "\n\n", "# nothing\n   \t\n"} {
		tb, err := Parse([]byte(text))
		if err != nil || len(tb.Services) != 0 || len(tb.Frontends()) != 0 || tb.String() != "" {
			t.Errorf("Parse(%q) = %v, %v; want an empty table", text, tb, err)
		}
	}
}

// TestParseEveryScheduler: each scheduler and protocol netspec lists is
// accepted (a new one fails here until it is listed).
func TestParseEveryScheduler(t *testing.T) {
	for _, s := range []string{"rr", "wrr", "lc", "wlc", "sh", "dh", "sed", "nq", "mh"} {
		for _, p := range []string{"-t", "-u", "--sctp-service"} {
			text := fmt.Sprintf("-A %s 10.0.0.1:80 -s %s\n-a %s 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n", p, s, p)
			tb, err := Parse([]byte(text))
			if err != nil {
				t.Errorf("%s %s: %v", p, s, err)
				continue
			}
			if tb.String() != text {
				t.Errorf("%s %s: String() = %q, want %q", p, s, tb.String(), text)
			}
		}
	}
	if len(schedulers) != 9 || len(protocols) != 3 {
		t.Errorf("schedulers %v, protocols %v: cover the new ones above", schedulers, protocols)
	}
}

// TestParseErrors: malformed input is refused with the number of the line
// at fault and a message that says what is wrong.
func TestParseErrors(t *testing.T) {
	const vs = "-A -t 10.0.0.1:80 -s rr\n"
	tests := []struct {
		name, text string
		line       int
		want       string
	}{
		{name: "unknown command", text: "# c\n\n-X -t 10.0.0.1:80\n", line: 3, want: `unknown command "-X"`},
		{name: "edit command", text: "-E -t 10.0.0.1:80 -s rr\n", line: 1, want: "command -E is not in the grammar"},
		{name: "word", text: "hello\n", line: 1, want: `unknown command "hello"`},
		{name: "-A alone", text: "-A\n", line: 1, want: "-A needs a protocol and an address"},
		{name: "unknown protocol", text: "-A -x 10.0.0.1:80 -s rr\n", line: 1, want: `unknown protocol option "-x"`},
		{name: "fwmark", text: "-A -f 1 -s rr\n", line: 1, want: "firewall-mark services (-f) are not supported"},
		{name: "no port", text: "-A -t 10.0.0.1 -s rr\n", line: 1, want: `bad virtual server address "10.0.0.1"`},
		{name: "IPv6 without brackets", text: "-A -t fd00::1:80 -s rr\n", line: 1, want: "an IPv6 address in brackets"},
		{name: "IPv4 in brackets", text: "-A -t [10.0.0.1]:80 -s rr\n", line: 1, want: "bad virtual server address"},
		{name: "host name", text: "-A -t example.com:80 -s rr\n", line: 1, want: "bad virtual server address"},
		{name: "port 0", text: "-A -t 10.0.0.1:0 -s rr\n", line: 1, want: "port 0"},
		{name: "port too big", text: "-A -t 10.0.0.1:65536 -s rr\n", line: 1, want: "bad virtual server address"},
		{name: "zone", text: "-A -t [fd00::1%eth0]:80 -s rr\n", line: 1, want: "has a zone"},
		{name: "mapped", text: "-A -t [::ffff:10.0.0.1]:80 -s rr\n", line: 1, want: "IPv4-mapped"},
		{name: "unspecified", text: "-A -t 0.0.0.0:80 -s rr\n", line: 1, want: "not a unicast address"},
		{name: "multicast", text: "-A -u 224.0.0.1:80 -s rr\n", line: 1, want: "not a unicast address"},
		{name: "loopback", text: "-A -t 127.0.0.1:80 -s rr\n", line: 1, want: "not a unicast address"},
		{name: "link-local", text: "-A -t [fe80::1]:80 -s rr\n", line: 1, want: "not a unicast address"},
		{name: "no scheduler", text: "-A -t 10.0.0.1:80\n", line: 1, want: "want -s SCHEDULER after the address, got the end of the line"},
		{name: "scheduler option", text: "-A -t 10.0.0.1:80 -p 10 -s rr\n", line: 1, want: `want -s SCHEDULER after the address, got "-p 10 -s rr"`},
		{name: "unknown scheduler", text: "-A -t 10.0.0.1:80 -s fo\n", line: 1, want: `unknown scheduler "fo": want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh`},
		{name: "no timeout", text: "-A -t 10.0.0.1:80 -s rr -p\n", line: 1, want: "-p needs a timeout"},
		{name: "timeout 0", text: "-A -t 10.0.0.1:80 -s rr -p 0\n", line: 1, want: "bad persistence timeout \"0\""},
		{name: "timeout too long", text: "-A -t 10.0.0.1:80 -s rr -p 2678401\n", line: 1, want: "from 1 to 2678400"},
		{name: "timeout sign", text: "-A -t 10.0.0.1:80 -s rr -p +5\n", line: 1, want: "decimal number"},
		{name: "netmask", text: "-A -t 10.0.0.1:80 -s rr -p 5 -M 255.255.255.0\n", line: 1, want: `unexpected "-M 255.255.255.0"`},
		{name: "virtual server twice", text: vs + "# again\n" + vs, line: 3, want: "declared twice (first on line 1)"},
		{name: "real first", text: "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n", line: 1, want: "which no -A line above declares"},
		{name: "real of another", text: vs + "-a -t 10.0.0.2:80 -r 10.1.0.1:80 -m -w 1\n", line: 2, want: "which no -A line above declares"},
		{name: "real of another protocol", text: vs + "-a -u 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n", line: 2, want: "real server of udp 10.0.0.1:80, which no -A"},
		{name: "real away", text: vs + "-A -t 10.0.0.2:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n", line: 3, want: "must follow its virtual server's -A line (line 1)"},
		{name: "real twice", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 2\n", line: 3, want: "listed twice (first on line 2)"},
		{name: "no -r", text: vs + "-a -t 10.0.0.1:80 10.1.0.1:80 -m -w 1\n", line: 2, want: "want -r ADDR:PORT"},
		{name: "bad real", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1 -m -w 1\n", line: 2, want: `bad real server address "10.1.0.1"`},
		{name: "real port 0", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:0 -m -w 1\n", line: 2, want: "port 0"},
		{name: "families", text: vs + "-a -t 10.0.0.1:80 -r [fd00::1]:80 -m -w 1\n", line: 2, want: "is IPv6 and its virtual server IPv4"},
		{name: "no forwarding", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80\n", line: 2, want: "want -m -w WEIGHT"},
		{name: "direct routing", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -g -w 1\n", line: 2, want: "-g (direct routing) is not supported"},
		{name: "tunnel", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -i -w 1\n", line: 2, want: "-i (tunnelling) is not supported"},
		{name: "weight first", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w 1 -m\n", line: 2, want: "want -m (masquerading)"},
		{name: "no weight", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m\n", line: 2, want: "want -w WEIGHT after -m"},
		{name: "weight too big", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 65536\n", line: 2, want: "from 0 to 65535"},
		{name: "negative weight", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w -1\n", line: 2, want: "decimal number"},
		{name: "after weight", text: vs + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1 -x 2\n", line: 2, want: `unexpected "-x 2" after the weight`},
		{name: "CR line ends", text: "-A -t 10.0.0.1:80 -s rr\r\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w x\r\n", line: 2, want: "bad weight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != tt.line {
				t.Errorf("error %q: want a *ParseError at line %d", err, tt.line)
			}
			prefix := fmt.Sprintf("ipvs.txt:%d: ", tt.line)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want %q…%q", err, prefix, tt.want)
			}
		})
	}
}

// FuzzParse: no input makes Parse panic, and a table it accepts prints
// and parses back to itself.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("-A -t [fd00::10]:80 -s rr -p 1\n-a -t [fd00::10]:80 -r [fd00::1]:1 -m -w 0\n")
	f.Add("-a\n-A -t\n-A -t 1.2.3.4:5 -s\n")
	f.Fuzz(func(t *testing.T, text string) {
		tb, err := Parse([]byte(text))
		if err != nil {
			return
		}
		again, err := Parse([]byte(tb.String()))
		if err != nil || !reflect.DeepEqual(again, tb) {
			t.Fatalf("Parse(String()) = %v, %v for\n%s", again, err, tb)
		}
	})
}
