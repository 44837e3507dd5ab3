package egressproxy

import "context"

// RecheckOnce judges every open tunnel again, once, as every Recheck
// does.
func (p *Proxy) RecheckOnce(ctx context.Context) { p.recheck(ctx) }
