package render

import (
	"bytes"
	"encoding/json"
	"fmt"

	"netspec.dev/netspec/plan"
)

// PlanDeltaJSON renders a plan.Delta as one line of JSON: the positions
// of the lists' changes, and a plan (as PlanJSON writes it) that holds the
// new node and cluster, the Services added, and every zone and env file of
// the new plan with the records and variables added. A node appends it to
// the state dir's plan.log; ParsePlanDeltaJSON reads it back.
func PlanDeltaJSON(d *plan.Delta) ([]byte, error) {
	carrier := &plan.Plan{FormatVersion: d.FormatVersion, Node: d.Node, Cluster: d.Cluster, Services: d.Services.Added}
	v := jsonDelta{Services: positions{Removed: d.Services.Removed, At: d.Services.At}}
	for _, z := range d.Zones {
		carrier.DNS.Zones = append(carrier.DNS.Zones, plan.Zone{Name: z.Name, Records: z.Records.Added})
		v.Zones = append(v.Zones, positions{Removed: z.Records.Removed, At: z.Records.At})
	}
	for _, e := range d.Env {
		carrier.Env = append(carrier.Env, plan.EnvFile{Namespace: e.Namespace, Vars: e.Vars.Added})
		v.Env = append(v.Env, positions{Removed: e.Vars.Removed, At: e.Vars.At})
	}
	p, err := PlanJSON(carrier)
	if err != nil {
		return nil, fmt.Errorf("plan delta: %w", err)
	}
	v.Plan = p
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&v); err != nil { // compact, one line, newline-terminated
		return nil, fmt.Errorf("plan delta: %w", err)
	}
	return b.Bytes(), nil
}

// ParsePlanDeltaJSON reads what PlanDeltaJSON wrote.
func ParsePlanDeltaJSON(data []byte) (*plan.Delta, error) {
	var v jsonDelta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("plan delta: %w", err)
	}
	carrier, err := ParsePlanJSON(v.Plan)
	if err != nil {
		return nil, fmt.Errorf("plan delta: %w", err)
	}
	if len(v.Zones) != len(carrier.DNS.Zones) || len(v.Env) != len(carrier.Env) {
		return nil, fmt.Errorf("plan delta: %d zone and %d env positions for %d zones and %d env files",
			len(v.Zones), len(v.Env), len(carrier.DNS.Zones), len(carrier.Env))
	}
	d := &plan.Delta{FormatVersion: carrier.FormatVersion, Node: carrier.Node, Cluster: carrier.Cluster,
		Services: plan.ListDelta[plan.Service]{Removed: v.Services.Removed, At: v.Services.At, Added: carrier.Services}}
	for i, z := range carrier.DNS.Zones {
		d.Zones = append(d.Zones, plan.ZoneDelta{Name: z.Name,
			Records: plan.ListDelta[plan.Record]{Removed: v.Zones[i].Removed, At: v.Zones[i].At, Added: z.Records}})
	}
	for i, e := range carrier.Env {
		d.Env = append(d.Env, plan.EnvDelta{Namespace: e.Namespace,
			Vars: plan.ListDelta[plan.EnvVar]{Removed: v.Env[i].Removed, At: v.Env[i].At, Added: e.Vars}})
	}
	return d, nil
}

type jsonDelta struct {
	Services positions       `json:"services"`
	Zones    []positions     `json:"zones"`
	Env      []positions     `json:"env"`
	Plan     json.RawMessage `json:"plan"`
}

type positions struct {
	Removed []int `json:"removed,omitempty"`
	At      []int `json:"at,omitempty"`
}
