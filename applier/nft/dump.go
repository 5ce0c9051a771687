package nft

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"reflect"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ruleDumper reads all rules of a table in one netlink dump.
// google/nftables v0.3.0 only lists the rules of one chain per request,
// and a round trip per chain made reading back a 10,000-service table
// take seconds.
type ruleDumper struct {
	conn *netlink.Conn
	buf  []byte
}

func newRuleDumper(nsFd int) (*ruleDumper, error) {
	c, err := dialNetfilter(nsFd)
	if err != nil {
		return nil, err
	}
	return &ruleDumper{conn: c}, nil
}

// dialNetfilter opens a netfilter netlink socket in the namespace nsFd
// (0: the current one).
func dialNetfilter(nsFd int) (*netlink.Conn, error) {
	cfg := &netlink.Config{}
	if nsFd > 0 {
		cfg.NetNS = nsFd
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", explain(err))
	}
	return c, nil
}

func (d *ruleDumper) Close() error { return d.conn.Close() }

// KernelRule is a rule read from the kernel: its expressions, and the
// names of those no parser here knows (then the rule is not netspec's).
type KernelRule struct {
	Exprs  []expr.Any
	Opaque string
}

// rules reads the rules of table, or only of its chain when chain is not
// empty, by chain, in order. It reads them itself rather than with
// google/nftables' GetRules, which fails on expressions it cannot read
// (byteorder, in v0.3.0), and reads a whole table in big gulps.
func (d *ruleDumper) rules(fam nftables.TableFamily, table, chain string) (map[string][]KernelRule, error) {
	attrs := []netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")}}
	if chain != "" {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")})
	}
	out := map[string][]KernelRule{}
	err := d.dump(unix.NFT_MSG_GETRULE, fam, attrs, func(data []byte) error {
		ch, r, err := parseRule(byte(fam), data)
		out[ch] = append(out[ch], r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dump rules of %s %s: %w", familyName(fam), table, explain(err))
	}
	return out, nil
}

// dump sends a dump request of type typ (NFT_MSG_GET*) for family fam with
// attributes attrs, and calls fn with the attributes of each reply, as
// each does.
func (d *ruleDumper) dump(typ uint16, fam nftables.TableFamily, attrs []netlink.Attribute, fn func(attrs []byte) error) error {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: netlink.Request | netlink.Dump},
		Data:   append([]byte{byte(fam), unix.NFNETLINK_V0, 0, 0}, data...),
	}
	return d.each(req, func(data []byte) error {
		if len(data) < 4 {
			return nil
		}
		return fn(data[4:])
	})
}

// dumpBuffer is the receive buffer of a dump. The kernel fills each
// recvmsg with as much as the last buffer held (up to its cap), and
// resumes a rule dump by walking the table from the start: with
// mdlayher/netlink's page-sized reads, dumping 30,000 rules took seconds
// of kernel time; with big reads, a fraction of that.
const dumpBuffer = 1 << 20

// each sends a dump request and calls fn with the data of each reply, in
// order. data is valid only during the call: it is the receive buffer's.
// After fn fails, the rest of the dump is read and dropped, so that the
// socket is ready for the next request.
func (d *ruleDumper) each(req netlink.Message, fn func(data []byte) error) error {
	sent, err := d.conn.Send(req)
	if err != nil {
		return err
	}
	if d.buf == nil {
		d.buf = make([]byte, dumpBuffer)
	}
	var ferr error
	for {
		msgs, err := receive(d.conn, d.buf, true)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != sent.Header.Sequence {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return ferr
			case unix.NLMSG_ERROR:
				return cmp.Or(errnoOf(m), ferr)
			}
			if ferr == nil {
				ferr = fn(m.Data)
			}
		}
	}
}

// receive reads what the kernel queued on c, one buffer's worth, into
// buf: waiting for it, or, without wait, EAGAIN when nothing is queued.
func receive(c *netlink.Conn, buf []byte, wait bool) ([]syscall.NetlinkMessage, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n int
	var rerr error
	read := func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return !wait || rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
	}
	if wait {
		err = raw.Read(read)
	} else {
		err = raw.Control(func(fd uintptr) { read(fd) })
	}
	if err = cmp.Or(err, rerr); err != nil {
		return nil, err
	}
	return syscall.ParseNetlinkMessage(buf[:n])
}

// errnoOf is the error of an NLMSG_ERROR message, nil for an
// acknowledgement.
func errnoOf(m syscall.NetlinkMessage) error {
	if len(m.Data) >= 4 {
		if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
			return syscall.Errno(-code)
		}
	}
	return nil
}

