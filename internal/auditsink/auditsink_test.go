package auditsink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/outbox/outboxtest"
	"github.com/intentius/boxbroker/internal/store"
)

// receiver is a JSON-lines sink on loopback that refuses its first fail
// POSTs (503), then takes them, keeping the rows and the raw bytes it
// took.
type receiver struct {
	mu    sync.Mutex
	fail  int
	posts int
	rows  []auditsink.Row
	raw   bytes.Buffer
	auth  []string
	got   chan struct{}
}

func newReceiver(t *testing.T, fail int) (*receiver, *url.URL) {
	t.Helper()
	rc := &receiver{fail: fail, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/audit")
	return rc, u
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts++
	if rc.posts <= rc.fail {
		http.Error(w, "not now", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Content-Type") != "application/x-ndjson" {
		http.Error(w, "want JSON lines", http.StatusUnsupportedMediaType)
		return
	}
	rc.auth = append(rc.auth, r.Header.Get("Authorization"))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row auditsink.Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			http.Error(w, "not a row", http.StatusBadRequest)
			return
		}
		rc.rows = append(rc.rows, row)
	}
	rc.raw.Write(b)
	select {
	case rc.got <- struct{}{}:
	default:
	}
}

// resume has rc take posts again and runs s, then checks that rc gets
// n rows, row 0 to n-1 in order.
func (rc *receiver) resume(t *testing.T, s *auditsink.Sink, n int) {
	t.Helper()
	rc.mu.Lock()
	rc.fail = 0
	rc.mu.Unlock()
	run(t, s)
	rows := rc.waitRows(t, n)
	if len(rows) != n {
		t.Fatalf("got %d rows, want %d", len(rows), n)
	}
	checkOrder(t, rows, 0)
}

