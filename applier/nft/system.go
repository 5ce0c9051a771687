package nft

import (
	"fmt"
	"sync"

	"github.com/google/nftables"
	"netspec.dev/netspec/internal/stages"
)

// Kernel is the nftables of one network namespace, as an Applier reads and
// changes it: lists of tables, sets and chains, dumps of rules and set
// elements, and transactions. Everything above it (the diff, the batch
// order, the read-back check) is the same for every Kernel. System is the
// real one, over netlink; Fake an in-memory one for tests.
//
// Reads may run concurrently with each other (the read-back check reads
// the elements while it lists the chains), never with Run.
type Kernel interface {
	// Tables lists the tables of a family.
	Tables(fam nftables.TableFamily) ([]*nftables.Table, error)
	// Sets lists the sets and maps of a table, anonymous ones included.
	Sets(t *nftables.Table) ([]*nftables.Set, error)
	// Elements lists the elements of a set as google/nftables'
	// GetSetElements returns them: a verdict as its netlink attributes in
	// Val.
	Elements(fam nftables.TableFamily, table, set string) ([]nftables.SetElement, error)
	// Chains lists the chains of every table of a family.
	Chains(fam nftables.TableFamily) ([]*nftables.Chain, error)
	// Rules lists the rules of a table, or of one of its chains when chain
	// is not empty, by chain, in order.
	Rules(fam nftables.TableFamily, table, chain string) (map[string][]KernelRule, error)
	// Run hands queue a Batch, then sends what queue added to it as one
	// transaction, which the kernel applies whole or not at all. When
	// queue fails nothing is sent, and the next batch starts empty.
	Run(queue func(Batch) error) error
	// Sent returns what the last transaction Run sent added to a table,
	// counted from the table's last delete in it (nil if nothing): for a
	// table it replaced, everything the table holds. System decodes it
	// from the bytes it sent, while the kernel takes them; Fake from the
	// bytes it staged. See sent.go.
	Sent(fam nftables.TableFamily, table string) (*sentTable, error)
	// Close releases the connections; the kernel's state stays.
	Close() error
}

// Batch collects the operations of one transaction: the methods of
// google/nftables' Conn that netspec queues, which *nftables.Conn has.
// Nothing happens before Kernel.Run sends the batch.
type Batch interface {
	AddTable(*nftables.Table) *nftables.Table
	DelTable(*nftables.Table)
	AddChain(*nftables.Chain) *nftables.Chain
	FlushChain(*nftables.Chain)
	DelChain(*nftables.Chain)
	AddRule(*nftables.Rule) *nftables.Rule
	// AddSet creates a set with elements; an anonymous set gets its name
	// ("__set%d") and batch ID here, for the rule that uses it.
	AddSet(*nftables.Set, []nftables.SetElement) error
	SetAddElements(*nftables.Set, []nftables.SetElement) error
	SetDeleteElements(*nftables.Set, []nftables.SetElement) error
	FlushSet(*nftables.Set)
	DelSet(*nftables.Set)
}

var (
	_ Batch  = (*nftables.Conn)(nil)
	_ Batch  = (*stagingBatch)(nil)
	_ Kernel = (*System)(nil)
)

// System is the Kernel of a network namespace, over netlink. It keeps
// four sockets: google/nftables' for the lists of tables and sets, two
// for dumps with big reads (dump.go: one for rules and elements, one for
// chains, so that the read-back check lists the chains while it reads
// the elements), and the batch sender's (batch.go), which sends a
// transaction without asking for an acknowledgement per message.
type System struct {
	conn   *nftables.Conn // lists
	batch  *nftables.Conn // writes: batches sent by sender
	sender *batchSender
	dump   *ruleDumper                // rules and elements
	chains *ruleDumper                // chains
	onSend func()                     // see Applier.OnSend
	sent   func() (sentTables, error) // the last transaction's messages, decoded (decodeSent)
}

// OpenSystem connects to nftables in the network namespace nsFd (an open
// /var/run/netns/NAME or /proc/PID/ns/net; 0 for the current one).
func OpenSystem(nsFd int) (_ *System, err error) {
	c, err := dial(nsFd)
	if err != nil {
		return nil, err
	}
	k := &System{conn: c}
	defer func() {
		if err != nil {
			k.Close()
		}
	}()
	// Fail early and clearly when nftables cannot be used at all.
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		return nil, fmt.Errorf("nftables: %w", explain(err))
	}
	if k.dump, err = newRuleDumper(nsFd); err != nil {
		return nil, err
	}
	if k.chains, err = newRuleDumper(nsFd); err != nil {
		return nil, err
	}
	if k.sender, err = newBatchSender(nsFd); err != nil {
		return nil, err
	}
	if k.batch, err = k.sender.nftConn(); err != nil {
		return nil, err
	}
	return k, nil
}

// Close implements Kernel; OpenSystem closes a System opened in part
// with it.
func (k *System) Close() error {
	if k.dump != nil {
		k.dump.Close()
	}
	if k.chains != nil {
		k.chains.Close()
	}
	if k.sender != nil {
		k.sender.Close()
	}
	if k.batch != nil {
		k.batch.CloseLasting()
	}
	return k.conn.CloseLasting()
}

// Tables implements Kernel.
func (k *System) Tables(fam nftables.TableFamily) ([]*nftables.Table, error) {
	return k.conn.ListTablesOfFamily(fam)
}

// Sets implements Kernel.
func (k *System) Sets(t *nftables.Table) ([]*nftables.Set, error) { return k.conn.GetSets(t) }

