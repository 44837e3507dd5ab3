package egressproxy

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// judge applies the rule for to to the box whose token is tok (from
// Proxy-Authorization, sent from from), for a CONNECT, a plain request
// and the re-check of an open tunnel. A CONNECT and a plain request
// (count true) are counted against the box's rate (broker.CountRequest)
// once the box is admitted, before the store is read for them: a box
// cannot have the broker read its secrets and open proposals faster
// than its rate by sending CONNECTs the proxy refuses. It returns the tunnel,
// passthrough true for a host on the passthrough list, or the refusal
// (with the tunnel, when the box is known). The broker
// admits the box (its token, its pause, its report); the proxy chooses
// the words: the names of the box's secrets pinned to to, of which the
// box's report must declare at least one.
func (p *Proxy) judge(ctx context.Context, tok string, from netip.Addr, to target, count bool) (t *tunnel, passthrough bool, err error) {
	adm, err := p.cfg.Broker.AdmitBox(ctx, tok, protocol.Egress, from)
	if token.Refused(err) {
		msg := "The proxy needs the box's token in Proxy-Authorization: set HTTPS_PROXY=http://box:<token>@<this address> (Basic, any user, the token as the password), or send Proxy-Authorization: Bearer <token>."
		if tok != "" {
			msg = "The token in Proxy-Authorization is no box's token at this broker."
		}
		e := capability.Refuse(capability.ReasonToken, "%s", msg).At(http.StatusProxyAuthRequired)
		e.Header = http.Header{"Proxy-Authenticate": {`Basic realm="boxbroker egress proxy"`}}
		return nil, false, e
	}
	if adm != nil {
		t = &tunnel{box: adm.Box.Name, token: tok, tokenHash: adm.TokenHash, from: from, to: to}
	}
	if err != nil {
		return t, false, err
	}
	if count {
		if err := p.cfg.Broker.CountRequest(adm.Box.Name); err != nil {
			return t, false, err
		}
	}
	secs, err := p.cfg.Secrets.ListSecrets(ctx, adm.Box.Name)
	if err != nil {
		return t, false, capability.Unavailable(err)
	}
	if to.scheme == "https" && p.passthrough[to.addr()] {
		return t, true, p.judgePassthrough(adm, secs, to)
	}
	var pinned []string
	for _, s := range secs {
		if pinnedTo(s.Host, to) {
			pinned = append(pinned, s.Name)
		}
	}
	where := to.scheme + "://" + to.addr()
	if len(pinned) == 0 {
		refusal := capability.Refuse(capability.ReasonNoSecret, "No egress secret of this box is pinned to %s, so the broker's proxy does not reach it: egress goes only to a host a secret is pinned to, by its exact host and port; its owner pins one with `boxbroker secret set %s NAME --host %s`.",
			where, adm.Box.Name, where)
		if ip, err := netip.ParseAddr(to.host); err == nil && !p.cfg.Reach(ip) {
			// No approval could open it (dialApproved): ask no one.
			refusal.Message += " An address that is not public (loopback, a private network, a cloud's metadata service) is never approved as an unknown host."
			return t, false, refusal
		}
		approved, words := p.ask(ctx, adm.Box.Name, tok, adm.TokenHash, to, refusal.Message)
		if approved {
			// Approved: a passthrough tunnel, on the passthrough rule
			// (no secret of the box pinned to the host, on any port),
			// to public addresses alone (dialApproved).
			t.approved = true
			return t, true, p.judgePassthrough(adm, secs, to)
		}
		refusal.Message += words
		return t, false, refusal
	}
	for _, name := range pinned {
		if adm.Refusal(name) == nil {
			t.names = append(t.names, name)
		}
	}
	if len(t.names) == 0 {
		return t, false, capability.Refuse(capability.ReasonDeclaration, "The proxy reaches %s through egress with the scope word of a secret pinned there (%s), and this box declares none of them. %s",
			where, strings.Join(pinned, ", "), adm.Refusal(pinned[0]).Message)
	}
	return t, false, nil
}

