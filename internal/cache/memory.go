// Package cache holds implementations of schema.Cache: Memory for the
// long-running watch daemon and Disk for the CLI, so that a CI job or an
// editor loop pays only for the files that changed.
//
// Results are shared, not copied: a *schema.UnitResult that Get returns
// (and the objects in it) must be treated as read-only by every caller.
package cache

import (
	"sync"
	"sync/atomic"

	"netspec.dev/netspec/schema"
)

// Memory is an in-memory schema.Cache, safe for concurrent use. It keeps
// results until Sweep drops those not used since the previous Sweep.
type Memory struct {
	mu      sync.RWMutex
	entries map[schema.Key]*memEntry
}

type memEntry struct {
	r    *schema.UnitResult
	used atomic.Bool // since the last Sweep
}

// NewMemory returns an empty in-memory cache.
func NewMemory() *Memory {
	return &Memory{entries: map[schema.Key]*memEntry{}}
}

// Get returns the result stored under key.
func (m *Memory) Get(key schema.Key) (*schema.UnitResult, bool) {
	m.mu.RLock()
	e := m.entries[key]
	m.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	e.used.Store(true)
	return e.r, true
}

// Put stores r under key. A nil r is not stored.
func (m *Memory) Put(key schema.Key, r *schema.UnitResult) {
	if r == nil {
		return
	}
	e := &memEntry{r: r}
	e.used.Store(true)
	m.mu.Lock()
	m.entries[key] = e
	m.mu.Unlock()
}

// Len returns the number of results held.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}

// Sweep drops the results that were neither stored nor returned since the
// previous Sweep, and returns how many it dropped. A daemon calls it after
// each Load, so that the cache holds the current tree's results only.
func (m *Memory) Sweep() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, e := range m.entries {
		if !e.used.Swap(false) {
			delete(m.entries, k)
			n++
		}
	}
	return n
}

var _ schema.Cache = (*Memory)(nil)
