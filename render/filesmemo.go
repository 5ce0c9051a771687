package render

import (
	"net/netip"
	"sync/atomic"

	"netspec.dev/netspec/plan"
)

// FilesMemo renders the files of ZoneEnvFiles as Texts, each naming its
// content by an ID: a zone, env file or resolv.conf whose input is the one
// it rendered last time (a zone's records and an env file's variables the
// very same slice, same array and length; a resolv.conf's namespace,
// domain and DNS address the same values) gets the ID it got then, and is
// not rendered unless its bytes are asked for. A daemon's compiler hands
// back the last plan's DNS and env files when a change left them as they
// were (compiler.Memo), and the state dir recognises a file it found
// holding an ID's content by the ID and the file's stat (state.File): an
// endpoint change at 10,000 Services renders none of the 2.2 MB of zones
// and 4 MB of env files, and nobody keeps those bytes between reloads.
//
// Plans are never mutated once compiled, and a FilesMemo relies on it. It
// keeps only what the files of the last plan were rendered from. The zero
// FilesMemo is ready to use; a nil *FilesMemo renders afresh, with IDs 0.
// A FilesMemo is used by one goroutine at a time, and the bytes a Text
// returns are not to be modified.
type FilesMemo struct {
	files map[string]memoText // by path
}

// Text is a file of the state dir as FilesMemo gives it. Bytes renders it
// (at each call, the same bytes: a Text does not keep them, so that the
// state dir, which writes the files one at a time, never holds them all,
// 45 MB at 50,000 Services). ID names its content: two Texts with one ID
// have the same bytes; IDs are unique in the process, and 0 names nothing.
type Text struct {
	ID    uint64
	Bytes func() []byte
}

// lastTextID is the last ID a FilesMemo gave.
var lastTextID atomic.Uint64

// memoText is what a file was rendered from and the ID it was given.
type memoText struct {
	from any
	id   uint64
}

// slice is what names a slice's memory as plan.Shared compares it: its
// first element and its length (an empty slice is nil, 0).
type slice[T any] struct {
	first *T
	n     int
}

// sliceOf is the slice that names the memory of s.
func sliceOf[T any](s []T) slice[T] {
	if len(s) == 0 {
		return slice[T]{}
	}
	return slice[T]{&s[0], len(s)}
}

// resolvFrom is what ResolvConf renders a namespace's file from, besides
// the namespace, which names the file.
type resolvFrom struct {
	domain string
	addr   netip.Addr
}

// ZoneEnvTexts is the package's ZoneEnvFiles as Texts, reusing m.
func (m *FilesMemo) ZoneEnvTexts(p *plan.Plan) (map[string]Text, error) {
	if m == nil {
		return zoneEnvFiles(p, func(_ string, _ any, render func() []byte) Text { return Text{Bytes: render} })
	}
	next := make(map[string]memoText, len(p.DNS.Zones)+2*len(p.Env))
	files, err := zoneEnvFiles(p, func(path string, from any, render func() []byte) Text {
		t, ok := m.files[path]
		if !ok || t.from != from {
			t = memoText{from: from, id: lastTextID.Add(1)}
		}
		next[path] = t
		return Text{ID: t.id, Bytes: render}
	})
	if err != nil {
		*m = FilesMemo{}
		return nil, err
	}
	m.files = next
	return files, nil
}
