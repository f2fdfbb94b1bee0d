package serve

import "net"

// Metrics are the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// FlightAddr is the bound Flight address.
func (s *Server) FlightAddr() net.Addr { return s.lis.Addr() }
