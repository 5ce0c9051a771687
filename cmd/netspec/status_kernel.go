package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/google/nftables"

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

func readNFTables() ([]nftView, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	var out []nftView
	for _, fam := range []struct {
		f    nftables.TableFamily
		name string
	}{{nftables.TableFamilyIPv4, "ip"}, {nftables.TableFamilyIPv6, "ip6"}} {
		v := nftView{Family: fam.name}
		tables, err := c.ListTablesOfFamily(fam.f)
		if err != nil {
			return nil, fmt.Errorf("nftables: list tables: %w", err)
		}
		var t *nftables.Table
		for _, x := range tables {
			if x.Name == nft.TableName {
				t = x
			}
		}
		if t != nil {
			v.Present = true
			chains, err := c.ListChainsOfTableFamily(fam.f)
			if err != nil {
				return nil, fmt.Errorf("nftables: list chains: %w", err)
			}
			for _, ch := range chains {
				if ch.Table.Name == nft.TableName {
					v.Chains++
				}
			}
			sets, err := c.GetSets(t)
			if err != nil {
				return nil, fmt.Errorf("nftables: list sets of %s %s: %w", fam.name, nft.TableName, err)
			}
			for _, s := range sets {
				if s.Anonymous {
					continue
				}
				v.Sets++
				els, err := c.GetSetElements(s)
				if err != nil {
					return nil, fmt.Errorf("nftables: elements of set %s: %w", s.Name, err)
				}
				for _, e := range els {
					if !e.IntervalEnd {
						v.Elements++
					}
				}
			}
		}
		out = append(out, v)
	}
	return out, nil
}

func readIPVS() (*ipvsView, error) {
	v := &ipvsView{}
	s, err := ipvs.OpenSystem(0)
	if errors.Is(err, ipvs.ErrNoIPVS) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	defer s.Close()
	v.Available = true
	link, err := s.Link()
	if err != nil {
		return nil, err
	}
	if !link.Exists {
		return v, nil
	}
	v.Interface = true
	owned := map[netip.Addr]bool{}
	for _, p := range link.Addrs {
		owned[p.Addr()] = true
	}
	svcs, err := s.Services()
	if err != nil {
		return nil, err
	}
	for _, svc := range svcs {
		if !svc.Addr.IsValid() || !owned[svc.Addr] {
			continue
		}
		v.VirtualServers++
		reals, err := s.Reals(svc.Key)
		if err != nil {
			return nil, err
		}
		v.RealServers += len(reals)
	}
	return v, nil
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
