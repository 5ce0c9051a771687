package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"netspec.dev/netspec/plan"
)

// PlanJSON renders the Plan as plan.json: JSON indented by two spaces, with
// one line per endpoint, DNS record and variable (see indentJSON), "formatVersion" first, lowerCamelCase field names as Kubernetes spells
// them ("clusterIPs", "dnsTTL", "ips", "ttl"), addresses and prefixes as
// strings, fields in a fixed order and lists in the plan's order, every
// field present (lists as [], never null), no HTML escaping, and a
// trailing newline.
//
// A Plan whose FormatVersion is 0 is written as plan.FormatVersion; any
// other version than plan.FormatVersion is an error.
func PlanJSON(p *plan.Plan) ([]byte, error) {
	if p == nil {
		return nil, errors.New("plan.json: no plan")
	}
	if p.FormatVersion != 0 && p.FormatVersion != plan.FormatVersion {
		return nil, fmt.Errorf("plan.json: plan has format version %d, this netspec writes %d", p.FormatVersion, plan.FormatVersion)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(toJSONPlan(p)); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	return indentJSON(bytes.TrimSpace(b.Bytes())), nil
}

// ParsePlanJSON reads what PlanJSON wrote (for the applier, which keeps the
// last applied plan.json). Unknown fields and other format versions are
// errors. Lists come back non-nil.
func ParsePlanJSON(data []byte) (*plan.Plan, error) {
	var v struct {
		FormatVersion int `json:"formatVersion"`
	}
	// Unmarshal, unlike Decode, also rejects data after the plan.
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	if v.FormatVersion != plan.FormatVersion {
		return nil, fmt.Errorf("plan.json: format version %d, this netspec reads %d", v.FormatVersion, plan.FormatVersion)
	}
	var jp jsonPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jp); err != nil {
		return nil, fmt.Errorf("plan.json: %w", err)
	}
	return fromJSONPlan(&jp), nil
}

// The json* types mirror plan's types field by field, in the same order,
// with the JSON names. A field added to plan must be added here too: the
// round-trip test catches one that is not.

type jsonPlan struct {
	FormatVersion int           `json:"formatVersion"`
	Node          jsonNode      `json:"node"`
	Cluster       jsonCluster   `json:"cluster"`
	Services      []jsonService `json:"services"`
	DNS           jsonDNS       `json:"dns"`
	Env           []jsonEnvFile `json:"env"`
}

type jsonNode struct {
	Name string       `json:"name"`
	Zone string       `json:"zone"`
	IPs  []netip.Addr `json:"ips"`
}

type jsonCluster struct {
	Domain       string         `json:"domain"`
	ServiceCIDRs []netip.Prefix `json:"serviceCIDRs"`
	PodCIDRs     []netip.Prefix `json:"podCIDRs"`
	DNSTTL       uint32         `json:"dnsTTL"`
}

type jsonService struct {
	Namespace       string         `json:"namespace"`
	Name            string         `json:"name"`
	Type            string         `json:"type"`
	ClusterIPs      []netip.Addr   `json:"clusterIPs"`
	Headless        bool           `json:"headless"`
	ExternalName    string         `json:"externalName"`
	ExternalIPs     []netip.Addr   `json:"externalIPs"`
	LoadBalancerIPs []netip.Addr   `json:"loadBalancerIPs"`
	SourceRanges    []netip.Prefix `json:"sourceRanges"`
	AffinitySeconds int32          `json:"affinitySeconds"`
	InternalLocal   bool           `json:"internalLocal"`
	ExternalLocal   bool           `json:"externalLocal"`
	Ports           []jsonPort     `json:"ports"`
}

type jsonPort struct {
	Name      string         `json:"name"`
	Protocol  string         `json:"protocol"`
	Port      uint16         `json:"port"`
	NodePort  uint16         `json:"nodePort"`
	Endpoints []jsonEndpoint `json:"endpoints"`
	Cluster   []int          `json:"cluster"`
	External  []int          `json:"external"`
}

type jsonEndpoint struct {
	IP          netip.Addr `json:"ip"`
	Port        uint16     `json:"port"`
	Ready       bool       `json:"ready"`
	Serving     bool       `json:"serving"`
	Terminating bool       `json:"terminating"`
	NodeName    string     `json:"nodeName"`
	Zone        string     `json:"zone"`
	Hostname    string     `json:"hostname"`
	ZoneHints   []string   `json:"zoneHints"`
	NodeHints   []string   `json:"nodeHints"`
	Pod         string     `json:"pod"`
}

type jsonDNS struct {
	Zones []jsonZone `json:"zones"`
}

type jsonZone struct {
	Name    string       `json:"name"`
	Records []jsonRecord `json:"records"`
}

type jsonRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

type jsonEnvFile struct {
	Namespace string       `json:"namespace"`
	Vars      []jsonEnvVar `json:"vars"`
}

type jsonEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// jsonList converts a slice element by element into a non-nil slice, so that an
// empty list is written as [] and not null.
func jsonList[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

func jsonSame[T any](x T) T { return x }

func toJSONPlan(p *plan.Plan) *jsonPlan {
	return &jsonPlan{
		FormatVersion: plan.FormatVersion,
		Node:          jsonNode{Name: p.Node.Name, Zone: p.Node.Zone, IPs: jsonList(p.Node.IPs, jsonSame)},
		Cluster: jsonCluster{
			Domain:       p.Cluster.Domain,
			ServiceCIDRs: jsonList(p.Cluster.ServiceCIDRs, jsonSame),
			PodCIDRs:     jsonList(p.Cluster.PodCIDRs, jsonSame),
			DNSTTL:       p.Cluster.DNSTTL,
		},
		Services: jsonList(p.Services, func(s plan.Service) jsonService {
			return jsonService{
				Namespace:       s.Namespace,
				Name:            s.Name,
				Type:            s.Type,
				ClusterIPs:      jsonList(s.ClusterIPs, jsonSame),
				Headless:        s.Headless,
				ExternalName:    s.ExternalName,
				ExternalIPs:     jsonList(s.ExternalIPs, jsonSame),
				LoadBalancerIPs: jsonList(s.LoadBalancerIPs, jsonSame),
				SourceRanges:    jsonList(s.SourceRanges, jsonSame),
				AffinitySeconds: s.AffinitySeconds,
				InternalLocal:   s.InternalLocal,
				ExternalLocal:   s.ExternalLocal,
				Ports: jsonList(s.Ports, func(pt plan.Port) jsonPort {
					return jsonPort{
						Name:     pt.Name,
						Protocol: pt.Protocol,
						Port:     pt.Port,
						NodePort: pt.NodePort,
						Endpoints: jsonList(pt.Endpoints, func(e plan.Endpoint) jsonEndpoint {
							return jsonEndpoint{
								IP:          e.IP,
								Port:        e.Port,
								Ready:       e.Ready,
								Serving:     e.Serving,
								Terminating: e.Terminating,
								NodeName:    e.NodeName,
								Zone:        e.Zone,
								Hostname:    e.Hostname,
								ZoneHints:   jsonList(e.ZoneHints, jsonSame),
								NodeHints:   jsonList(e.NodeHints, jsonSame),
								Pod:         e.Pod,
							}
						}),
						Cluster:  jsonList(pt.Cluster, jsonSame),
						External: jsonList(pt.External, jsonSame),
					}
				}),
			}
		}),
		DNS: jsonDNS{Zones: jsonList(p.DNS.Zones, func(z plan.Zone) jsonZone {
			return jsonZone{Name: z.Name, Records: jsonList(z.Records, func(r plan.Record) jsonRecord {
				return jsonRecord{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data}
			})}
		})},
		Env: jsonList(p.Env, func(f plan.EnvFile) jsonEnvFile {
			return jsonEnvFile{Namespace: f.Namespace, Vars: jsonList(f.Vars, func(v plan.EnvVar) jsonEnvVar {
				return jsonEnvVar{Name: v.Name, Value: v.Value}
			})}
		}),
	}
}

func fromJSONPlan(jp *jsonPlan) *plan.Plan {
	return &plan.Plan{
		FormatVersion: jp.FormatVersion,
		Node:          plan.Node{Name: jp.Node.Name, Zone: jp.Node.Zone, IPs: jsonList(jp.Node.IPs, jsonSame)},
		Cluster: plan.Cluster{
			Domain:       jp.Cluster.Domain,
			ServiceCIDRs: jsonList(jp.Cluster.ServiceCIDRs, jsonSame),
			PodCIDRs:     jsonList(jp.Cluster.PodCIDRs, jsonSame),
			DNSTTL:       jp.Cluster.DNSTTL,
		},
		Services: jsonList(jp.Services, func(s jsonService) plan.Service {
			return plan.Service{
				Namespace:       s.Namespace,
				Name:            s.Name,
				Type:            s.Type,
				ClusterIPs:      jsonList(s.ClusterIPs, jsonSame),
				Headless:        s.Headless,
				ExternalName:    s.ExternalName,
				ExternalIPs:     jsonList(s.ExternalIPs, jsonSame),
				LoadBalancerIPs: jsonList(s.LoadBalancerIPs, jsonSame),
				SourceRanges:    jsonList(s.SourceRanges, jsonSame),
				AffinitySeconds: s.AffinitySeconds,
				InternalLocal:   s.InternalLocal,
				ExternalLocal:   s.ExternalLocal,
				Ports: jsonList(s.Ports, func(pt jsonPort) plan.Port {
					return plan.Port{
						Name:     pt.Name,
						Protocol: pt.Protocol,
						Port:     pt.Port,
						NodePort: pt.NodePort,
						Endpoints: jsonList(pt.Endpoints, func(e jsonEndpoint) plan.Endpoint {
							return plan.Endpoint{
								IP:          e.IP,
								Port:        e.Port,
								Ready:       e.Ready,
								Serving:     e.Serving,
								Terminating: e.Terminating,
								NodeName:    e.NodeName,
								Zone:        e.Zone,
								Hostname:    e.Hostname,
								ZoneHints:   jsonList(e.ZoneHints, jsonSame),
								NodeHints:   jsonList(e.NodeHints, jsonSame),
								Pod:         e.Pod,
							}
						}),
						Cluster:  jsonList(pt.Cluster, jsonSame),
						External: jsonList(pt.External, jsonSame),
					}
				}),
			}
		}),
		DNS: plan.DNS{Zones: jsonList(jp.DNS.Zones, func(z jsonZone) plan.Zone {
			return plan.Zone{Name: z.Name, Records: jsonList(z.Records, func(r jsonRecord) plan.Record {
				return plan.Record{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data}
			})}
		})},
		Env: jsonList(jp.Env, func(f jsonEnvFile) plan.EnvFile {
			return plan.EnvFile{Namespace: f.Namespace, Vars: jsonList(f.Vars, func(v jsonEnvVar) plan.EnvVar {
				return plan.EnvVar{Name: v.Name, Value: v.Value}
			})}
		}),
	}
}
