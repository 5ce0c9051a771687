// Package healthcheck serves the health check node ports of a node's
// plan, as kube-proxy's service health server does: an external load
// balancer in front of a LoadBalancer Service with externalTrafficPolicy
// Local asks every node on the Service's healthCheckNodePort whether it
// has local endpoints, and sends traffic only to the nodes that answer
// 200.
//
// For each such Service a Server listens on the port at every listen
// address of the node (ListenAddrs) and answers any HTTP request with
//
//	{
//		"service": {
//			"namespace": "edge",
//			"name": "gateway"
//		},
//		"localEndpoints": 1
//	}
//
// and status 200 when the node has local ready endpoints, 503 when it has
// none. Server.Sync follows each new plan: it opens the listeners of new
// ports and addresses, closes those that left, and updates the counts,
// leaving the other listeners alone. A listener that cannot bind is
// logged and counted (Server.Stats), and tried again at the next Sync.
package healthcheck

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"netspec.dev/netspec/applier/netnsexec"
	"netspec.dev/netspec/plan"
)

// Options configure a Server.
type Options struct {
	// NetNSFd is an open network namespace (/var/run/netns/NAME) whose
	// addresses the listeners bind; 0: the process's own.
	NetNSFd int
	Logger  *slog.Logger // slog.Default() when nil
	// LocalAddrs lists the node's local addresses, for a plan whose
	// Cluster has nodePortAddresses (see ListenAddrs); nil: none.
	LocalAddrs func() ([]netip.Addr, error)
}

// Server serves the health check node ports of the last plan given to
// Sync. Make it with New; it is safe for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	services map[string]*instance // by namespace/name
	closed   bool
}

// instance is the health check of one Service: its port, its count of
// local ready endpoints and its listeners.
type instance struct {
	namespace, name string
	port            uint16
	endpoints       atomic.Int64
	listeners       map[netip.Addr]*listener // bound
	failed          map[netip.Addr]bool      // could not bind at the last Sync
}

// listener is one bound address of an instance with its HTTP server.
type listener struct {
	ln  net.Listener
	srv *http.Server
}

// close stops the server and frees the port at once (http.Server.Close
// alone frees it only once Serve has started).
func (l *listener) close() {
	l.srv.Close()
	l.ln.Close()
}

// New returns a Server that serves nothing until Sync.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts, log: opts.Logger, services: map[string]*instance{}}
}

// Check is the health check of one Service in a plan.
type Check struct {
	Namespace, Name string
	Port            uint16 // the Service's HealthCheckNodePort
	// LocalEndpoints counts the distinct addresses of the Service's ready
	// endpoints on the plan's node, over all its ports (kube-proxy's
	// LocalReadyEndpoints): a pod serving two ports is one.
	LocalEndpoints int
}

// Key is namespace/name.
func (c Check) Key() string { return c.Namespace + "/" + c.Name }

// Checks returns the health checks of a plan: one per Service with a
// health check node port, in the plan's order.
func Checks(p *plan.Plan) []Check {
	var out []Check
	for i := range p.Services {
		s := &p.Services[i]
		if s.HealthCheckNodePort == 0 {
			continue
		}
		local := map[netip.Addr]bool{}
		for _, port := range s.Ports {
			for _, ep := range port.Endpoints {
				if ep.Ready && ep.NodeName == p.Node.Name {
					local[ep.IP] = true
				}
			}
		}
		out = append(out, Check{Namespace: s.Namespace, Name: s.Name, Port: s.HealthCheckNodePort, LocalEndpoints: len(local)})
	}
	return out
}

// ListenAddrs returns the addresses of the plan's node that the health
// check node ports listen on: its node-port addresses (plan.NodePortAddress),
// as the node ports themselves answer. Those are the addresses of its Node
// object (plan.Node.IPs), or, in a family the Cluster's nodePortAddresses
// name CIDRs for, the node's local addresses inside them: local lists the
// node's addresses for that case and is not needed without such CIDRs.
func ListenAddrs(p *plan.Plan, local []netip.Addr) []netip.Addr {
	return p.NodePortAddrs(local)
}