// ask reports whether an approval in force lets box's CONNECT to to, a
// host with no secret and no passthrough entry, through as passthrough,
// and otherwise the words its refusal adds when the box's owner asks
// about unknown hosts. Only https targets are asked about; a store that
// fails leaves the CONNECT refused (logged).
func (p *Proxy) ask(ctx context.Context, box, tok, tokenHash string, to target, reason string) (bool, string) {
	if to.scheme != "https" {
		return false, ""
	}
	return p.cfg.Approvals.Ask(ctx, approval.Attempt{Attempt: store.Attempt{Box: box, Kind: store.ProposalHost, Method: http.MethodConnect, Host: to.addr(),
		Reason: reason}, TokenHash: tokenHash, Forbidden: []string{tok}},
		p.log, "proxy: approvals unreadable; the CONNECT stays refused", "box", box, "addr", to.addr())
}

// judgePassthrough applies the rule for a passthrough host to box, whose
// secrets are secs: its report must declare egress, and no secret of it
// may be pinned to the host, on any port (a host's state may well be
// shared by its ports). The broker does not read a passthrough tunnel,
// so what it wrote to a secret's host for the box (the value, a token it
// minted, a signature) could come back through one unredacted.
func (p *Proxy) judgePassthrough(adm *broker.Admission, secs []store.Secret, to target) error {
	d := adm.Report
	if d == nil {
		return capability.Refuse(capability.ReasonDeclaration, "The broker has no declaration from this box yet, so it brokers nothing for it, and its proxy tunnels nothing: a tunnel to %s needs an egress entry brokered by %s in the box block of its chant.workspace.json, reported to %s.",
			to.addr(), p.cfg.BrokerWord, protocol.RouteDeclaration)
	}
	if d.Find(protocol.Egress, p.cfg.BrokerWord) == nil {
		return capability.Refuse(capability.ReasonDeclaration, "This box declares no egress capability brokered by %s, so the broker's proxy tunnels nothing for it, not even to %s. Add an egress entry brokered by %s to the box block in its chant.workspace.json.",
			p.cfg.BrokerWord, to.addr(), p.cfg.BrokerWord)
	}
	var pinned []string
	for _, s := range secs {
		if u, err := protocol.ParseSecretHost(s.Host); err == nil && hostName(u.Hostname()) == to.host {
			pinned = append(pinned, s.Name)
		}
	}
	if len(pinned) > 0 {
		which, them := "secret "+pinned[0]+" is", "the secret"
		if n := len(pinned); n > 1 {
			which, them = "secrets "+strings.Join(pinned[:n-1], ", ")+" and "+pinned[n-1]+" are", "the secrets"
		}
		return capability.Refuse(capability.ReasonPassthrough, "%s is on the broker's passthrough list (--proxy-passthrough), and this box's %s pinned to %s: the broker does not read a passthrough tunnel, so it could not keep out of it what it wrote there for this box (a secret's value, a token it minted), and it opens none. Its operator takes %s off --proxy-passthrough, so the proxy reaches it through egress, or pins %s elsewhere.",
			to.addr(), which, to.host, to.host, them)
	}
	return nil
}

// pinnedTo reports whether the secret host base names exactly to's
// scheme, host and port.
func pinnedTo(base string, to target) bool {
	u, err := protocol.ParseSecretHost(base)
	return err == nil && u.Scheme == to.scheme && sameHost(u.Host, to)
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// hostName is a host's name as the proxy compares it: in lower case,
// without the trailing dot of a fully qualified name (example.com. is
// example.com), and an IP address in its one written form (as
// protocol.ParseSecretHost writes a secret's: 2001:db8:0::1 is
// 2001:db8::1, ::ffff:192.0.2.1 is 192.0.2.1), so that none of these
// makes a secret's host another.
func hostName(h string) string {
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// parseTarget reads a CONNECT's authority: host:port, the port given.
// The host is kept as hostName writes it.
func parseTarget(scheme, authority string) (target, bool) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil || host == "" || len(host) > maxHost {
		return target{}, false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return target{}, false
	}
	host = hostName(host)
	if host == "" {
		return target{}, false
	}
	return target{scheme: scheme, host: host, port: port}, true
}

// refuse answers r with the refusal err through the broker's writer
// (broker.Refuse), which records it when t, the tunnel, names a box.