// Chains implements Kernel, in one dump with big reads.
func (k *System) Chains(fam nftables.TableFamily) ([]*nftables.Chain, error) {
	return k.chains.chains(fam)
}

// Elements implements Kernel, in one dump with big reads.
func (k *System) Elements(fam nftables.TableFamily, table, set string) ([]nftables.SetElement, error) {
	return k.dump.setElements(fam, table, set)
}

// Rules implements Kernel, in one dump with big reads.
func (k *System) Rules(fam nftables.TableFamily, table, chain string) (map[string][]KernelRule, error) {
	return k.dump.rules(fam, table, chain)
}

// Run implements Kernel. What queue adds is serialised every
// flushEvery operations into the staged batch (batch.go), which is sent
// whole at the end: one transaction, whose messages are held once.
func (k *System) Run(queue func(Batch) error) error {
	k.sent = nil
	k.sender.stage()
	sb := &stagingBatch{Conn: k.batch, sender: k.sender}
	end := stages.Start("encode")
	err := queue(sb)
	if err == nil {
		err = sb.flush()
	}
	end()
	if err != nil {
		k.sender.discard()
		// Drop what was queued: the next batch must not carry it.
		if bc, nerr := k.sender.nftConn(); nerr == nil {
			k.batch.CloseLasting()
			k.batch = bc
		}
		return err
	}
	if st := k.sender.staged; st != nil {
		// Decoded while the kernel takes them.
		k.sent = sync.OnceValues(func() (sentTables, error) { return decodeSent(st.chunks) })
		go k.sent()
	}
	if k.onSend != nil {
		k.onSend()
	}
	defer stages.Start("kernel batch")()
	return k.sender.sendStaged()
}

// Sent implements Kernel.
func (k *System) Sent(fam nftables.TableFamily, table string) (*sentTable, error) {
	if k.sent == nil {
		return nil, fmt.Errorf("no transaction was sent")
	}
	st, err := k.sent()
	return st[tableKey{fam, table}], err
}

func (k *System) notifySend(f func()) { k.onSend = f }

// flushEvery is how many operations a stagingBatch queues between two
// flushes into the staged batch.
const flushEvery = 512

// stagingBatch is the Batch of System.Run: google/nftables' Conn,
// flushed into the staged batch every flushEvery operations.
type stagingBatch struct {
	*nftables.Conn
	sender *batchSender // whose staged transaction the flushes fill
	ops    int
	err    error // of the first flush that failed
}

// split implements splitter: each part is a google/nftables Conn of its
// own over a sender of its own that only stages; join appends their
// staged messages to b's. The parts' sequence numbers repeat b's, which
// the kernel does not mind (nothing asks it to acknowledge a message).
func (b *stagingBatch) split(n int) ([]Batch, func() error, error) {
	if err := b.flush(); err != nil {
		return nil, nil, err
	}
	parts := make([]*stagingBatch, n)
	batches := make([]Batch, n)
	for i := range parts {
		s := &batchSender{}
		s.stage()
		c, err := s.nftConn()
		if err != nil {
			return nil, nil, err
		}
		parts[i] = &stagingBatch{Conn: c, sender: s}
		batches[i] = parts[i]
	}
	join := func() error {
		var first error
		for _, p := range parts {
			if err := p.flush(); err != nil && first == nil {
				first = err
			}
			b.sender.staged.append(p.sender.staged)
			p.Conn.CloseLasting()
		}
		return first
	}
	return batches, join, nil
}

// op counts an operation, and flushes after flushEvery of them.
func (b *stagingBatch) op() {
	if b.ops++; b.ops%flushEvery == 0 && b.err == nil {
		b.err = b.Conn.Flush()
	}
}

// flush flushes what is left, and returns the first error of a flush.
func (b *stagingBatch) flush() error {
	if b.err != nil {
		return b.err
	}
	return b.Conn.Flush()
}

func (b *stagingBatch) AddTable(t *nftables.Table) *nftables.Table {
	defer b.op()
	return b.Conn.AddTable(t)
}

func (b *stagingBatch) DelTable(t *nftables.Table) {
	defer b.op()
	b.Conn.DelTable(t)
}

func (b *stagingBatch) AddChain(c *nftables.Chain) *nftables.Chain {
	defer b.op()
	return b.Conn.AddChain(c)
}

func (b *stagingBatch) FlushChain(c *nftables.Chain) {
	defer b.op()
	b.Conn.FlushChain(c)
}

func (b *stagingBatch) DelChain(c *nftables.Chain) {
	defer b.op()
	b.Conn.DelChain(c)
}

func (b *stagingBatch) AddRule(r *nftables.Rule) *nftables.Rule {
	defer b.op()
	return b.Conn.AddRule(r)
}

func (b *stagingBatch) AddSet(s *nftables.Set, elems []nftables.SetElement) error {
	defer b.op()
	return b.Conn.AddSet(s, elems)
}

func (b *stagingBatch) SetAddElements(s *nftables.Set, elems []nftables.SetElement) error {
	defer b.op()
	return b.Conn.SetAddElements(s, elems)
}

func (b *stagingBatch) SetDeleteElements(s *nftables.Set, elems []nftables.SetElement) error {
	defer b.op()
	return b.Conn.SetDeleteElements(s, elems)
}

func (b *stagingBatch) FlushSet(s *nftables.Set) {
	defer b.op()
	b.Conn.FlushSet(s)
}

func (b *stagingBatch) DelSet(s *nftables.Set) {
	defer b.op()
	b.Conn.DelSet(s)
}
