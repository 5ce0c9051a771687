package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"netspec.dev/netspec/applier/dnslink"
	"netspec.dev/netspec/daemon/dnsserver"
	"netspec.dev/netspec/daemon/fleet"
	"netspec.dev/netspec/render/ipvsmodel"
)

// Settings are netspec watch's settings as a person gives them, one
// field a flag: lists as comma-separated text, a zero duration for
// "off", the gossip keys as a file's path. Options checks them and makes
// the Options of New; its errors name the flags, so that the command
// line prints them as they are.
type Settings struct {
	Tree, Node    string
	Dataplane     string // --dataplane: nftables, ipvs or none
	IPVSScheduler string // --ipvs-scheduler: one of ipvsmodel.Schedulers
	StateDir      string // --state-dir
	MaxFileSize   int64  // --max-file-size

	DNSListen     string // --dns-listen: host:port
	DNSLink       string // --dns-link: the dummy link holding DNSListen's address
	DNSTransferTo string // --dns-transfer-to: CIDRs, comma-separated
	DNSUpstream   string // --dns-upstream: dnsserver.ParseUpstreams
	MetricsListen string // --metrics-listen

	Resync       time.Duration // --resync: 0 is off
	Debounce     time.Duration // --debounce: 0 reloads on every event
	RemovalGrace time.Duration // --removal-grace: 0 applies removals at once

	Probes           bool // --probes
	ProbeConcurrency int  // --probe-concurrency

	GossipListen   string // --gossip-listen: IP:PORT; "" for no gossip
	Join           string // --join: IP:PORT, comma-separated
	GossipKeyFile  string // --gossip-key-file: fleet.ReadKeyFile
	GossipInsecure bool   // --gossip-insecure
}

// Options checks s and makes the watcher's Options of it (without a
// Logger): the lists parsed, the upstreams and the gossip keys read,
// zero durations turned into Options' "off", and, with DNSLink, the
// link's address as DNSListen when none is given. The DNS link itself
// is not made: LinkAddr is its address.
func (s *Settings) Options() (Options, error) {
	o := Options{Tree: s.Tree, Node: s.Node, Dataplane: s.Dataplane, IPVSScheduler: s.IPVSScheduler, StateDir: s.StateDir,
		MaxFileSize: s.MaxFileSize, DNSListen: s.DNSListen, MetricsListen: s.MetricsListen,
		Probes: s.Probes, ProbeConcurrency: s.ProbeConcurrency}
	if s.Dataplane != DataplaneNFTables && s.Dataplane != DataplaneIPVS && s.Dataplane != DataplaneNone {
		return o, fmt.Errorf("--dataplane %q: want nftables, ipvs or none", s.Dataplane)
	}
	if !slices.Contains(ipvsmodel.Schedulers, s.IPVSScheduler) {
		return o, fmt.Errorf("--ipvs-scheduler %q: want one of %s", s.IPVSScheduler, strings.Join(ipvsmodel.Schedulers, ", "))
	}
	if s.ProbeConcurrency < 1 {
		return o, fmt.Errorf("--probe-concurrency %d: want at least 1", s.ProbeConcurrency)
	}
	var err error
	if o.Gossip, err = s.gossip(); err != nil {
		return o, err
	}
	if s.Resync < 0 {
		return o, fmt.Errorf("--resync %s: want a positive interval, or 0 for none", s.Resync)
	}
	if s.RemovalGrace < 0 {
		return o, fmt.Errorf("--removal-grace %s: want a duration, or 0 to apply removals at once", s.RemovalGrace)
	}
	// Options: 0 is the default, negative is off.
	o.Resync, o.Debounce, o.RemovalGrace = offIfZero(s.Resync), offIfZero(s.Debounce), offIfZero(s.RemovalGrace)
	if s.DNSTransferTo != "" {
		for _, c := range strings.Split(s.DNSTransferTo, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return o, fmt.Errorf("--dns-transfer-to: %w", err)
			}
			o.DNSTransferTo = append(o.DNSTransferTo, p)
		}
	}
	if s.DNSUpstream != "" {
		if o.DNSUpstreams, err = dnsserver.ParseUpstreams(s.DNSUpstream, ""); err != nil {
			return o, fmt.Errorf("--dns-upstream: %w", err)
		}
		if s.DNSListen == "" && s.DNSLink == "" {
			return o, errors.New("--dns-upstream needs --dns-listen (or --dns-link)")
		}
	}
	if s.DNSLink != "" {
		addr, err := s.LinkAddr()
		if err != nil {
			return o, err
		}
		if o.DNSListen == "" {
			o.DNSListen = netip.AddrPortFrom(addr, 53).String()
		}
	}
	return o, nil
}

// offIfZero is a duration of Settings (0: off) as Options takes it
// (negative: off).
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// LinkAddr is the address the link of DNSLink holds: DNSListen's, which
// must then be IP:PORT with an address, or dnslink.DefaultAddr (port 53)
// when DNSListen is not given.
func (s *Settings) LinkAddr() (netip.Addr, error) {
	if s.DNSListen == "" {
		return dnslink.DefaultAddr, nil
	}
	ap, err := netip.ParseAddrPort(s.DNSListen)
	if err != nil || ap.Addr().IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("--dns-link needs --dns-listen to be IP:PORT with the link's address (such as %s:53), not %q", dnslink.DefaultAddr, s.DNSListen)
	}
	return ap.Addr(), nil
}

// gossip are the gossip options of s (nil: no gossip), with its keys
// read, or what is wrong with them.
func (s *Settings) gossip() (*GossipOptions, error) {
	if s.GossipListen == "" {
		switch {
		case s.Join != "":
			return nil, errors.New("--join needs --gossip-listen IP:PORT: the address this node gossips on")
		case s.GossipKeyFile != "" || s.GossipInsecure:
			return nil, errors.New("--gossip-key-file and --gossip-insecure need --gossip-listen IP:PORT")
		}
		return nil, nil
	}
	// Port 0 would listen on a port the other members cannot know.
	if ap, err := netip.ParseAddrPort(s.GossipListen); err != nil || ap.Port() == 0 {
		return nil, fmt.Errorf("--gossip-listen %q: want IP:PORT, such as 192.0.2.1:7946", s.GossipListen)
	}
	if !s.Probes {
		return nil, errors.New("--gossip-listen shares readiness probes: it needs --probes")
	}
	g := &GossipOptions{Listen: s.GossipListen, Insecure: s.GossipInsecure}
	if s.Join != "" {
		for _, j := range strings.Split(s.Join, ",") {
			j = strings.TrimSpace(j)
			if _, err := netip.ParseAddrPort(j); err != nil {
				return nil, fmt.Errorf("--join %q: want IP:PORT,...", j)
			}
			g.Join = append(g.Join, j)
		}
	}
	switch {
	case s.GossipKeyFile != "" && s.GossipInsecure:
		return nil, errors.New("--gossip-key-file and --gossip-insecure: give one")
	case s.GossipKeyFile != "":
		keys, err := fleet.ReadKeyFile(s.GossipKeyFile)
		if err != nil {
			return nil, err
		}
		g.Keys = keys
	case !s.GossipInsecure:
		return nil, errors.New("gossip without a key: give --gossip-key-file FILE (head -c 32 /dev/urandom | base64 > FILE), or --gossip-insecure for gossip in the clear")
	}
	return g, nil
}
