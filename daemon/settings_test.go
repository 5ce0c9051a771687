package daemon

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// settings are watch's defaults, as its flags give them.
func settings() Settings {
	return Settings{Tree: "tree", Node: "node-1", Dataplane: DataplaneNFTables, IPVSScheduler: "rr", StateDir: "state",
		Resync: DefaultResync, Debounce: DefaultDebounce, RemovalGrace: DefaultRemovalGrace,
		Probes: true, ProbeConcurrency: 64}
}

// TestSettingsOptions: the settings as given become the watcher's
// Options: zero durations off, lists parsed, keys read, the DNS link's
// address as the listen address; each mistake is an error that names
// its flag.
func TestSettingsOptions(t *testing.T) {
	dir := t.TempDir()
	key, short := filepath.Join(dir, "good.key"), filepath.Join(dir, "short.key")
	if err := os.WriteFile(key, []byte("# the fleet's key\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("aGVsbG8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyBytes := make([]byte, 32)
	for i := range keyBytes {
		keyBytes[i] = byte(i)
	}
	base := Options{Tree: "tree", Node: "node-1", Dataplane: DataplaneNFTables, IPVSScheduler: "rr", StateDir: "state",
		Resync: DefaultResync, Debounce: DefaultDebounce, RemovalGrace: DefaultRemovalGrace, Probes: true, ProbeConcurrency: 64}
	with := func(f func(*Options)) Options { o := base; f(&o); return o }
	for _, tc := range []struct {
		name string
		set  func(*Settings)
		want Options
		err  string
	}{{
		name: "defaults",
		set:  func(*Settings) {},
		want: base,
	}, {
		name: "zero durations are off",
		set:  func(s *Settings) { s.Resync, s.Debounce, s.RemovalGrace = 0, 0, 0 },
		want: with(func(o *Options) { o.Resync, o.Debounce, o.RemovalGrace = -1, -1, -1 }),
	}, {
		name: "transfers, upstreams",
		set: func(s *Settings) {
			s.DNSListen, s.DNSTransferTo, s.DNSUpstream = "127.0.0.1:5353", "10.0.0.0/8, 192.0.2.0/24", "192.0.2.53,[2001:db8::53]:5353"
		},
		want: with(func(o *Options) {
			o.DNSListen = "127.0.0.1:5353"
			o.DNSTransferTo = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")}
			o.DNSUpstreams = []string{"192.0.2.53:53", "[2001:db8::53]:5353"}
		}),
	}, {
		name: "a DNS link listens on its default address",
		set:  func(s *Settings) { s.DNSLink, s.DNSUpstream = "netspec0", "192.0.2.53" },
		want: with(func(o *Options) { o.DNSListen, o.DNSUpstreams = "169.254.20.10:53", []string{"192.0.2.53:53"} }),
	}, {
		name: "gossip with a key",
		set: func(s *Settings) {
			s.GossipListen, s.Join, s.GossipKeyFile = "192.0.2.1:7946", "192.0.2.2:7946, 192.0.2.3:7946", key
		},
		want: with(func(o *Options) {
			o.Gossip = &GossipOptions{Listen: "192.0.2.1:7946", Join: []string{"192.0.2.2:7946", "192.0.2.3:7946"}, Keys: [][]byte{keyBytes}}
		}),
	}, {
		name: "gossip in the clear",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure = "192.0.2.1:7946", true },
		want: with(func(o *Options) { o.Gossip = &GossipOptions{Listen: "192.0.2.1:7946", Insecure: true} }),
	}, {
		name: "an unknown data plane",
		set:  func(s *Settings) { s.Dataplane = "iptables" },
		err:  `--dataplane "iptables": want nftables, ipvs or none`,
	}, {
		name: "an unknown scheduler",
		set:  func(s *Settings) { s.IPVSScheduler = "fastest" },
		err:  `--ipvs-scheduler "fastest": want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh`,
	}, {
		name: "no probe at a time",
		set:  func(s *Settings) { s.ProbeConcurrency = 0 },
		err:  "--probe-concurrency 0: want at least 1",
	}, {
		name: "a negative resync",
		set:  func(s *Settings) { s.Resync = -time.Second },
		err:  "--resync -1s: want a positive interval, or 0 for none",
	}, {
		name: "a negative removal grace",
		set:  func(s *Settings) { s.RemovalGrace = -time.Second },
		err:  "--removal-grace -1s: want a duration, or 0 to apply removals at once",
	}, {
		name: "a transfer client that is no CIDR",
		set:  func(s *Settings) { s.DNSListen, s.DNSTransferTo = "127.0.0.1:5353", "10.0.0.1" },
		err:  `--dns-transfer-to: netip.ParsePrefix("10.0.0.1"): no '/'`,
	}, {
		name: "an upstream by name",
		set:  func(s *Settings) { s.DNSListen, s.DNSUpstream = "127.0.0.1:5353", "dns.google" },
		err:  `--dns-upstream: upstream "dns.google": want IP or IP:PORT, or resolv.conf`,
	}, {
		name: "upstreams without a server",
		set:  func(s *Settings) { s.DNSUpstream = "192.0.2.53" },
		err:  "--dns-upstream needs --dns-listen (or --dns-link)",
	}, {
		name: "a DNS link on no address",
		set:  func(s *Settings) { s.DNSLink, s.DNSListen = "netspec0", ":53" },
		err:  `--dns-link needs --dns-listen to be IP:PORT with the link's address (such as 169.254.20.10:53), not ":53"`,
	}, {
		name: "join without gossip",
		set:  func(s *Settings) { s.Join = "192.0.2.1:7946" },
		err:  "--join needs --gossip-listen IP:PORT: the address this node gossips on",
	}, {
		name: "a key without gossip",
		set:  func(s *Settings) { s.GossipKeyFile = key },
		err:  "--gossip-key-file and --gossip-insecure need --gossip-listen IP:PORT",
	}, {
		name: "in the clear without gossip",
		set:  func(s *Settings) { s.GossipInsecure = true },
		err:  "--gossip-key-file and --gossip-insecure need --gossip-listen IP:PORT",
	}, {
		name: "gossip on a name",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure = "node-1:7946", true },
		err:  `--gossip-listen "node-1:7946": want IP:PORT, such as 192.0.2.1:7946`,
	}, {
		name: "gossip on port 0",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure = "127.0.0.1:0", true },
		err:  `--gossip-listen "127.0.0.1:0": want IP:PORT, such as 192.0.2.1:7946`,
	}, {
		name: "gossip without probes",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure, s.Probes = "127.0.0.1:7946", true, false },
		err:  "--gossip-listen shares readiness probes: it needs --probes",
	}, {
		name: "join without a port",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure, s.Join = "127.0.0.1:7946", true, "192.0.2.1" },
		err:  `--join "192.0.2.1": want IP:PORT,...`,
	}, {
		name: "a key and in the clear",
		set:  func(s *Settings) { s.GossipListen, s.GossipInsecure, s.GossipKeyFile = "127.0.0.1:7946", true, key },
		err:  "--gossip-key-file and --gossip-insecure: give one",
	}, {
		name: "a short key",
		set:  func(s *Settings) { s.GossipListen, s.GossipKeyFile = "127.0.0.1:7946", short },
		err:  short + ":1: a key is 16, 24 or 32 bytes, not 5",
	}, {
		name: "gossip without a key",
		set:  func(s *Settings) { s.GossipListen = "127.0.0.1:7946" },
		err:  "gossip without a key: give --gossip-key-file FILE (head -c 32 /dev/urandom | base64 > FILE), or --gossip-insecure for gossip in the clear",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings()
			tc.set(&s)
			got, err := s.Options()
			switch {
			case tc.err != "":
				if err == nil || err.Error() != tc.err {
					t.Errorf("error %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case !reflect.DeepEqual(got, tc.want):
				t.Errorf("got\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
