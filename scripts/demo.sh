#!/usr/bin/env bash
# Demo: netspec installs the rules of node-1 of examples/basic into a network
# namespace that plays node-1, and a client reaches every Service through
# them. Needs root, iproute2 and Go (the version go.mod names; a Go >= 1.21
# fetches it by itself unless GOTOOLCHAIN=local); nftables only to show the
# tables at the end (netspec talks netlink). Nothing else: the backends and
# the client are a small Go program written and built here. Works on a fresh
# Debian 12 (apt-get install iproute2 nftables, plus Go from go.dev).
#
#   sudo scripts/demo.sh
#   NETSPEC=/path/to/netspec sudo -E scripts/demo.sh   # use that binary
#   TREE=examples/basic NODE=node-1 CONNECTS=4 sudo -E scripts/demo.sh
#
# Topology (namespaces named netspec-demo-PID-ROLE, deleted at the end, also
# on error or CTRL-C; the host's links, routes and nftables are not touched):
#
#   client (NODE_NET.200) ── node-1 (node-1's InternalIP, netspec's rules,
#                              forwarding) ── one namespace per pod (its pod
#                              IP; a server on each port the plan sends to,
#                              answering with the pod's name)
#
# Services' cluster IPs, ports, node ports, external IPs and the pods behind
# them are read from the plan that `netspec render` writes (plan.json), which
# netspec compiles from TREE/*.yaml.
set -Eeuo pipefail

cd "$(dirname "$0")/.."
TREE=${TREE:-examples/basic}
NODE=${NODE:-node-1}
CONNECTS=${CONNECTS:-4}
NETSPEC=${NETSPEC:-}

die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
if [[ -t 1 ]]; then
	say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi
run() { printf '$ %s\n' "$*"; "$@"; }

[[ $(id -u) == 0 ]] || die "needs root (network namespaces and nftables): sudo $0"
for tool in ip go; do
	command -v "$tool" >/dev/null || die "needs $tool (apt-get install iproute2; Go from go.dev or golang-go)"
done

PREFIX=netspec-demo-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/netspec-demo.XXXXXX")
namespaces=() pids=()