// waitRows waits, a bounded number of times, until rc holds n rows, and
// returns them.
func (rc *receiver) waitRows(t *testing.T, n int) []auditsink.Row {
	t.Helper()
	for i := 0; i < 3000; i++ {
		rc.mu.Lock()
		got := append([]auditsink.Row(nil), rc.rows...)
		rc.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-rc.got:
		case <-time.After(10 * time.Millisecond):
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	t.Fatalf("receiver has %d rows after %d posts, want %d", len(rc.rows), rc.posts, n)
	return nil
}

func entries(from, n int) []store.AuditEntry {
	var out []store.AuditEntry
	for i := from; i < from+n; i++ {
		out = append(out, store.AuditEntry{Box: "alpha", At: time.Unix(int64(1_800_000_000+i), 0), Method: "POST",
			Route: "/llm/anthropic/v1/messages", Capability: "inference", Status: 200, Message: fmt.Sprintf("row %d", i)})
	}
	return out
}

func open(t *testing.T, dir string, u *url.URL, reg prometheus.Registerer, max, batch int) *auditsink.Sink {
	t.Helper()
	s, err := auditsink.Open(auditsink.Config{URL: u, Dir: dir, MaxBacklog: max, Batch: batch,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Registerer: reg, Token: "sink-bearer",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// waitAcked waits, a bounded number of times, until s has had its whole
// backlog acknowledged: a row the sink took but whose answer the sender
// had not read when it stopped is sent again (at least once), which the
// tests that count repeats rule out this way.
func waitAcked(t *testing.T, s *auditsink.Sink) {
	t.Helper()
	for i := 0; i < 3000 && s.Backlog() > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	if n := s.Backlog(); n > 0 {
		t.Fatalf("backlog still holds %d rows", n)
	}
}

// reopen closes s and opens its backlog in dir again (max rows, batches
// of 100), as the next process would, and checks that it holds want
// rows; the Sink it returns is closed when the test ends.
func reopen(t *testing.T, s *auditsink.Sink, dir string, u *url.URL, max, want int) *auditsink.Sink {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, u, nil, max, 100)
	t.Cleanup(func() { s2.Close() })
	if got := s2.Backlog(); got != want {
		t.Fatalf("backlog after restart = %d, want %d", got, want)
	}
	return s2
}

// run runs s until the test (or stop) ends.
func run(t *testing.T, s *auditsink.Sink) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// checkOrder checks that rows are row 0..n-1 of one replica, in order.
func checkOrder(t *testing.T, rows []auditsink.Row, first int) {
	t.Helper()
	for i, r := range rows {
		want := fmt.Sprintf("row %d", first+i)
		if r.Message != want || r.Seq != uint64(first+i+1) || r.Replica != rows[0].Replica {
			t.Fatalf("row %d = seq %d %q (replica %s), want seq %d %q (replica %s)", i, r.Seq, r.Message, r.Replica, first+i+1, want, rows[0].Replica)
		}
	}
}

// TestSink_RetriesInOrder: a sink that refuses its first posts gets every
// row, once each, in order, with the bearer token.
func TestSink_RetriesInOrder(t *testing.T) {
	rc, u := newReceiver(t, 4)
	s := open(t, t.TempDir(), u, nil, 0, 5)
	defer s.Close()
	run(t, s)
	for i := 0; i < 4; i++ {
		if err := s.Append(fmt.Sprintf("k%d", i), entries(3*i, 3)); err != nil {
			t.Fatal(err)
		}
	}
	rows := rc.waitRows(t, 12)
	if len(rows) != 12 {
		t.Fatalf("got %d rows, want 12", len(rows))
	}
	checkOrder(t, rows, 0)
	if rows[4].Batch != "k1" || rows[4].Index != 1 {
		t.Errorf("row 4 batch %q index %d, want k1 1", rows[4].Batch, rows[4].Index)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.auth[0] != "Bearer sink-bearer" {
		t.Errorf("Authorization = %q, want the bearer token", rc.auth[0])
	}
}

// TestSink_RestartResendsUnacknowledged: rows a process kept but did not
// get acknowledged — after part of the backlog was acknowledged — are
// sent, in order, by the next process over the same directory, and no
// acknowledged row is sent again.
func TestSink_RestartResendsUnacknowledged(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 0)
	s := open(t, dir, u, nil, 0, 3)
	stop := run(t, s)
	if err := s.Append("a", entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	rc.waitRows(t, 3)
	waitAcked(t, s)
	stop()
	rc.mu.Lock()
	rc.fail = 1 << 30 // the sink is down from here
	rc.mu.Unlock()
	if err := s.Append("b", entries(3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, dir, u, nil, 0, 3)
	defer s2.Close()
	if got := s2.Backlog(); got != 4 {
		t.Fatalf("backlog after restart = %d, want 4", got)
	}
	if err := s2.Append("c", entries(7, 2)); err != nil {
		t.Fatal(err)
	}
	rc.resume(t, s2, 9)
}

// TestSink_BacklogDropsOldest: a full backlog drops its oldest rows,
// counts them, keeps the bound across a restart, and the sink later gets
// the newest rows in order.
func TestSink_BacklogDropsOldest(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 0)
	reg := prometheus.NewRegistry()
	s := open(t, dir, u, reg, 5, 100)
	for i := 0; i < 8; i++ {
		if err := s.Append(fmt.Sprintf("k%d", i), entries(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Backlog(); got != 5 {
		t.Errorf("Backlog() = %d, want 5", got)
	}
	if got := testutil.ToFloat64(mustGather(t, reg, "boxbroker_audit_sink_dropped_total")); got != 3 {
		t.Errorf("boxbroker_audit_sink_dropped_total = %v, want 3", got)
	}
	s2 := reopen(t, s, dir, u, 5, 5)
	run(t, s2)
	rows := rc.waitRows(t, 5)
	checkOrder(t, rows, 3)
}

func mustGather(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.CounterValue, mf.GetMetric()[0].GetCounter().GetValue())
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// TestSink_CompactsAndReopens: once most of the backlog file is
// acknowledged it is rewritten, and a restart after that neither loses
// nor repeats a row.
func TestSink_CompactsAndReopens(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 0)
	s := open(t, dir, u, nil, 0, 1000)
	stop := run(t, s)
	big := entries(0, 4000) // > 1 MiB of rows with the padding below
	for i := range big {
		big[i].Words = []string{string(bytes.Repeat([]byte("w"), 300))}
	}
	for i := 0; i < 4; i++ {
		if err := s.Append(fmt.Sprintf("k%d", i), big[i*1000:(i+1)*1000]); err != nil {
			t.Fatal(err)
		}
	}
	rc.waitRows(t, 4000)
	waitAcked(t, s)
	stop()
	if err := s.Append("tail", entries(4000, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, u, nil, 0, 1000)
	defer s2.Close()
	run(t, s2)
	rows := rc.waitRows(t, 4002)
	if len(rows) != 4002 {
		for i := 1; i < len(rows); i++ {
			if rows[i].Seq != rows[i-1].Seq+1 {
				t.Logf("at %d: seq %d after %d", i, rows[i].Seq, rows[i-1].Seq)
			}
		}
		t.Fatalf("got %d rows, want 4002", len(rows))
	}
	checkOrder(t, rows, 0)
}

// fakeStore is an audit store that refuses every write.
type fakeStore struct{ writes int }

var errDown = errors.New("store down")

func (f *fakeStore) AddAudit(context.Context, []store.AuditEntry) error { f.writes++; return errDown }
func (f *fakeStore) ListAudit(context.Context, store.AuditQuery) ([]store.AuditEntry, error) {
	return nil, nil
}
func (f *fakeStore) PruneAudit(context.Context, time.Time) (int64, error) { return 0, nil }
func (f *fakeStore) ApplySpooled(context.Context, string, []store.Settlement, []store.AuditEntry) (bool, error) {
	f.writes++
	return false, errDown
}

// TestWrap_SpooledBatchOnce: a spooled batch the store is offered again
// and again while it is down is kept for the sink once; a write with no
// key is kept under a key of its own.
func TestWrap_SpooledBatchOnce(t *testing.T) {
	_, u := newReceiver(t, 0)
	s := open(t, t.TempDir(), u, nil, 0, 100)
	defer s.Close()
	fs := &fakeStore{}
	st := s.Wrap(fs)
	for i := 0; i < 3; i++ {
		if _, err := st.ApplySpooled(context.Background(), "batch-1", nil, entries(0, 2)); !errors.Is(err, errDown) {
			t.Fatalf("ApplySpooled = %v, want the store's error", err)
		}
	}
	if err := st.AddAudit(context.Background(), entries(2, 1)); !errors.Is(err, errDown) {
		t.Fatalf("AddAudit = %v, want the store's error", err)
	}
	if fs.writes != 4 {
		t.Errorf("store writes = %d, want 4", fs.writes)
	}
	if got := s.Backlog(); got != 3 {
		t.Errorf("Backlog() = %d, want 3 (the batch once, the keyless row)", got)
	}
}

// TestSink_FailedAppendLeavesNoPart: a write to the backlog that fails
// part way (a full disk) leaves none of its rows behind: Append fails,
// the same batch appended again is kept once, the rows after it keep
// their order, and a restart reads the backlog whole and sends every row.
func TestSink_FailedAppendLeavesNoPart(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 1<<30) // down until the end
	s := open(t, dir, u, nil, 0, 100)
	if err := s.Append("a", entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	restore := outboxtest.FailAppendsAfter(40)
	if err := s.Append("b", entries(3, 2)); err == nil {
		t.Fatal("Append with a failing write = nil, want its error")
	}
	restore()
	for _, b := range []struct {
		key     string
		from, n int
	}{{"b", 3, 2}, {"c", 5, 4}} {
		if err := s.Append(b.key, entries(b.from, b.n)); err != nil {
			t.Fatalf("Append %s after the failed write: %v", b.key, err)
		}
	}
	if got := s.Backlog(); got != 9 {
		t.Fatalf("backlog = %d, want 9", got)
	}
	s2 := reopen(t, s, dir, u, 0, 9)
	rc.resume(t, s2, 9)
}

// picky is an audit store that refuses for good every batch of more
// than one entry, and a lone entry whose route is "/bad"; it takes the
// others.
type picky struct{ fakeStore }

func (p *picky) ApplySpooled(_ context.Context, _ string, _ []store.Settlement, audit []store.AuditEntry) (bool, error) {
	if len(audit) > 1 || (len(audit) == 1 && audit[0].Route == "/bad") {
		return false, store.ErrRejected
	}
	return true, nil
}

// TestWrap_RecordsOfARefusedBatchOnce: a spooled batch of three rows the
// store refuses whole is applied row by row (one of them set aside as a
// dead letter); each row is kept for the sink once, under the batch's
// key, and not again under the key of its row alone.
func TestWrap_RecordsOfARefusedBatchOnce(t *testing.T) {
	_, u := newReceiver(t, 0)
	dir := t.TempDir()
	s := open(t, dir, u, nil, 0, 100)
	defer s.Close()
	ob, err := outbox.Open(outbox.Config{Dir: dir, Store: s.Wrap(&picky{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	es := entries(0, 3)
	es[1].Route = "/bad"
	if err := ob.Spool.Append(outbox.Batch{Key: "batch-1", Audit: es}); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Replay(context.Background()); err != nil || n != 0 || ob.Spool.DeadCount() != 1 {
		t.Fatalf("Replay = %d, %v with %d dead letters; want 0 batches whole and the bad row set aside", n, err, ob.Spool.DeadCount())
	}
	if got := s.Backlog(); got != 3 {
		t.Errorf("Backlog() = %d, want 3 (each row of the batch once)", got)
	}
}

// TestSink_RowPastTheLineBoundIsRefused: a row of 100 KiB is kept and
// read back at a restart; a row longer than a backlog line may be
// (1 MiB) is refused by Append, so that the backlog a restart reads
// holds none (Open drops such a line, TestSink_HugeLineIsDroppedAtOpen);
// the rows around them are kept and sent.
func TestSink_RowPastTheLineBoundIsRefused(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 1<<30) // down until the end
	s := open(t, dir, u, nil, 0, 100)
	if err := s.Append("a", entries(0, 1)); err != nil {
		t.Fatal(err)
	}
	long := entries(1, 1)
	long[0].Words = []string{strings.Repeat("w", 100<<10)}
	if err := s.Append("long", long); err != nil {
		t.Fatalf("Append of a row of 100 KiB = %v", err)
	}
	big := entries(2, 1)
	big[0].Words = []string{strings.Repeat("w", 1<<20)}
	if err := s.Append("big", big); err == nil {
		t.Error("Append of a row past the line bound = nil, want an error")
	}
	if err := s.Append("c", entries(2, 1)); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, s, dir, u, 0, 3)
	rc.resume(t, s2, 3)
}

// TestSink_RowsDroppedAtOpenAreCounted: a backlog opened with a bound
// below the rows it holds (MaxBacklog lowered across a restart) drops
// its oldest rows, and counts them in boxbroker_audit_sink_dropped_total
// as a drop on Append does.
func TestSink_RowsDroppedAtOpenAreCounted(t *testing.T) {
	dir := t.TempDir()
	_, u := newReceiver(t, 1<<30) // down until the end
	s := open(t, dir, u, nil, 10, 100)
	if err := s.Append("a", entries(0, 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s2 := open(t, dir, u, reg, 5, 100)
	defer s2.Close()
	if got := s2.Backlog(); got != 5 {
		t.Errorf("Backlog() = %d, want 5", got)
	}
	if got := testutil.ToFloat64(mustGather(t, reg, "boxbroker_audit_sink_dropped_total")); got != 3 {
		t.Errorf("boxbroker_audit_sink_dropped_total = %v, want 3", got)
	}
}

// TestSink_BacklogFileBoundedWhileTheSinkRefuses: a sink that refuses
// every POST, for as long as rows keep coming, holds the backlog file to
// about what its bound keeps: the rows dropped from a full backlog are
// cut out of the file too, not only out of memory, so the data directory
// does not fill while the sink is down. A restart then sends the newest
// rows, in order.
func TestSink_BacklogFileBoundedWhileTheSinkRefuses(t *testing.T) {
	dir := t.TempDir()
	rc, u := newReceiver(t, 1<<30) // refuses every POST
	const max = 100
	s := open(t, dir, u, nil, max, 50)
	stop := run(t, s)
	pad := string(bytes.Repeat([]byte("w"), 1000))
	const batches, per = 200, 50 // 10,000 rows of about 1.2 KB: 12 MB appended
	for i := range batches {
		es := entries(i*per, per)
		for j := range es {
			es[j].Words = []string{pad}
		}
		if err := s.Append(fmt.Sprintf("k%d", i), es); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	// The file is rewritten once the rows cut out of it pass 1 MiB and
	// half of it: at most about twice the larger of 1 MiB and what the
	// bound keeps, never the 12 MB appended.
	files, _ := filepath.Glob(filepath.Join(dir, "auditsink", "backlog-*.jsonl"))
	var size int64
	for _, p := range files {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	if size > 3<<20 {
		t.Errorf("backlog files hold %d bytes after 12 MB of rows with a bound of %d rows, want at most 3 MiB", size, max)
	}
	if got := s.Backlog(); got != max {
		t.Errorf("Backlog() = %d, want %d", got, max)
	}
	s2 := reopen(t, s, dir, u, max, max)
	rc.mu.Lock()
	rc.fail = 0
	rc.mu.Unlock()
	run(t, s2)
	rows := rc.waitRows(t, max)
	checkOrder(t, rows, batches*per-max)
}

// TestSink_DamagedLineIsDroppedAtOpen: a line of the backlog damaged on
// the disk, between rows not yet sent, is dropped from the stream and
// counted, and the rows around it are sent, in order: serve starts, as
// the journal's and the spool's readers set such a line aside and go on.
// The store keeps the row.
func TestSink_DamagedLineIsDroppedAtOpen(t *testing.T) {
	dir, rc, u, file, lines := closedBacklog(t, 3)
	lines[1] = bytes.Repeat([]byte{0}, len(lines[1])-1)
	lines[1] = append(lines[1], '\n')
	if err := os.WriteFile(file, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, reg, err := openDamaged(t, dir, u)
	if err != nil {
		t.Fatalf("Open with a damaged line in the backlog: %v", err)
	}
	if got := s2.Backlog(); got != 2 {
		t.Errorf("Backlog() = %d, want the 2 rows around the damaged line", got)
	}
	if got := testutil.ToFloat64(mustGather(t, reg, "boxbroker_audit_sink_dropped_total")); got != 1 {
		t.Errorf("boxbroker_audit_sink_dropped_total = %v, want 1", got)
	}
	run(t, s2)
	rows := rc.waitRows(t, 2)
	if len(rows) != 2 || rows[0].Message != "row 0" || rows[1].Message != "row 2" || rows[1].Seq != 3 {
		t.Errorf("rows sent %+v, want row 0 and row 2 (seq 3)", rows)
	}
}

// TestSink_HugeLineIsDroppedAtOpen: a line of the backlog longer than
// any row (64 MiB of NUL bytes, a file extended by a crash or put
// there) does not keep serve from starting: it is passed over, never
// held whole, dropped from the stream and counted as a damaged line is,
// and the rows around it are sent.
func TestSink_HugeLineIsDroppedAtOpen(t *testing.T) {
	dir, rc, u, file, lines := closedBacklog(t, 2)
	const hole = 64 << 20
	f, err := os.OpenFile(file, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Row 0, a line of hole NUL bytes (sparse), then row 1.
	if _, err := f.Write(lines[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(lines[0])) + hole); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(append([]byte{'\n'}, lines[1]...), int64(len(lines[0]))+hole); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2, reg, err := openDamaged(t, dir, u)
	if err != nil {
		t.Fatalf("Open with a line of %d bytes in the backlog: %v", hole, err)
	}
	if got := testutil.ToFloat64(mustGather(t, reg, "boxbroker_audit_sink_dropped_total")); got != 1 {
		t.Errorf("boxbroker_audit_sink_dropped_total = %v, want 1", got)
	}
	run(t, s2)
	rows := rc.waitRows(t, 2)
	if len(rows) != 2 || rows[0].Message != "row 0" || rows[1].Message != "row 1" {
		t.Errorf("rows sent %+v, want row 0 and row 1", rows)
	}
}

// closedBacklog appends n rows (row 0, row 1, ...) to a sink that cannot
// send them, closes it, and returns its directory, a receiver for a sink
// opened there again, and the backlog's one file with its lines.
func closedBacklog(t *testing.T, n int) (dir string, rc *receiver, u *url.URL, file string, lines [][]byte) {
	t.Helper()
	dir = t.TempDir()
	rc, u = newReceiver(t, 0)
	s := open(t, dir, u, nil, 0, 100)
	for i := range n {
		if err := s.Append(fmt.Sprintf("k%d", i), entries(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "auditsink", "backlog-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("backlog files %v, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return dir, rc, u, files[0], bytes.SplitAfter(data, []byte{'\n'})
}

// openDamaged opens the sink of dir again, sending to u, with a registry of its
// own; it is closed when the test ends.
func openDamaged(t *testing.T, dir string, u *url.URL) (*auditsink.Sink, *prometheus.Registry, error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := auditsink.Open(auditsink.Config{URL: u, Dir: dir, Batch: 100, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Registerer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, reg, err
}

// TestSink_LineTheBacklogEndsInWithNoNewlineIsCutOff: the last line of
// the backlog with no newline was cut short by a stop mid-write (never
// synced, so never kept): it is cut off the file at open, uncounted,
// however long; a line longer than any row that ends in its newline is
// a damaged line, dropped and counted. The rows before it are sent.
func TestSink_LineTheBacklogEndsInWithNoNewlineIsCutOff(t *testing.T) {
	tests := []struct {
		name    string
		tail    func(row []byte) []byte
		dropped float64
		cut     bool
	}{
		{"a row cut short", func(row []byte) []byte { return row[:len(row)/2] }, 0, true},
		{"a line past the bound cut short", func([]byte) []byte { return bytes.Repeat([]byte{'x'}, 2<<20) }, 0, true},
		{"a line past the bound ended", func([]byte) []byte { return append(bytes.Repeat([]byte{'x'}, 2<<20), '\n') }, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, rc, u, file, lines := closedBacklog(t, 3)
			kept := bytes.Join(lines[:2], nil)
			data := append(bytes.Clone(kept), tt.tail(lines[2])...)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			s2, reg, err := openDamaged(t, dir, u)
			if err != nil {
				t.Fatalf("Open with %s at the backlog's end: %v", tt.name, err)
			}
			if got := testutil.ToFloat64(mustGather(t, reg, "boxbroker_audit_sink_dropped_total")); got != tt.dropped {
				t.Errorf("boxbroker_audit_sink_dropped_total = %v, want %v", got, tt.dropped)
			}
			want := int64(len(data))
			if tt.cut {
				want = int64(len(kept))
			}
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != want {
				t.Errorf("backlog file after open holds %d bytes, want %d", fi.Size(), want)
			}
			run(t, s2)
			rows := rc.waitRows(t, 2)
			if len(rows) != 2 || rows[0].Message != "row 0" || rows[1].Message != "row 1" {
				t.Errorf("rows sent %+v, want row 0 and row 1", rows)
			}
		})
	}
}
