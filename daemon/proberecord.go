package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"netspec.dev/netspec/internal/atomicfile"
)

// ProbeRecordFile is the name, in the state dir, of the record of the
// endpoints the daemon holds out of the kernel for failing readiness
// probes (ProbeRecord). It is no file of the applier's (package state
// leaves it alone): the daemon writes it, whole, each time the endpoints
// out change, after the sync that applied them; it stays when the daemon
// stops, as the kernel's rules do, so that `netspec status` without a
// daemon can say which endpoints the kernel still holds out.
const ProbeRecordFile = "probes.json"

// ProbeRecord is the content of ProbeRecordFile.
type ProbeRecord struct {
	Node    string    `json:"node"`
	Written time.Time `json:"written"`
	// Out are the endpoints out for a failing probe (and kept, when their
	// Service fails open: FailOpen), as in Status.
	Out      []ProbeOut `json:"out"`
	FailOpen []string   `json:"failOpen"`
}

// ReadProbeRecord reads the state dir's ProbeRecordFile; nil, with no
// error, when there is none.
func ReadProbeRecord(stateDir string) (*ProbeRecord, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, ProbeRecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r ProbeRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", ProbeRecordFile, err)
	}
	return &r, nil
}

// writeProbeRecord writes r as the state dir's ProbeRecordFile: to a
// temporary file, synced and renamed into place (atomicfile).
func writeProbeRecord(stateDir string, r *ProbeRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(stateDir, ProbeRecordFile), append(b, '\n'), 0o644)
}

// RemoveProbeRecord removes the state dir's ProbeRecordFile, as netspec
// cleanup does with the rules that held its endpoints out; removed tells
// whether there was one.
func RemoveProbeRecord(stateDir string) (removed bool, err error) {
	err = os.Remove(filepath.Join(stateDir, ProbeRecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
