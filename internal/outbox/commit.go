package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

// body is a record's fields being encoded, with encoding/json's Encoder
// over it: kept in bodies for reuse, as encoding a record then
// allocates no buffer of its own.
type body struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var bodies = sync.Pool{New: func() any {
	b := &body{}
	b.enc = json.NewEncoder(&b.buf)
	return b
}}

// maxPooledBody bounds the buffer a body keeps when it goes back to the
// pool: an unusually large record's is let go.
const maxPooledBody = 64 << 10

// field appends name and v's JSON encoding (as json.Marshal's) to b.
func (b *body) field(name string, v any) error {
	b.buf.WriteString(name)
	if err := b.enc.Encode(v); err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	b.buf.Truncate(b.buf.Len() - 1) // Encode's newline
	return nil
}

// put empties b and returns it to the pool.
func (b *body) put() {
	if b.buf.Cap() > maxPooledBody {
		return
	}
	b.buf.Reset()
	bodies.Put(b)
}

// record appends {"n":seq<body>} under the next number, body being its
// parts' fields.
//
// Concurrent appends share one write(2) (group commit): the first to
// arrive while no group is forming leads a group, waits for the file
// (the write before it), closes the group and writes every line that
// joined it at once; the others wait for that write. No timer is
// involved, so a lone append is written at once, as before; each
// returns only once its own line is in the file.
func (j *Journal) record(body []byte, parts Part) (uint64, error) {
	j.gmu.Lock()
	g := j.forming
	leader := g == nil
	if leader {
		g = &group{}
		g.recs = g.first[:0]
		j.forming = g
	}
	i := len(g.recs)
	g.recs = append(g.recs, groupRec{body: body, parts: parts})
	if !leader {
		for !g.done {
			j.written.Wait()
		}
		j.gmu.Unlock()
		return g.recs[i].seq, g.recs[i].err
	}
	j.gmu.Unlock()
	j.mu.Lock()
	j.gmu.Lock()
	j.forming = nil // later arrivals form the next group
	j.gmu.Unlock()
	j.writeGroupLocked(g)
	j.mu.Unlock()
	j.gmu.Lock()
	g.done = true
	if len(g.recs) > 1 {
		j.written.Broadcast()
	}
	j.gmu.Unlock()
	return g.recs[0].seq, g.recs[0].err
}

// group is the records that share one write; done is set (under gmu,
// with written broadcast) once it is written or failed, with each
// record's number or error set.
type group struct {
	recs  []groupRec
	first [2]groupRec // recs' first backing: most groups are small
	done  bool
}

// groupRec is one record of a group: what record was given, and what
// it returns.
type groupRec struct {
	body  []byte
	parts Part
	end   int // where its line ends in the group's write
	seq   uint64
	err   error
}

// writeGroupLocked numbers g's records, writes their lines in one
// write, and keeps each whose line is whole in the file; j.mu is held.
// A write cut short keeps the records whose lines it wrote in full, or
// in full but for the newline (recovery reads either; the next write
// begins with that newline), and fails the rest (their lines are cut
// off, and recovery skips them).
func (j *Journal) writeGroupLocked(g *group) {
	size := 0
	for _, r := range g.recs {
		size += len(r.body) + 32
	}
	buf := make([]byte, 0, size)
	seq := j.seq
	for i := range g.recs {
		r := &g.recs[i]
		buf = append(buf, `{"n":`...)
		buf = strconv.AppendUint(buf, seq+uint64(i)+1, 10)
		buf = append(buf, r.body...)
		buf = append(buf, '}', '\n')
		r.end = len(buf)
	}
	n, err := j.writeLocked(buf)
	start := 0
	for i := range g.recs {
		r := &g.recs[i]
		if r.end-1 > n {
			r.err = err
			continue
		}
		seq++
		r.seq = seq
		j.open[seq] = openRec{line: buf[start:r.end:r.end], has: r.parts, left: r.parts}
		start = r.end
	}
	j.seq = seq
}