teardown() {
	local rc=$?
	trap - EXIT INT TERM ERR
	set +e
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	for ns in "${namespaces[@]}"; do
		ip netns delete "$ns" 2>/dev/null
	done
	rm -rf "$work"
	if ((${#namespaces[@]})); then
		printf '\ndemo: torn down %d namespaces (%s-*)\n' "${#namespaces[@]}" "$PREFIX"
	fi
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# netns ROLE: makes namespace PREFIX-ROLE with loopback up.
netns() {
	local ns=$PREFIX-$1
	ip netns add "$ns"
	namespaces+=("$ns")
	ip -n "$ns" link set lo up
}

say "building"
if [[ -z $NETSPEC ]]; then
	run go build -o "$work/netspec" ./cmd/netspec
	NETSPEC=$work/netspec
fi
mkdir -p "$work/helper"
cat >"$work/helper/main.go" <<'EOF'
// demo-helper: the demo's backends, client and plan reader.
//
//	demo-helper info PLAN.json                 the node's first IPv4 address, then the IPv4 service CIDRs
//	demo-helper pods PLAN.json                 one line per pod: NAME IP PORT,PORT…
//	demo-helper frontends PLAN.json            one line per frontend: KIND SERVICE ADDR:PORT PROTO
//	                                           (KIND headless: one line per endpoint)
//	demo-helper serve READYFILE NAME PORT…     TCP servers on 0.0.0.0:PORT answering "NAME IP:PORT"
//	demo-helper dial ADDR:PORT N               N connections, each with a fresh socket
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type planJSON struct {
	Node struct {
		IPs []string `json:"ips"`
	} `json:"node"`
	Cluster struct {
		ServiceCIDRs []string `json:"serviceCIDRs"`
	} `json:"cluster"`
	Services []struct {
		Namespace       string   `json:"namespace"`
		Name            string   `json:"name"`
		Type            string   `json:"type"`
		ClusterIPs      []string `json:"clusterIPs"`
		Headless        bool     `json:"headless"`
		ExternalIPs     []string `json:"externalIPs"`
		LoadBalancerIPs []string `json:"loadBalancerIPs"`
		Ports           []struct {
			Name      string `json:"name"`
			Protocol  string `json:"protocol"`
			Port      int    `json:"port"`
			NodePort  int    `json:"nodePort"`
			Endpoints []struct {
				IP   string `json:"ip"`
				Port int    `json:"port"`
				Pod  string `json:"pod"`
			} `json:"endpoints"`
		} `json:"ports"`
	} `json:"services"`
}

func readPlan(path string) *planJSON {
	data, err := os.ReadFile(path)
	check(err)
	var p planJSON
	check(json.Unmarshal(data, &p))
	return &p
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-helper:", err)
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) < 3 {
		check(fmt.Errorf("usage: demo-helper pods|frontends|serve|dial ARGS"))
	}
	switch os.Args[1] {
	case "info":
		p := readPlan(os.Args[2])
		ip := "-"
		for _, a := range p.Node.IPs {
			if !strings.Contains(a, ":") {
				ip = a
				break
			}
		}
		var cidrs []string
		for _, c := range p.Cluster.ServiceCIDRs {
			if !strings.Contains(c, ":") {
				cidrs = append(cidrs, c)
			}
		}
		fmt.Println(ip, strings.Join(cidrs, " "))
	case "pods":
		type pod struct {
			ip    string
			ports []int
		}
		pods := map[string]*pod{}
		var names []string
		for _, s := range readPlan(os.Args[2]).Services {
			for _, port := range s.Ports {
				if port.Protocol != "TCP" {
					continue
				}
				for _, ep := range port.Endpoints {
					name := ep.Pod
					if name == "" {
						name = s.Namespace + "/endpoint-" + ep.IP
					}
					p := pods[name]
					if p == nil {
						p = &pod{ip: ep.IP}
						pods[name] = p
						names = append(names, name)
					}
					if !slices.Contains(p.ports, ep.Port) {
						p.ports = append(p.ports, ep.Port)
					}
				}
			}
		}
		slices.Sort(names)
		for _, n := range names {
			p := pods[n]
			slices.Sort(p.ports)
			var ps []string
			for _, x := range p.ports {
				ps = append(ps, strconv.Itoa(x))
			}
			fmt.Printf("%s %s %s\n", n, p.ip, strings.Join(ps, ","))
		}
	case "frontends":
		p := readPlan(os.Args[2])
		for _, s := range p.Services {
			key := s.Namespace + "/" + s.Name
			if s.Headless || len(s.ClusterIPs) == 0 {
				// No rules: clients reach the pods themselves (DNS gives
				// their IPs).
				for _, port := range s.Ports {
					for _, ep := range port.Endpoints {
						fmt.Printf("headless %s %s %s\n", key, net.JoinHostPort(ep.IP, strconv.Itoa(ep.Port)), port.Protocol)
					}
				}
				continue
			}
			for _, port := range s.Ports {
				hp := func(ip string, n int) string { return net.JoinHostPort(ip, strconv.Itoa(n)) }
				for _, ip := range s.ClusterIPs {
					fmt.Printf("cluster-ip %s %s %s\n", key, hp(ip, port.Port), port.Protocol)
				}
				for _, ip := range s.ExternalIPs {
					fmt.Printf("external-ip %s %s %s\n", key, hp(ip, port.Port), port.Protocol)
				}
				for _, ip := range s.LoadBalancerIPs {
					fmt.Printf("load-balancer-ip %s %s %s\n", key, hp(ip, port.Port), port.Protocol)
				}
				if port.NodePort != 0 {
					for _, ip := range p.Node.IPs {
						fmt.Printf("node-port %s %s %s\n", key, hp(ip, port.NodePort), port.Protocol)
					}
				}
			}
		}
	case "serve":
		ready, name := os.Args[2], os.Args[3]
		for _, port := range os.Args[4:] {
			l, err := net.Listen("tcp4", "0.0.0.0:"+port)
			check(err)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						continue
					}
					go func() {
						defer c.Close()
						fmt.Fprintf(c, "%s %s\n", name, c.LocalAddr())
					}()
				}
			}()
		}
		check(os.WriteFile(ready, nil, 0o644))
		select {}
	case "dial":
		n, err := strconv.Atoi(os.Args[3])
		check(err)
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", os.Args[2], 2*time.Second)
			if err != nil {
				fmt.Println("error:", err)
				continue
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err != nil {
				fmt.Println("error: connected, no answer:", err)
				continue
			}
			fmt.Print(line)
		}
	default:
		check(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}
EOF
printf 'module demohelper\n\ngo 1.22\n' >"$work/helper/go.mod"
printf '$ go build -o %s/demo-helper (an inline program: servers, client, plan reader)\n' "$work"
(cd "$work/helper" && GOWORK=off GOFLAGS= go build -o "$work/demo-helper" .)
helper=$work/demo-helper

say "the plan of $NODE (netspec render, no kernel involved)"
run "$NETSPEC" render "$TREE" --node "$NODE" --out "$work/rendered" --no-cache
planfile=$work/rendered/plan.json
read -r node_ip svc_cidrs < <("$helper" info "$planfile")
[[ $node_ip != - ]] || die "no IPv4 address of $NODE in $planfile (the demo is IPv4 only)"
[[ -n $svc_cidrs ]] || die "no IPv4 service CIDR in $planfile"
client_ip=${node_ip%.*}.200
[[ $client_ip != "$node_ip" ]] || client_ip=${node_ip%.*}.201
mapfile -t pods < <("$helper" pods "$planfile")
mapfile -t frontends < <("$helper" frontends "$planfile")
echo "node $NODE: $node_ip; service CIDR: $svc_cidrs; ${#pods[@]} pods; ${#frontends[@]} frontends"

say "topology"
NODE_NS=$PREFIX-$NODE CLIENT_NS=$PREFIX-client
netns client
netns "$NODE"
# client ── node: the node's InternalIP on its side.
ip -n "$CLIENT_NS" link add eth0 type veth peer name client0 netns "$NODE_NS"
ip -n "$CLIENT_NS" addr add "$client_ip/24" dev eth0
ip -n "$CLIENT_NS" link set eth0 up
ip -n "$NODE_NS" addr add "$node_ip/24" dev client0
ip -n "$NODE_NS" link set client0 up
for cidr in $svc_cidrs; do
	ip -n "$CLIENT_NS" route add "$cidr" via "$node_ip"
done
# (/proc/sys/net is the namespace's own; no sysctl(8) needed.)
ip netns exec "$NODE_NS" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward &&
	echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter && echo 0 >/proc/sys/net/ipv4/conf/default/rp_filter'

echo "client $CLIENT_NS: $client_ip/24, routes $svc_cidrs via $node_ip"
echo "node   $NODE_NS: $node_ip/24, forwarding on"
# External and LoadBalancer IPs are reached through the node, too.
for f in "${frontends[@]}"; do
	read -r kind svc addr proto <<<"$f"
	case $kind in external-ip | load-balancer-ip)
		ip -n "$CLIENT_NS" route replace "${addr%:*}/32" via "$node_ip"
		echo "client route ${addr%:*}/32 via $node_ip ($kind of $svc)"
		;;
	esac
done
# One namespace per pod, joined to the node by a veth pair: the pod IP/32
# in the pod, a route to it on the node, and 169.254.1.1 as the pods'
# gateway (on every node-side veth).
i=0
for line in "${pods[@]}"; do
	read -r pod ip ports <<<"$line"
	role=pod$i
	ns=$PREFIX-$role
	netns "$role"
	ip -n "$NODE_NS" link add "veth$i" type veth peer name eth0 netns "$ns"
	ip -n "$NODE_NS" addr add 169.254.1.1/32 dev "veth$i"
	ip -n "$NODE_NS" link set "veth$i" up
	ip -n "$NODE_NS" route add "$ip/32" dev "veth$i"
	ip -n "$ns" addr add "$ip/32" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add 169.254.1.1 dev eth0
	ip -n "$ns" route add default via 169.254.1.1 dev eth0
	ip netns exec "$ns" "$helper" serve "$work/ready-$i" "$pod" ${ports//,/ } &
	pids+=($!)
	printf 'pod    %s: %-18s %s, serving TCP %s\n' "$ns" "$pod" "$ip" "$ports"
	i=$((i + 1))
done
for ((j = 0; j < i; j++)); do
	for _ in $(seq 100); do [[ -e $work/ready-$j ]] && break; sleep 0.05; done
	[[ -e $work/ready-$j ]] || die "backend ${pods[j]} did not start"
done

state=$work/state
say "netspec apply (inside $NODE_NS)"
run ip netns exec "$NODE_NS" "$NETSPEC" apply "$TREE" --node "$NODE" --state-dir "$state" --no-cache

say "netspec plan --detailed-exitcode: nothing left to do"
set +e
run ip netns exec "$NODE_NS" "$NETSPEC" plan "$TREE" --node "$NODE" --state-dir "$state" --detailed-exitcode --no-cache
rc=$?
set -e
echo "exit status $rc"
((rc == 0)) || die "netspec plan --detailed-exitcode: exit status $rc, want 0 right after apply"

say "connecting from the client, $CONNECTS connections per frontend"
failures=0
for f in "${frontends[@]}"; do
	read -r kind svc addr proto <<<"$f"
	from=$CLIENT_NS
	if [[ $kind == headless ]]; then
		# No cluster IP, no rules: DNS hands out the pods' IPs. The client
		# has no route to pods, so these go from the node.
		kind="headless (no cluster IP), pod IP from the node:" from=$NODE_NS
	fi
	if [[ $proto != TCP ]]; then
		printf '%s %s %s/%s: skipped (the demo connects over TCP)\n' "$svc" "$kind" "$addr" "$proto"
		continue
	fi
	printf '%s via %s %s:\n' "$svc" "$kind" "$addr"
	while IFS= read -r answer; do
		printf '    -> %s\n' "$answer"
		[[ $answer == error:* ]] && failures=$((failures + 1))
	done < <(ip netns exec "$from" "$helper" dial "$addr" "$CONNECTS")
done
((failures == 0)) || echo "demo: $failures connections failed" >&2

say "netspec cleanup"
run ip netns exec "$NODE_NS" "$NETSPEC" cleanup --state-dir "$state"
if command -v nft >/dev/null; then
	run ip netns exec "$NODE_NS" nft list tables
	echo "(no netspec tables left in $NODE_NS)"
fi
((failures == 0)) || exit 1
