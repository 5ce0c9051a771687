package render

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"netspec.dev/netspec/plan"
)

// Dataplane is the kernel load balancer a node uses.
type Dataplane string

// The data planes.
const (
	DataplaneNFTables Dataplane = "nftables"
	DataplaneIPVS     Dataplane = "ipvs"
)

// Files renders every artifact of a Plan for data plane dp, keyed by the
// slash-separated path docs/design.md gives it under `netspec render --out`:
//
//	nftables.nft        the ruleset (NFTables; NFTablesIPVS for data plane ipvs)
//	ipvs.txt            the virtual servers (IPVS), for data plane ipvs
//	dns/<zone>.zone     each zone (ZoneFile), named without the trailing dot
//	env/<namespace>.env each namespace's service variables (EnvFile)
//	resolv/<namespace>.conf the resolv.conf of the namespace's pods (ResolvConf)
//	resolved/...        with a Cluster dnsAddress, the systemd-resolved recipes (Resolved)
//	plan.json           the Plan (PlanJSON)
//
// It writes nothing: the caller does. Two zones or env files that would
// share a path, or a zone name or namespace that is not a plain file name,
// are errors.
func Files(p *plan.Plan, dp Dataplane) (map[string][]byte, error) {
	return files(p, dp, DefaultIPVSScheduler)
}

// FilesIPVS is Files for data plane ipvs with sched as the scheduler of
// Services without the annotation netspec.dev/ipvs-scheduler ("" for
// DefaultIPVSScheduler).
func FilesIPVS(p *plan.Plan, sched string) (map[string][]byte, error) {
	return files(p, DataplaneIPVS, sched)
}

func files(p *plan.Plan, dp Dataplane, sched string) (map[string][]byte, error) {
	if p == nil {
		return nil, errors.New("render: no plan")
	}
	// The ruleset and plan.json are the large artifacts of a big tree: they
	// are made at the same time. Both only read the Plan.
	var kernel map[string][]byte
	var kernelErr error
	var wg sync.WaitGroup
	wg.Go(func() { kernel, kernelErr = kernelFiles(p, dp, sched) })
	files, err := ZoneEnvFiles(p)
	planJSON, jsonErr := PlanJSON(p)
	wg.Wait()
	if err := cmp.Or(kernelErr, err, jsonErr); err != nil {
		return nil, err
	}
	files["plan.json"] = planJSON
	maps.Copy(files, kernel)
	maps.Copy(files, Resolved(p))
	return files, nil
}

// kernelFiles renders the artifacts of Files that program the kernel:
// nftables.nft and, for data plane ipvs, ipvs.txt.
func kernelFiles(p *plan.Plan, dp Dataplane, sched string) (map[string][]byte, error) {
	switch dp {
	case DataplaneNFTables:
		return map[string][]byte{"nftables.nft": NFTables(p)}, nil
	case DataplaneIPVS:
		return map[string][]byte{"nftables.nft": NFTablesIPVS(p), "ipvs.txt": IPVS(p, sched)}, nil
	}
	return nil, fmt.Errorf("unknown data plane %q: want %q or %q", dp, DataplaneNFTables, DataplaneIPVS)
}

// ZoneEnvFiles renders the zone files, the env files and the pods'
// resolv.conf files (one per env file's namespace) of Files: what a
// node's state dir holds for other programs (resolvers, pods). The node
// records the plan itself apart, by difference (plan.Delta).
func ZoneEnvFiles(p *plan.Plan) (map[string][]byte, error) {
	return zoneEnvFiles(p, func(_ string, _ any, render func() []byte) []byte { return render() })
}

// zoneEnvFiles is ZoneEnvFiles with each file made by file, which makes
// its bytes or a Text (FilesMemo) from its path, what it is rendered from
// (a comparable value: FilesMemo.ZoneEnvTexts) and its renderer.
func zoneEnvFiles[F any](p *plan.Plan, file func(path string, from any, render func() []byte) F) (map[string]F, error) {
	if p == nil {
		return nil, errors.New("render: no plan")
	}
	files := make(map[string]F)
	add := func(path string, from any, render func() []byte) error {
		if _, dup := files[path]; dup {
			return fmt.Errorf("render: two artifacts are named %s", path)
		}
		files[path] = file(path, from, render)
		return nil
	}
	for _, z := range p.DNS.Zones {
		name := strings.TrimSuffix(z.Name, ".")
		if err := checkFileName("zone", z.Name, name); err != nil {
			return nil, err
		}
		if err := add("dns/"+name+".zone", sliceOf(z.Records), func() []byte { return ZoneFile(z) }); err != nil {
			return nil, err
		}
	}
	domain, addr := p.Cluster.Domain, p.Cluster.DNSAddress
	for _, f := range p.Env {
		if err := checkFileName("namespace", f.Namespace, f.Namespace); err != nil {
			return nil, err
		}
		if err := add("env/"+f.Namespace+".env", sliceOf(f.Vars), func() []byte { return EnvFile(f) }); err != nil {
			return nil, err
		}
		conf := func() []byte { return ResolvConf(f.Namespace, domain, addr) }
		if err := add("resolv/"+f.Namespace+".conf", resolvFrom{domain, addr}, conf); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// checkFileName rejects a name that would not stay one file inside its
// directory.
func checkFileName(what, orig, name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("render: %s %q cannot name a file", what, orig)
	}
	return nil
}
