package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ParseError is an error at a line of ipvs.txt. Its text is
// "ipvs.txt:LINE: message".
type ParseError struct {
	Line int // 1-based
	Err  error
}

// Error returns "ipvs.txt:LINE: message".
func (e *ParseError) Error() string { return fmt.Sprintf("ipvs.txt:%d: %v", e.Line, e.Err) }

// Unwrap returns the error without its line.
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads an IPVS table in the `ipvsadm -S -n` form that render
// writes, strictly: one command a line, its options in this order,
//
//	-A PROTO ADDR:PORT -s SCHEDULER [-p TIMEOUT]
//	-a PROTO ADDR:PORT -r ADDR:PORT -m -w WEIGHT
//
// where PROTO is -t (TCP), -u (UDP) or --sctp-service (SCTP), an IPv6
// address is written in brackets ([fd00::10]:80), and the -a lines of a
// virtual server follow its -A line. Blank lines and lines whose first
// non-blank character is '#' are skipped. Errors are *ParseError, with
// the number of the line at fault; no input makes Parse panic. The table
// is sorted (see Table).
func Parse(text []byte) (*Table, error) {
	p := parser{declared: map[Key]int{}, cur: -1}
	for i, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		p.n = i + 1
		if err := p.line(f); err != nil {
			return nil, &ParseError{Line: i + 1, Err: err}
		}
	}
	t := &Table{Services: p.services}
	slices.SortFunc(t.Services, func(a, b VirtualServer) int { return compareKeys(a.Key, b.Key) })
	for i := range t.Services {
		slices.SortFunc(t.Services[i].Reals, compareReals)
	}
	return t, nil
}

type parser struct {
	n        int // the number of the line being read
	services []VirtualServer
	declared map[Key]int            // the line of each virtual server's -A
	cur      int                    // index in services of the last -A, -1 before any
	reals    map[netip.AddrPort]int // the line of each real server of cur
}

func (p *parser) line(f []string) error {
	switch f[0] {
	case "-A":
		return p.service(f)
	case "-a":
		return p.real(f)
	case "-E", "-D", "-e", "-d", "-C", "--add-service", "--add-server":
		return fmt.Errorf("command %s is not in the grammar: want -A (virtual server) or -a (real server), with short options", f[0])
	}
	return fmt.Errorf("unknown command %q: want -A (virtual server) or -a (real server)", f[0])
}

func (p *parser) service(f []string) error {
	if len(f) < 3 {
		return fmt.Errorf("-A needs a protocol and an address: -A -t ADDR:PORT -s SCHEDULER [-p TIMEOUT]")
	}
	key, err := parseKey(f[1], f[2])
	if err != nil {
		return err
	}
	vs := VirtualServer{Key: key}
	rest := f[3:]
	if len(rest) < 2 || rest[0] != "-s" {
		return fmt.Errorf("virtual server %s: want -s SCHEDULER after the address, got %s", key, describe(rest))
	}
	vs.Scheduler = rest[1]
	if !slices.Contains(schedulers, vs.Scheduler) {
		return fmt.Errorf("virtual server %s: unknown scheduler %q: want one of %s", key, vs.Scheduler, strings.Join(schedulers, ", "))
	}
	rest = rest[2:]
	if len(rest) > 0 && rest[0] == "-p" {
		if len(rest) < 2 {
			return fmt.Errorf("virtual server %s: -p needs a timeout in seconds", key)
		}
		n, err := parseNumber(rest[1], 1, maxPersistence)
		if err != nil {
			return fmt.Errorf("virtual server %s: bad persistence timeout %q: %w", key, rest[1], err)
		}
		vs.Persistence = uint32(n)
		rest = rest[2:]
	}
	if len(rest) > 0 {
		return fmt.Errorf("virtual server %s: unexpected %s after the scheduler and timeout", key, describe(rest))
	}
	if first, ok := p.declared[key]; ok {
		return fmt.Errorf("virtual server %s declared twice (first on line %d)", key, first)
	}
	p.declared[key] = p.n
	p.services = append(p.services, vs)
	p.cur = len(p.services) - 1
	p.reals = map[netip.AddrPort]int{}
	return nil
}

