package broker

import (
	"net/http"
	"net/netip"

	"github.com/intentius/boxbroker/internal/token"
)

// Handoff says how a request reached the broker through another of its
// front doors, one that has read the box's token and where the box is
// before handing the request in (the HTTPS proxy, package egressproxy):
// the request itself is an ordinary one, as a box would send it to the
// broker's own listener. ServeHandoff serves it.
type Handoff struct {
	// Token is the box's token as the front door read it. The broker
	// authenticates the request by it: a token the request carries
	// itself must be the same one (two different ones are refused as for
	// any request), and a request that carries none is the box's all
	// the same.
	Token string
	// From is where the box sent the request from, as the front door
	// judged it; the box's binding (store.Box.From) is judged by it
	// rather than by the request's RemoteAddr. The zero Addr is admitted
	// by no binding.
	From netip.Addr
	// Label begins the request's route label in logs, metrics and the
	// audit log (the proxy's "proxy "), so that they show which door it
	// came through.
	Label string
	// Tunnel, when not nil, serves the request in place of a capability.
	Tunnel *Tunnel
	// Counted says the front door counted the request against the box's
	// rate already (CountRequest), as the proxy counts the CONNECT it
	// judged: it is then held within the box's in-flight bound alone.
	Counted bool
}

// CountRequest counts one request of the box named box against its rate
// (Limits.Rate), holding nothing, or returns the 429 refusal past it: a
// front door that judges a request itself before handing it in (the
// proxy's CONNECT, with the store reads and proposals its judgment
// takes) counts it so, and hands it in with Handoff.Counted.
func (s *Server) CountRequest(box string) error { return s.limits.count(box) }

// Tunnel is a request a front door answers itself, beyond the broker's
// routes (the proxy's passthrough tunnels): the broker admits its box by
// the Handoff's Token (its binding, expiry and pause), holds it within
// the box's rate and in-flight bounds (Limits) while Serve runs, and
// records it as it records every request.
type Tunnel struct {
	// Capability is the capability the tunnel is admitted for, and
	// Route its route label, whole.
	Capability, Route string
	// Words are the scope words the front door judged the tunnel by.
	Words []string
	// Serve serves the tunnel. An error it returns before it has
	// answered is a refusal, written as every refusal is; otherwise
	// what it returns is kept in the request's record: the bytes it
	// carried, and the reason and message of its ending ("" and a line
	// saying where it went, for a tunnel that ended by itself).
	Serve func(w http.ResponseWriter, r *http.Request) (TunnelEnd, error)
}

// TunnelEnd is what a Tunnel's Serve tells the broker's record of it.
type TunnelEnd struct {
	Bytes           int64
	Reason, Message string
}

// ServeHandoff serves r, a request handed in by another front door, as
// ServeHTTP serves a request from a box, but for what h says: the token
// and source it is authenticated by, the label of its route, and, for a
// Tunnel, what serves it. Everything else (the route, the rule, the
// box's pause and limits, the capability's own checks, the records)
// applies unchanged.
func (s *Server) ServeHandoff(w http.ResponseWriter, r *http.Request, h Handoff) {
	s.serveHTTP(w, r, &h)
}

// serveTunnel admits the box of a Tunnel handed in with hd and serves it
// within the box's limits.
func (s *Server) serveTunnel(w *recorder, r *http.Request, info *requestInfo, hd *Handoff) error {
	tun := hd.Tunnel
	info.Capability, info.Route, info.Words = tun.Capability, tun.Route, tun.Words
	adm, err := s.AdmitBox(r.Context(), hd.Token, tun.Capability, hd.From)
	if adm != nil {
		info.Box = adm.Box.Name
	}
	if token.Refused(err) {
		// The front door admitted the token a moment ago; the box has
		// gone, or its token been rotated, since.
		return tokenRefused(err)
	}
	if err != nil {
		return err
	}
	h, err := s.limits.takeRated(adm.Box.Name, !hd.Counted)
	if err != nil {
		return err
	}
	defer h.release()
	end, err := tun.Serve(w, r)
	if err != nil {
		return err
	}
	w.bytes += end.Bytes
	info.Reason, info.Message = end.Reason, end.Message
	return nil
}

// source is where r came from, as the box's binding is judged: hd's
// From for a request handed in, else Source(r).
func (s *Server) source(r *http.Request, hd *Handoff) netip.Addr {
	if hd != nil {
		return hd.From
	}
	return s.Source(r)
}
