package schema

// applyDefaults fills in the Kubernetes defaults that the schema also
// declares, on an object decoded in Go. TestDefaultsMatchSchema checks that
// both give the same object for every example.
func applyDefaults(o *Object, raw map[string]any) {
	if Namespaced(o.Kind) {
		if m := o.Meta(); m.Namespace == "" {
			m.Namespace = "default"
		}
	}
	switch {
	case o.Service != nil:
		defaultService(&o.Service.Spec, raw)
	case o.Endpoints != nil:
		for i := range o.Endpoints.Subsets {
			defaultPorts(o.Endpoints.Subsets[i].Ports)
		}
	case o.EndpointSlice != nil:
		defaultPorts(o.EndpointSlice.Ports)
		eps, _ := raw["endpoints"].([]any)
		for i := range o.EndpointSlice.Endpoints {
			c := &o.EndpointSlice.Endpoints[i].Conditions
			var rc map[string]any
			if i < len(eps) {
				if e, ok := eps[i].(map[string]any); ok {
					rc, _ = e["conditions"].(map[string]any)
				}
			}
			if _, ok := rc["ready"]; !ok {
				c.Ready = true
			}
			if _, ok := rc["serving"]; !ok {
				c.Serving = true
			}
		}
	case o.Pod != nil:
		for _, cs := range [][]Container{o.Pod.Spec.Containers, o.Pod.Spec.InitContainers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if p := &cs[i].Ports[j]; p.Protocol == "" {
						p.Protocol = "TCP"
					}
				}
			}
		}
	}
}

func defaultPorts(ps []EndpointPort) {
	for i := range ps {
		if ps[i].Protocol == "" {
			ps[i].Protocol = "TCP"
		}
	}
}

func defaultService(s *ServiceSpec, raw map[string]any) {
	if s.Type == "" {
		s.Type = "ClusterIP"
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = "TCP"
		}
		// Absent, 0 and "" all mean the port itself, as the API server
		// defaults them.
		if p.TargetPort == (IntOrString{}) {
			p.TargetPort = IntOrString{Int: p.Port}
		}
	}
	if s.SessionAffinity == "" {
		s.SessionAffinity = "None"
	}
	if s.SessionAffinity == "ClientIP" {
		if s.SessionAffinityConfig == nil {
			s.SessionAffinityConfig = &SessionAffinityConfig{}
		}
		if s.SessionAffinityConfig.ClientIP == nil {
			s.SessionAffinityConfig.ClientIP = &ClientIPConfig{}
		}
	}
	if c := s.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds == 0 {
		if _, set := lookupRaw(raw, []any{"spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds"}); !set {
			c.ClientIP.TimeoutSeconds = 10800
		}
	}
	if s.InternalTrafficPolicy == "" {
		s.InternalTrafficPolicy = "Cluster"
	}
	if s.ExternalTrafficPolicy == "" && (s.Type == "NodePort" || s.Type == "LoadBalancer") {
		s.ExternalTrafficPolicy = "Cluster"
	}
	if s.IPFamilyPolicy == "" && s.Type != "ExternalName" {
		if len(s.ClusterIPs) > 1 || len(s.IPFamilies) > 1 {
			s.IPFamilyPolicy = "RequireDualStack"
		} else {
			s.IPFamilyPolicy = "SingleStack"
		}
	}
}