// Sync makes the Server serve the health checks of p on ListenAddrs(p):
// listeners of Services, ports and addresses that are no longer in p are
// closed, new ones opened, those that failed to bind are tried again, and
// every count follows p. Listeners that stay are not touched. A nil plan
// closes every listener.
func (s *Server) Sync(p *plan.Plan) {
	var checks []Check
	var addrs []netip.Addr
	if p != nil {
		var local []netip.Addr
		if len(p.Cluster.NodePortAddresses) > 0 && s.opts.LocalAddrs != nil {
			var err error
			if local, err = s.opts.LocalAddrs(); err != nil {
				s.log.Warn("health checks: cannot list the node's addresses for nodePortAddresses; serving on the Node's addresses", "err", err)
			}
		}
		checks, addrs = Checks(p), ListenAddrs(p, local)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	want := make(map[string]Check, len(checks))
	for _, c := range checks {
		want[c.Key()] = c
	}
	for key, in := range s.services {
		if c, ok := want[key]; !ok || c.Port != in.port {
			s.closeAll(in)
			delete(s.services, key)
		}
	}
	for _, c := range checks {
		in := s.services[c.Key()]
		if in == nil {
			in = &instance{namespace: c.Namespace, name: c.Name, port: c.Port,
				listeners: map[netip.Addr]*listener{}, failed: map[netip.Addr]bool{}}
			s.services[c.Key()] = in
			s.log.Info("serving health check", "service", c.Key(), "port", c.Port)
		}
		in.endpoints.Store(int64(c.LocalEndpoints))
		s.listen(in, addrs)
	}
}

// listen opens the listeners of in on addrs that it lacks and closes
// those on other addresses.
func (s *Server) listen(in *instance, addrs []netip.Addr) {
	for a, l := range in.listeners {
		if !slices.Contains(addrs, a) {
			l.close()
			delete(in.listeners, a)
		}
	}
	for a := range in.failed {
		if !slices.Contains(addrs, a) {
			delete(in.failed, a)
		}
	}
	for _, a := range addrs {
		if in.listeners[a] != nil {
			continue
		}
		ap := netip.AddrPortFrom(a, in.port)
		ln, err := s.bind(ap)
		if err != nil {
			if !in.failed[a] {
				s.log.Error("health check cannot listen; retrying at the next sync", "service", in.namespace+"/"+in.name, "addr", ap.String(), "err", err)
			}
			in.failed[a] = true
			continue
		}
		if in.failed[a] {
			s.log.Info("health check listening again", "service", in.namespace+"/"+in.name, "addr", ap.String())
			delete(in.failed, a)
		}
		srv := &http.Server{Handler: handler{in}, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
		in.listeners[a] = &listener{ln: ln, srv: srv}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("health check server stopped", "service", in.namespace+"/"+in.name, "addr", ap.String(), "err", err)
			}
		}()
	}
}

// bind opens a TCP listener on ap in the Server's network namespace.
func (s *Server) bind(ap netip.AddrPort) (net.Listener, error) {
	if s.opts.NetNSFd == 0 {
		return net.Listen("tcp", ap.String())
	}
	var ln net.Listener
	err := netnsexec.Run(s.opts.NetNSFd, func() error {
		var err error
		ln, err = net.Listen("tcp", ap.String())
		return err
	})
	return ln, err
}

// closeAll closes every listener of in.
func (s *Server) closeAll(in *instance) {
	for a, l := range in.listeners {
		l.close()
		delete(in.listeners, a)
	}
	s.log.Info("health check closed", "service", in.namespace+"/"+in.name, "port", in.port)
}

// Stats returns how many listeners are bound and how many could not bind
// at the last Sync.
func (s *Server) Stats() (listening, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.services {
		listening += len(in.listeners)
		failed += len(in.failed)
	}
	return listening, failed
}

// Close closes every listener; Sync does nothing afterwards.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, in := range s.services {
		s.closeAll(in)
		delete(s.services, key)
	}
	s.closed = true
}

// handler answers the health checks of one Service.
type handler struct{ in *instance }

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.in.endpoints.Load()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if n > 0 {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d\n}\n", h.in.namespace, h.in.name, n)
}
