package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
)

// kernelView is what the kernel holds of netspec, as status shows it
// without a daemon: read only.
type kernelView struct {
	Read     bool      `json:"read"`            // false: not read (Error says why)
	Error    string    `json:"error,omitempty"` // why the kernel could not be read
	NFTables []nftView `json:"nftables,omitempty"`
	IPVS     *ipvsView `json:"ipvs,omitempty"`
}

// nftView is one of netspec's nftables tables.
type nftView struct {
	Family   string `json:"family"` // ip or ip6
	Present  bool   `json:"present"`
	Chains   int    `json:"chains"`
	Sets     int    `json:"sets"`     // named sets and maps
	Elements int    `json:"elements"` // of the named sets and maps (an interval counts once)
}

// ipvsView is netspec's IPVS virtual servers: those whose address is on
// its interface.
type ipvsView struct {
	Available      bool `json:"available"` // the kernel has IPVS
	Interface      bool `json:"interface"` // netspec-ipvs0 exists
	VirtualServers int  `json:"virtualServers"`
	RealServers    int  `json:"realServers"`
}

// readKernel reads netspec's nftables tables and IPVS virtual servers in
// the network namespace status runs in.
func readKernel() *kernelView {
	k := &kernelView{}
	tables, err := readNFTables()
	if err != nil {
		if isPermission(err) || os.Geteuid() != 0 {
			k.Error = "needs root (or CAP_NET_ADMIN) to read the kernel: " + err.Error()
		} else {
			k.Error = err.Error()
		}
		return k
	}
	k.Read, k.NFTables = true, tables
	v, err := readIPVS()
	if err != nil {
		k.Read, k.Error = false, "ipvs: "+err.Error()
		return k
	}
	k.IPVS = v
	return k
}

// readNFTables counts netspec's nftables tables (nft.Summarize).
func readNFTables() ([]nftView, error) {
	k, err := nft.OpenSystem(0)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	tables, err := nft.Summarize(k)
	if err != nil {
		return nil, err
	}
	out := make([]nftView, len(tables))
	for i, t := range tables {
		out[i] = nftView{Family: t.Family, Present: t.Present, Chains: t.Chains, Sets: t.Sets, Elements: t.Elements}
	}
	return out, nil
}

// readIPVS counts netspec's virtual servers (ipvs.Summarize).
func readIPVS() (*ipvsView, error) {
	s, err := ipvs.OpenSystem(0)
	if errors.Is(err, ipvs.ErrNoIPVS) {
		return &ipvsView{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sum, err := ipvs.Summarize(s)
	if err != nil {
		return nil, err
	}
	return &ipvsView{Available: true, Interface: sum.Interface, VirtualServers: sum.VirtualServers, RealServers: sum.RealServers}, nil
}

func writeKernelView(w io.Writer, k *kernelView) {
	if !k.Read {
		fmt.Fprintf(w, "kernel: not read: %s\n", k.Error)
		return
	}
	fmt.Fprintln(w, "kernel:")
	for _, t := range k.NFTables {
		if !t.Present {
			fmt.Fprintf(w, "  nftables: no table %s %s\n", t.Family, nft.TableName)
			continue
		}
		fmt.Fprintf(w, "  nftables: table %s %s: %s, %s, %s\n", t.Family, nft.TableName,
			plural(t.Chains, "chain"), plural(t.Sets, "set"), plural(t.Elements, "element"))
	}
	switch v := k.IPVS; {
	case !v.Available:
		fmt.Fprintln(w, "  ipvs: not in the kernel")
	case !v.Interface:
		fmt.Fprintf(w, "  ipvs: no interface %s, no virtual server of netspec\n", ipvs.LinkName)
	default:
		fmt.Fprintf(w, "  ipvs: %s, %s (on %s)\n", plural(v.VirtualServers, "virtual server"), plural(v.RealServers, "real server"), ipvs.LinkName)
	}
}