// chains lists the chains of every table of family fam as google/nftables'
// ListChainsOfTableFamily does (name, table, type, policy, hook and
// priority), but in one dump with big reads: with its page-sized reads,
// listing the 300,000 chains of 50,000 services cost seconds, most of
// them the kernel walking its chain list again for every page. The chains
// of one table share their *nftables.Table.
func (d *ruleDumper) chains(fam nftables.TableFamily) ([]*nftables.Chain, error) {
	var out []*nftables.Chain
	tables := map[string]*nftables.Table{}
	err := d.dump(unix.NFT_MSG_GETCHAIN, fam, nil, func(data []byte) error {
		c, err := parseChain(fam, data, tables)
		out = append(out, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list chains of %s: %w", familyName(fam), explain(err))
	}
	return out, nil
}

// parseChain reads a chain message as google/nftables' chainFromMsg does;
// tables holds the tables met so far, by name.
func parseChain(fam nftables.TableFamily, data []byte, tables map[string]*nftables.Table) (*nftables.Chain, error) {
	c := &nftables.Chain{}
	err := eachAttr(data, func(typ uint16, b []byte) error {
		switch typ {
		case unix.NFTA_CHAIN_NAME:
			c.Name = cString(b)
		case unix.NFTA_CHAIN_TABLE:
			name := cString(b)
			if tables[name] == nil {
				tables[name] = &nftables.Table{Name: name, Family: fam}
			}
			c.Table = tables[name]
		case unix.NFTA_CHAIN_TYPE:
			c.Type = nftables.ChainType(cString(b))
		case unix.NFTA_CHAIN_POLICY:
			p := nftables.ChainPolicy(be32(b))
			c.Policy = &p
		case unix.NFTA_CHAIN_HOOK:
			hook, err := attr(b, unix.NFTA_HOOK_HOOKNUM)
			prio, _ := attr(b, unix.NFTA_HOOK_PRIORITY)
			c.Hooknum = nftables.ChainHookRef(nftables.ChainHook(be32(hook)))
			c.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(int32(be32(prio))))
			return err
		}
		return nil
	})
	return c, err
}

// parseRule reads a rule message's chain and expressions.
func parseRule(fam byte, data []byte) (chain string, r KernelRule, err error) {
	err = eachAttr(data, func(typ uint16, b []byte) error {
		switch typ {
		case unix.NFTA_RULE_CHAIN:
			chain = cString(b)
		case unix.NFTA_RULE_EXPRESSIONS:
			return eachAttr(b, func(_ uint16, b []byte) error {
				// A copy: the expressions keep what they are given.
				e, name, err := parseExpr(fam, bytes.Clone(b))
				switch {
				case err != nil:
					return err
				case e == nil:
					r.Opaque += name + " "
				default:
					r.Exprs = append(r.Exprs, e)
				}
				return nil
			})
		}
		return nil
	})
	return chain, r, err
}

// parseExpr reads one NFTA_LIST_ELEM as google/nftables does; a nil
// expression names a type it does not know.
func parseExpr(fam byte, b []byte) (expr.Any, string, error) {
	nb, err := attr(b, unix.NFTA_EXPR_NAME)
	if err != nil {
		return nil, "", err
	}
	name := cString(nb)
	data, _ := attr(b, unix.NFTA_EXPR_DATA)
	if name == "byteorder" {
		e, err := unmarshalByteorder(data)
		return e, name, err
	}
	e := exprOfName(name)
	if e == nil {
		return nil, name, nil
	}
	if err := expr.Unmarshal(fam, data, e); err != nil {
		return nil, name, fmt.Errorf("expression %s: %w", name, err)
	}
	// A verdict is an immediate into the verdict register.
	if imm, ok := e.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		if err := expr.Unmarshal(fam, data, v); err != nil {
			return nil, name, err
		}
		e = v
	}
	return e, name, nil
}

