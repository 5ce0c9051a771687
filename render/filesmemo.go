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
	zones  map[string]memoText[plan.Record] // by zone name
	envs   map[string]memoText[plan.EnvVar] // by namespace
	resolv map[resolvKey]uint64
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

// newText is a Text of a new ID, rendered by render when asked.
func newText(render func() []byte) Text {
	return Text{ID: lastTextID.Add(1), Bytes: render}
}

// memoText is what a file was rendered from and the ID it was given.
type memoText[T any] struct {
	from []T
	id   uint64
}

// memoTextOf is the Text of the file named key, rendered by render from
// from: of the ID last gave it when from is the slice it had there, else
// of a new ID. It records the file in next.
func memoTextOf[T any](last, next map[string]memoText[T], key string, from []T, render func() []byte) Text {
	if t, ok := last[key]; ok && plan.Shared(t.from, from) {
		next[key] = t
		return Text{ID: t.id, Bytes: render}
	}
	x := newText(render)
	next[key] = memoText[T]{from: from, id: x.ID}
	return x
}

// resolvKey is what ResolvConf renders from.
type resolvKey struct {
	ns, domain string
	addr       netip.Addr
}

// ZoneEnvTexts is the package's ZoneEnvFiles as Texts, reusing m.
func (m *FilesMemo) ZoneEnvTexts(p *plan.Plan) (map[string]Text, error) {
	if m == nil {
		return zoneEnvFiles(p,
			func(z plan.Zone) Text { return Text{Bytes: func() []byte { return ZoneFile(z) }} },
			func(f plan.EnvFile) Text { return Text{Bytes: func() []byte { return EnvFile(f) }} },
			func(ns, domain string, addr netip.Addr) Text {
				return Text{Bytes: func() []byte { return ResolvConf(ns, domain, addr) }}
			})
	}
	zones := make(map[string]memoText[plan.Record], len(p.DNS.Zones))
	envs := make(map[string]memoText[plan.EnvVar], len(p.Env))
	resolv := make(map[resolvKey]uint64, len(p.Env))
	zone := func(z plan.Zone) Text {
		return memoTextOf(m.zones, zones, z.Name, z.Records, func() []byte { return ZoneFile(z) })
	}
	env := func(f plan.EnvFile) Text {
		return memoTextOf(m.envs, envs, f.Namespace, f.Vars, func() []byte { return EnvFile(f) })
	}
	conf := func(ns, domain string, addr netip.Addr) Text {
		render := func() []byte { return ResolvConf(ns, domain, addr) }
		k := resolvKey{ns, domain, addr}
		if id, ok := m.resolv[k]; ok {
			resolv[k] = id
			return Text{ID: id, Bytes: render}
		}
		x := newText(render)
		resolv[k] = x.ID
		return x
	}
	files, err := zoneEnvFiles(p, zone, env, conf)
	if err != nil {
		*m = FilesMemo{}
		return nil, err
	}
	m.zones, m.envs, m.resolv = zones, envs, resolv
	return files, nil
}
