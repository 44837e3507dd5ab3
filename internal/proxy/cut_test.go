package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
)

// TestErrorHandler_CutIsTheBoxsRefusal: a forwarder's ErrorHandler
// given the broker's cut logs it at Info as the box's refusal, naming
// its reason, and writes nothing (the broker answers the box); it notes
// no upstream failure in the request's Trace.
func TestErrorHandler_CutIsTheBoxsRefusal(t *testing.T) {
	var logs bytes.Buffer
	h := ErrorHandler(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), "Anthropic API")
	var tr Trace
	r := httptest.NewRequest("POST", "/v1/messages", nil).WithContext(WithTrace(context.Background(), &tr))
	w := httptest.NewRecorder()
	h(w, r, &wrapped{capability.CutBy(capability.ReasonPaused)})
	if w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("the handler wrote %q %v for a cut, want nothing", w.Body, w.Header())
	}
	if tr.Reason() != "" {
		t.Errorf("the trace notes %q for a cut, want nothing", tr.Reason())
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("want one line, got %q", logs.String())
	}
	if line["level"] != "INFO" || line["refusal"] != capability.ReasonPaused || strings.Contains(line["msg"].(string), "failed") {
		t.Errorf("the cut is logged %v, want at INFO as the box's refusal (%s)", line, capability.ReasonPaused)
	}
}

// wrapped wraps an error as a transport might.
type wrapped struct{ err error }

func (w *wrapped) Error() string { return "write error: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestTraced_NotesACutCall: an upstream call whose request body the
// broker cut is noted as cut, with no answer; one that failed of itself
// is not.
func TestTraced_NotesACutCall(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer up.Close()
	c := &http.Client{Transport: Traced(http.DefaultTransport.(*http.Transport).Clone(), time.Now)}
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	req, _ := http.NewRequestWithContext(ctx, "POST", up.URL, io.MultiReader(strings.NewReader("some"), errReader{capability.CutBy(capability.ReasonPaused)}))
	if _, err := c.Do(req); !errors.Is(err, capability.ErrCut) {
		t.Fatalf("the call ended with %v, want the cut", err)
	}
	req, _ = http.NewRequestWithContext(ctx, "POST", up.URL, io.MultiReader(strings.NewReader("some"), errReader{io.ErrUnexpectedEOF}))
	if _, err := c.Do(req); err == nil {
		t.Fatal("the call whose body failed ended whole")
	}
	calls := tr.Calls()
	if len(calls) != 2 || !calls[0].Cut || calls[0].Status != 0 || calls[1].Cut {
		t.Errorf("calls %+v, want the first cut and the second not", calls)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cutWriter is the broker's writer once the box is refused: it writes
// no header and refuses every write with the cut.
type cutWriter struct{ http.ResponseWriter }

func (cutWriter) WriteHeader(int)               {}
func (cutWriter) Write([]byte) (int, error)     { return 0, capability.CutBy(capability.ReasonPaused) }
func (cutWriter) HeaderWritten() bool           { return false }
func (c cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// TestForwarder_CutBeforeTheHeaderIsNoAbort: an answer the broker cuts
// before it wrote the answer's header (HeaderWriter) does not end the
// box's connection: the Forwarder returns, its ErrorHandler given the
// cut, and the box is answered with what the broker writes after.
func TestForwarder_CutBeforeTheHeaderIsNoAbort(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "the upstream's answer")
	}))
	defer up.Close()
	target, _ := url.Parse(up.URL)
	given := make(chan error, 1)
	f := New(func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, http.DefaultTransport,
		func(_ http.ResponseWriter, _ *http.Request, err error) { given <- err })
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.ServeHTTP(cutWriter{w}, r)
		http.Error(w, "refused", http.StatusForbidden)
	}))
	box.Config.ErrorLog = log.New(io.Discard, "", 0) // the aborted handler, without the fix
	defer box.Close()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(box.URL)
	if err != nil {
		t.Fatalf("the box's request: %v; want the broker's 403", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "upstream") {
		t.Errorf("the box got %d %q, want the broker's 403 alone", resp.StatusCode, body)
	}
	select {
	case err := <-given:
		if !errors.Is(err, capability.ErrCut) {
			t.Errorf("the ErrorHandler was given %v, want the cut", err)
		}
	default:
		t.Error("the ErrorHandler was not given the cut")
	}
}
