package nft

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// kernelTable is what the kernel holds of one of netspec's tables, as
// read back: decodeKernel turns it into the model.
type kernelTable struct {
	table  *nftables.Table
	chains map[string]*kernelChain
	sets   map[string]*kernelSet
	// anon are the elements of the table's anonymous sets, by name.
	anon map[string][]nftables.SetElement
}

type kernelChain struct {
	chain *nftables.Chain
	rules []KernelRule // in order; nil when the rules were not read
}

type kernelSet struct {
	set   *nftables.Set
	elems []nftables.SetElement // not read for dynamic sets (the packet path fills them)
}

// dial opens a lasting netlink connection to nftables in the namespace
// nsFd (0: the current one), with socket buffers big enough for a batch
// that replaces tens of thousands of services and for its acknowledgements.
func dial(nsFd int) (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(bigBuffers)}
	if nsFd > 0 {
		opts = append(opts, nftables.WithNetNSFd(nsFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", explain(err))
	}
	return c, nil
}

// The netlink socket's buffers are limits, not allocations. A one-batch
// replace of 20,000 services is about 40 MB of messages, sent in one
// sendmsg; the kernel acknowledges each of its 130,000 messages before
// userspace reads any acknowledgement, at about 1 KiB of buffer each.
const (
	sendBuffer    = 256 << 20
	receiveBuffer = 1 << 30
)

func bigBuffers(c *netlink.Conn) error {
	// SO_*BUFFORCE passes the system limits (root); the plain options are
	// the fallback, capped by net.core.[rw]mem_max.
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		for _, o := range [][3]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, sendBuffer}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, receiveBuffer}} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], o[2]); e != nil {
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], o[2]); e != nil {
					serr = e
				}
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// explain turns the errors of a missing privilege or kernel feature into
// messages that say what to do.
func explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrPermission), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w (netspec needs root, or CAP_NET_ADMIN, to change nftables)", err)
	case errors.Is(err, unix.EPROTONOSUPPORT):
		return fmt.Errorf("%w (the kernel has no nf_tables: load the nf_tables module)", err)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOENT):
		// ENOENT is also what the kernel answers for an expression type
		// it has no module for.
		return fmt.Errorf("%w (is the kernel missing an nftables feature netspec needs? NAT and the rest come from the modules nft_nat, nft_ct, nft_numgen, nft_fib_ipv4/6, nft_reject)", err)
	}
	return err
}

// readTable reads one table back from the kernel, or returns nil when it
// does not exist. Rules come in one dump for the whole table, unless
// withRules is false (then the chains' rules stay nil); each set's
// elements in one dump.
func readTable(k Kernel, fam nftables.TableFamily, name string, withRules bool) (*kernelTable, error) {
	t, err := findTable(k, fam, name)
	if t == nil || err != nil {
		return nil, err
	}
	kt := &kernelTable{table: t, chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}, anon: map[string][]nftables.SetElement{}}
	sets, err := k.Sets(t)
	if err != nil {
		return nil, fmt.Errorf("list sets: %w", explain(err))
	}
	for _, s := range sets {
		var elems []nftables.SetElement
		if !s.Dynamic || s.Anonymous {
			if elems, err = k.Elements(fam, name, s.Name); err != nil {
				return nil, fmt.Errorf("list elements of %s: %w", s.Name, explain(err))
			}
		}
		if s.Anonymous {
			kt.anon[s.Name] = elems
		} else {
			kt.sets[s.Name] = &kernelSet{set: s, elems: elems}
		}
	}
	chains, err := k.Chains(fam)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", explain(err))
	}
	var rules map[string][]KernelRule
	if withRules {
		if rules, err = k.Rules(fam, name, ""); err != nil {
			return nil, err
		}
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != name {
			continue
		}
		kt.chains[ch.Name] = &kernelChain{chain: ch, rules: rules[ch.Name]}
	}
	return kt, nil
}

// findTable returns the kernel's table name of family fam, or nil when
// there is none.
func findTable(k Kernel, fam nftables.TableFamily, name string) (*nftables.Table, error) {
	tables, err := k.Tables(fam)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", explain(err))
	}
	for _, t := range tables {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

// anonKey identifies the elements of an anonymous set, in any order.
func anonKey(elems []nftables.SetElement) string {
	return strings.Join(sortedElementKeys(elems), ",")
}

// familyName is the nft keyword of a table family.
func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	}
	return fmt.Sprintf("family-%d", f)
}
