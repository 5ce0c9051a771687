// Package status works out what `netspec status` reports about a node:
// the running daemon's status, asked over its socket (daemon.QueryStatus),
// or, when no daemon answers, what the node holds without one: netspec's
// nftables tables and IPVS virtual servers, read from the kernel, and the
// state dir's record of the last applied plan with the endpoints still
// held out for failing readiness probes (daemon.HeldOut). It reads only;
// the command line prints the Report.
package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"netspec.dev/netspec/applier"
	"netspec.dev/netspec/applier/ipvs"
	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/applier/state"
	"netspec.dev/netspec/daemon"
)

// Report is netspec status's answer (its --json).
type Report struct {
	Running bool           `json:"running"`
	Daemon  *daemon.Status `json:"daemon,omitempty"`
	Reason  string         `json:"reason,omitempty"` // why no daemon answered
	Kernel  *Kernel        `json:"kernel,omitempty"`
	Record  *Record        `json:"record,omitempty"`
}

// Kernel is what the kernel holds of netspec, read without a daemon.
type Kernel struct {
	Read     bool      `json:"read"`            // false: not read (Error says why)
	Error    string    `json:"error,omitempty"` // why the kernel could not be read
	NFTables []NFTable `json:"nftables,omitempty"`
	IPVS     *IPVS     `json:"ipvs,omitempty"`
}

// NFTable is one of netspec's nftables tables.
type NFTable struct {
	Family   string `json:"family"` // ip or ip6
	Present  bool   `json:"present"`
	Chains   int    `json:"chains"`
	Sets     int    `json:"sets"`     // named sets and maps
	Elements int    `json:"elements"` // of the named sets and maps (an interval counts once)
}

// IPVS is netspec's IPVS virtual servers: those whose address is on its
// interface.
type IPVS struct {
	Available      bool `json:"available"` // the kernel has IPVS
	Interface      bool `json:"interface"` // netspec-ipvs0 exists
	VirtualServers int  `json:"virtualServers"`
	RealServers    int  `json:"realServers"`
}

// Record is the state dir's record of the last applied plan.
type Record struct {
	// NoDir tells that the state dir does not exist (a mistyped
	// --state-dir, or nothing ever applied).
	NoDir     bool      `json:"noDir,omitempty"`
	Present   bool      `json:"present"`
	Node      string    `json:"node,omitempty"`
	Services  int       `json:"services"`
	Endpoints int       `json:"endpoints"`
	Recorded  time.Time `json:"recorded,omitzero"` // the record's last write
	// Probes is what the record tells of the endpoints held out for
	// failing readiness probes; nil when the plan has no probe.
	Probes *daemon.Held `json:"probes,omitempty"`
}

// Options say where to look.
type Options struct {
	Socket   string // the daemon's status socket
	StateDir string // read when no daemon answers
	// Wait is how long to wait for a daemon to answer and finish its
	// first sync (0: ask once).
	Wait time.Duration
}

// Gather asks the daemon on o.Socket for its status; when none answers
// (no socket, or a stale one), it reads the kernel and the state dir
// instead. An error means nothing could be reported: the socket cannot
// be used, or the state dir cannot be read.
func Gather(o Options) (*Report, error) {
	st, err := Ask(o.Socket, o.Wait)
	switch {
	case err == nil:
		return &Report{Running: true, Daemon: st}, nil
	case errors.Is(err, daemon.ErrNoDaemon), errors.Is(err, daemon.ErrStaleSocket):
		r := &Report{Reason: o.Socket + " does not exist"}
		if errors.Is(err, daemon.ErrStaleSocket) {
			r.Reason = "nothing listens on " + o.Socket + " (left by a daemon that stopped)"
		}
		r.Kernel = ReadKernel()
		if r.Record, err = ReadRecord(o.StateDir); err != nil {
			return nil, err
		}
		return r, nil
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("%s: permission denied: the socket is for the daemon's user (root) only", o.Socket)
	default:
		return nil, fmt.Errorf("asking the daemon on %s: %w", o.Socket, err)
	}
}

// Ask queries the daemon on sock; with wait, it asks again until the
// daemon answers with a sync done or wait has passed.
func Ask(sock string, wait time.Duration) (*daemon.Status, error) {
	end := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := daemon.QueryStatus(ctx, sock)
		cancel()
		retry := (err == nil && st.LastSync == nil) || errors.Is(err, daemon.ErrNoDaemon) || errors.Is(err, daemon.ErrStaleSocket)
		if !retry || time.Now().After(end) {
			return st, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ReadKernel reads netspec's nftables tables and IPVS virtual servers in
// the network namespace the process runs in.
func ReadKernel() *Kernel {
	k := &Kernel{}
	tables, err := readNFTables()
	if err != nil {
		if applier.IsPermission(err) || os.Geteuid() != 0 {
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
func readNFTables() ([]NFTable, error) {
	k, err := nft.OpenSystem(0)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	tables, err := nft.Summarize(k)
	if err != nil {
		return nil, err
	}
	out := make([]NFTable, len(tables))
	for i, t := range tables {
		out[i] = NFTable{Family: t.Family, Present: t.Present, Chains: t.Chains, Sets: t.Sets, Elements: t.Elements}
	}
	return out, nil
}

// readIPVS counts netspec's virtual servers (ipvs.Summarize).
func readIPVS() (*IPVS, error) {
	s, err := ipvs.OpenSystem(0)
	if errors.Is(err, ipvs.ErrNoIPVS) {
		return &IPVS{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sum, err := ipvs.Summarize(s)
	if err != nil {
		return nil, err
	}
	return &IPVS{Available: true, Interface: sum.Interface, VirtualServers: sum.VirtualServers, RealServers: sum.RealServers}, nil
}

// ReadRecord reads the state dir's record of the last applied plan and
// the daemon's record of the endpoints held out for failing probes,
// creating nothing.
func ReadRecord(dir string) (*Record, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &Record{NoDir: true}, nil
	}
	n, err := applier.Open(applier.Options{StateDir: dir, NoCreateStateDir: true, NoDataplane: true})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	p := n.Last()
	if p == nil {
		return &Record{}, nil
	}
	r := &Record{Present: true, Node: p.Node.Name}
	r.Services, r.Endpoints = p.Counts()
	for _, name := range []string{state.PlanFile, state.LogFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.ModTime().After(r.Recorded) {
			r.Recorded = fi.ModTime().UTC().Truncate(time.Second)
		}
	}
	rec, err := daemon.ReadProbeRecord(dir)
	if err != nil {
		return nil, err
	}
	r.Probes = daemon.HeldOut(p, rec)
	return r, nil
}
