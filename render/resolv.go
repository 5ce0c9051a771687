package render

import (
	"bytes"
	"net/netip"
)

// ResolvConf renders the resolv.conf the kubelet writes for a pod with
// dnsPolicy ClusterFirst in namespace ns of cluster domain domain, with
// nameserver (netspec's DNS address, the Cluster's dnsAddress) as the
// cluster DNS server: search path, name server and options, in the order
// the container runtime writes them.
//
//	# resolv.conf of a pod in namespace shop (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec
//	search shop.svc.cluster.local svc.cluster.local cluster.local
//	nameserver 169.254.20.10
//	options ndots:5
//
// The kubelet appends the host's own search domains to the search line;
// netspec does not know them, so a loader that wants them appends them.
// ndots:5 is the kubelet's: a name with fewer than 5 dots is tried with
// each search domain first.
//
// Without a nameserver (no dnsAddress) the nameserver line is a comment
// that says so: such a file still gives the search path and ndots.
func ResolvConf(ns, domain string, nameserver netip.Addr) []byte {
	var b bytes.Buffer
	b.WriteString("# resolv.conf of a pod in namespace " + ns + " (dnsPolicy ClusterFirst), as the kubelet writes it — written by netspec\n")
	b.WriteString("search " + ns + ".svc." + domain + " svc." + domain + " " + domain + "\n")
	if nameserver.IsValid() {
		b.WriteString("nameserver " + nameserver.Unmap().String() + "\n")
	} else {
		b.WriteString("# nameserver: none: set the Cluster's spec.dnsAddress to netspec's DNS address\n")
	}
	b.WriteString("options ndots:5\n")
	return b.Bytes()
}