func (p *parser) real(f []string) error {
	if len(f) < 3 {
		return fmt.Errorf("-a needs a protocol and an address: -a -t ADDR:PORT -r ADDR:PORT -m -w WEIGHT")
	}
	key, err := parseKey(f[1], f[2])
	if err != nil {
		return err
	}
	if p.cur < 0 || p.services[p.cur].Key != key {
		line, ok := p.declared[key]
		switch {
		case !ok:
			return fmt.Errorf("real server of %s, which no -A line above declares: a real server line must follow its virtual server's -A line", key)
		default:
			return fmt.Errorf("real server of %s away from its virtual server: a real server line must follow its virtual server's -A line (line %d), with the other real servers of that virtual server", key, line)
		}
	}
	vs := &p.services[p.cur]
	rest := f[3:]
	if len(rest) < 2 || rest[0] != "-r" {
		return fmt.Errorf("real server of %s: want -r ADDR:PORT after the virtual server's address, got %s", key, describe(rest))
	}
	ap, err := parseAddrPort(rest[1], "real server")
	if err != nil {
		return fmt.Errorf("real server of %s: %w", key, err)
	}
	r := RealServer{Addr: ap.Addr(), Port: ap.Port()}
	if err := checkFamilies(vs.Addr, r.Addr); err != nil {
		return fmt.Errorf("virtual server %s: %w", key, err)
	}
	rest = rest[2:]
	if len(rest) == 0 {
		return fmt.Errorf("real server %s of %s: want -m -w WEIGHT after the address", ap, key)
	}
	switch rest[0] {
	case "-m":
	case "-g":
		return fmt.Errorf("real server %s of %s: forwarding method -g (direct routing) is not supported: netspec masquerades (-m)", ap, key)
	case "-i":
		return fmt.Errorf("real server %s of %s: forwarding method -i (tunnelling) is not supported: netspec masquerades (-m)", ap, key)
	default:
		return fmt.Errorf("real server %s of %s: want -m (masquerading) after the address, got %s", ap, key, describe(rest))
	}
	rest = rest[1:]
	if len(rest) < 2 || rest[0] != "-w" {
		return fmt.Errorf("real server %s of %s: want -w WEIGHT after -m, got %s", ap, key, describe(rest))
	}
	n, err := parseNumber(rest[1], 0, maxWeight)
	if err != nil {
		return fmt.Errorf("real server %s of %s: bad weight %q: %w", ap, key, rest[1], err)
	}
	r.Weight = int(n)
	if rest = rest[2:]; len(rest) > 0 {
		return fmt.Errorf("real server %s of %s: unexpected %s after the weight", ap, key, describe(rest))
	}
	if first, ok := p.reals[ap]; ok {
		return fmt.Errorf("real server %s of %s listed twice (first on line %d)", ap, key, first)
	}
	p.reals[ap] = p.n
	vs.Reals = append(vs.Reals, r)
	return nil
}

// parseKey reads a protocol option and a virtual server's ADDR:PORT.
func parseKey(opt, addr string) (Key, error) {
	var proto Protocol
	switch opt {
	case "-t":
		proto = TCP
	case "-u":
		proto = UDP
	case "--sctp-service":
		proto = SCTP
	case "-f":
		return Key{}, errors.New("firewall-mark services (-f) are not supported: want -t (TCP), -u (UDP) or --sctp-service (SCTP)")
	default:
		return Key{}, fmt.Errorf("unknown protocol option %q: want -t (TCP), -u (UDP) or --sctp-service (SCTP)", opt)
	}
	ap, err := parseAddrPort(addr, "virtual server")
	if err != nil {
		return Key{}, err
	}
	return Key{Protocol: proto, Addr: ap.Addr(), Port: ap.Port()}, nil
}

// parseAddrPort reads ADDR:PORT, an IPv6 address in brackets.
func parseAddrPort(s, what string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad %s address %q: want ADDR:PORT, an IPv6 address in brackets ([fd00::10]:80)", what, s)
	}
	if err := checkAddrPort(ap); err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad %s address %q: %w", what, s, err)
	}
	return ap, nil
}

// parseNumber reads a decimal number from min to max: digits only.
func parseNumber(s string, min, max uint64) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("want a decimal number from %d to %d", min, max)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("want a number from %d to %d", min, max)
	}
	return n, nil
}

// describe quotes the tokens left on a line, for messages.
func describe(rest []string) string {
	if len(rest) == 0 {
		return "the end of the line"
	}
	return strconv.Quote(strings.Join(rest, " "))
}
