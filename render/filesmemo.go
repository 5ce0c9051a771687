package render

import (
	"net/netip"

	"netspec.dev/netspec/plan"
)

// FilesMemo renders the files of ZoneEnvFiles, equal to ZoneEnvFiles,
// reusing the bytes of each zone, env file and resolv.conf whose input is
// the one it rendered last time: a zone's records and an env file's
// variables the very same slice (same array, same length), a
// resolv.conf's namespace, domain and DNS address the same values. A
// daemon's compiler hands back the last plan's DNS and env files when a
// change left them as they were (compiler.Memo), so that an endpoint
// change at 10,000 Services renders none of the 2.2 MB of zones and 4 MB
// of env files again; and a reused file is the same []byte as last time,
// which the state dir recognises without reading the file back
// (state.Dir).
//
// Plans are never mutated once compiled, and a FilesMemo relies on it. It
// keeps only the files of the last plan. The zero FilesMemo is ready to
// use; a nil *FilesMemo renders afresh. A FilesMemo is used by one
// goroutine at a time, and the bytes it returns are not to be modified.
type FilesMemo struct {
	zones  map[string]memoText[plan.Record] // by file path
	envs   map[string]memoText[plan.EnvVar]
	resolv map[resolvKey][]byte
}

// memoText is a file's bytes and the slice they were rendered from.
type memoText[T any] struct {
	from []T
	text []byte
}

// resolvKey is what ResolvConf renders from.
type resolvKey struct {
	ns, domain string
	addr       netip.Addr
}

// ZoneEnvFiles is the package's ZoneEnvFiles, reusing m.
func (m *FilesMemo) ZoneEnvFiles(p *plan.Plan) (map[string][]byte, error) {
	if m == nil {
		return zoneEnvFiles(p, ZoneFile, EnvFile, ResolvConf)
	}
	zones := make(map[string]memoText[plan.Record], len(p.DNS.Zones))
	envs := make(map[string]memoText[plan.EnvVar], len(p.Env))
	resolv := make(map[resolvKey][]byte, len(p.Env))
	zone := func(z plan.Zone) []byte {
		t, ok := m.zones[z.Name]
		if !ok || !plan.Shared(t.from, z.Records) {
			t = memoText[plan.Record]{from: z.Records, text: ZoneFile(z)}
		}
		zones[z.Name] = t
		return t.text
	}
	env := func(f plan.EnvFile) []byte {
		t, ok := m.envs[f.Namespace]
		if !ok || !plan.Shared(t.from, f.Vars) {
			t = memoText[plan.EnvVar]{from: f.Vars, text: EnvFile(f)}
		}
		envs[f.Namespace] = t
		return t.text
	}
	conf := func(ns, domain string, addr netip.Addr) []byte {
		k := resolvKey{ns, domain, addr}
		b, ok := m.resolv[k]
		if !ok {
			b = ResolvConf(ns, domain, addr)
		}
		resolv[k] = b
		return b
	}
	files, err := zoneEnvFiles(p, zone, env, conf)
	if err != nil {
		*m = FilesMemo{}
		return nil, err
	}
	m.zones, m.envs, m.resolv = zones, envs, resolv
	return files, nil
}