// unmarshalByteorder reads a byteorder expression, which google/nftables
// v0.3.0 can write but not read.
func unmarshalByteorder(data []byte) (*expr.Byteorder, error) {
	e := &expr.Byteorder{}
	err := eachAttr(data, func(typ uint16, b []byte) error {
		switch typ {
		case unix.NFTA_BYTEORDER_SREG:
			e.SourceRegister = be32(b)
		case unix.NFTA_BYTEORDER_DREG:
			e.DestRegister = be32(b)
		case unix.NFTA_BYTEORDER_OP:
			e.Op = expr.ByteorderOp(be32(b))
		case unix.NFTA_BYTEORDER_LEN:
			e.Len = be32(b)
		case unix.NFTA_BYTEORDER_SIZE:
			e.Size = be32(b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expression byteorder: %w", err)
	}
	return e, nil
}

// cString is a NUL-terminated string attribute's payload as a string.
func cString(b []byte) string { return string(bytes.TrimRight(b, "\x00")) }

// be32 is a 32-bit attribute's payload, in network byte order (0 when it
// has another length).
func be32(b []byte) uint32 {
	if len(b) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// exprTypes are the kernel expression types parseExpr reads, by their
// names in the kernel (exprName): the types netspec writes, and the
// common ones a hand-written rule may hold.
var exprTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, x := range []expr.Any{
		&expr.Ct{}, &expr.Range{}, &expr.Meta{}, &expr.Cmp{}, &expr.Counter{}, &expr.Payload{},
		&expr.Lookup{}, &expr.Immediate{}, &expr.Bitwise{}, &expr.NAT{}, &expr.Dynset{}, &expr.Log{},
		&expr.Reject{}, &expr.Masq{}, &expr.Fib{}, &expr.Numgen{}, &expr.Limit{}, &expr.Redir{},
	} {
		m[exprName(x)] = reflect.TypeOf(x).Elem()
	}
	return m
}()

// exprOfName makes an empty expression of a kernel expression type, nil
// for one not in exprTypes.
func exprOfName(name string) expr.Any {
	if t := exprTypes[name]; t != nil {
		return reflect.New(t).Interface().(expr.Any)
	}
	return nil
}

// setElements reads the elements of a set as google/nftables'
// GetSetElements returns them (a verdict as its attributes in Val), but in
// big reads: with page-sized ones the kernel walks a big set again for
// every page, and reading back every set after a load took a third of it.
func (d *ruleDumper) setElements(fam nftables.TableFamily, table, set string) ([]nftables.SetElement, error) {
	attrs := []netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set + "\x00")},
	}
	var out []nftables.SetElement
	err := d.dump(unix.NFT_MSG_GETSETELEM, fam, attrs, func(data []byte) (err error) {
		out, err = appendElements(out, data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list elements of %s: %w", set, explain(err))
	}
	return out, nil
}

// appendElements appends the elements of one GETSETELEM reply, or of a
// NEWSETELEM or DELSETELEM message (a verdict as its attributes in Val).
func appendElements(out []nftables.SetElement, data []byte) ([]nftables.SetElement, error) {
	err := eachAttr(data, func(typ uint16, list []byte) error {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			return nil
		}
		return eachElement(list, func(e rawElement) error {
			el := nftables.SetElement{Key: bytes.Clone(e.key), KeyEnd: bytes.Clone(e.keyEnd), Val: bytes.Clone(e.val),
				IntervalEnd: e.flags&unix.NFT_SET_ELEM_INTERVAL_END != 0,
				Timeout:     time.Duration(e.timeout) * time.Millisecond, Expires: time.Duration(e.expires) * time.Millisecond}
			if e.verdict != nil {
				el.Val = bytes.Clone(e.verdict)
			}
			el.Comment, _ = userdata.GetString(e.udata, userdata.NFTNL_UDATA_SET_ELEM_COMMENT)
			out = append(out, el)
			return nil
		})
	})
	return out, err
}

// rawElement is one element of a list of set elements as its attributes
// hold it; the slices alias the message.
type rawElement struct {
	key, keyEnd, val []byte // NFTA_DATA_VALUE of each
	verdict          []byte // the attributes of NFTA_DATA_VERDICT, when the data is one
	flags            uint32
	timeout, expires uint64 // in milliseconds
	udata            []byte
}

// eachElement calls fn with each element of list, the payload of an
// NFTA_SET_ELEM_LIST_ELEMENTS attribute, without allocating. Each nested
// attribute is an element, whatever its type (the kernel's dumps say
// NFTA_LIST_ELEM, google/nftables numbers them), as the kernel reads
// them.
func eachElement(list []byte, fn func(e rawElement) error) error {
	var e rawElement
	return eachAttr(list, func(_ uint16, el []byte) error {
		e = rawElement{}
		err := eachAttr(el, func(typ uint16, b []byte) error {
			var err error
			switch typ {
			case unix.NFTA_SET_ELEM_KEY:
				e.key, err = attr(b, unix.NFTA_DATA_VALUE)
			case nftaSetElemKeyEnd:
				e.keyEnd, err = attr(b, unix.NFTA_DATA_VALUE)
			case unix.NFTA_SET_ELEM_DATA:
				if e.val, err = attr(b, unix.NFTA_DATA_VALUE); err == nil {
					e.verdict, err = attr(b, unix.NFTA_DATA_VERDICT)
				}
			case unix.NFTA_SET_ELEM_FLAGS:
				if len(b) == 4 {
					e.flags = binary.BigEndian.Uint32(b)
				}
			case unix.NFTA_SET_ELEM_TIMEOUT, unix.NFTA_SET_ELEM_EXPIRATION:
				if len(b) == 8 && typ == unix.NFTA_SET_ELEM_TIMEOUT {
					e.timeout = binary.BigEndian.Uint64(b)
				} else if len(b) == 8 {
					e.expires = binary.BigEndian.Uint64(b)
				}
			case unix.NFTA_SET_ELEM_USERDATA:
				e.udata = b
			}
			return err
		})
		if err != nil {
			return err
		}
		return fn(e)
	})
}

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END, which x/sys/unix lacks.
const nftaSetElemKeyEnd = 10
