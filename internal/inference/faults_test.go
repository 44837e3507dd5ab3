package inference_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// TestUpstreamFaults turns each way an upstream can fail into the
// documented answer for the box, with no credential in it and no
// goroutine left behind.
func TestUpstreamFaults(t *testing.T) {
	tests := []struct {
		name   string
		up     http.HandlerFunc
		status int
	}{
		{"answers garbage", func(w http.ResponseWriter, r *http.Request) {
			conn, buf, _ := w.(http.Hijacker).Hijack()
			buf.WriteString("this is not HTTP\r\n\r\n")
			buf.Flush()
			conn.Close()
		}, 502},
		{"resets before answering", func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}, 502},
		{"times out", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
		}, 504},
		{"answers 529 overloaded", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		}, 529},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := brokertest.New(t, brokertest.Options{Anthropic: tt.up, Config: func(c *server.Config) {
				c.UpstreamHeaderTimeout = 300 * time.Millisecond
			}})
			token := b.AddBox("a")
			b.SetCredential("anthropic", apiKey)
			b.Report(token, brokertest.Entry("inference", "agent"))
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{}`), nil)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if typ, msg := brokertest.Refusal(resp.Body); typ == "" || msg == "" {
				t.Errorf("not a refusal body: %s", resp.Body)
			}
			var all strings.Builder
			resp.Header.Write(&all)
			all.Write(resp.Body)
			if strings.Contains(all.String(), apiKey) || strings.Contains(all.String(), "127.0.0.1") {
				t.Errorf("answer leaks the credential or the upstream's address: %s", all.String())
			}
		})
	}
}

func TestUpstreamDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.AnthropicURL.Host = addr
	}})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{}`), nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 502 || !strings.Contains(msg, "refused") {
		t.Errorf("got %d %s", resp.StatusCode, resp.Body)
	}
}

// TestStreamResetMidway: the upstream dies mid-stream; the box's stream
// ends (it cannot be turned into a refusal once begun) and no goroutine
// is left behind.
func TestStreamResetMidway(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, brokertest.SSEEvents("m", "x")[0])
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
		req.Header.Set("X-Api-Key", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if line != "event: message_start\n" {
			t.Errorf("first line %q", line)
		}
		io.Copy(io.Discard, resp.Body) // ends, cleanly or with an error, but ends
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Errorf("goroutines: %d before, %d after 20 reset streams", before, n)
	}
}

// TestClientGoneReleasesUpstream: a box that stops reading and
// goes away releases its upstream request.
func TestClientGoneReleasesUpstream(t *testing.T) {
	gone := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				close(gone)
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	token := b.AddBox("a")
	b.SetCredential("anthropic", apiKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	req, _ := http.NewRequest("POST", b.URL+"/llm/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the upstream stream was still open 5 s after the box went away")
	}
}

// TestUpstreamDownNamesEntry: a pool entry whose URL refuses connections
// is named in the log line of the failure (the Anthropic URL's, the
// shared credential's, as "default"), and its key is in no log line.
func TestUpstreamDownNamesEntry(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, tc := range []struct{ name, entry string }{{"entry's URL", "far"}, {"Anthropic URL", pool.Default}} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &upstreamtest.Buffer{}
			b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) {
				if tc.entry == pool.Default {
					c.AnthropicURL, _ = url.Parse(dead)
				}
			}})
			token := b.AddBox("a")
			if tc.entry == pool.Default {
				b.SetCredential(pool.SharedID, apiKey)
			} else {
				sealed, err := b.Server.Keyring.Seal([]byte(apiKey), pool.AD(tc.entry))
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: tc.entry, Weight: 1, URL: dead, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
					t.Fatal(err)
				}
				b.Server.Cache.Drop(store.ChangePool, tc.entry)
			}
			b.Report(token, brokertest.Entry("inference", "agent"))
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{}`), nil)
			if resp.StatusCode != 502 {
				t.Fatalf("got %d %s", resp.StatusCode, resp.Body)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "proxy: upstream failed") {
					line = l
				}
			}
			if !strings.Contains(line, `"entry":"`+tc.entry+`"`) {
				t.Errorf("the failure's log line names no entry %q: %s", tc.entry, line)
			}
			if strings.Contains(logs.String(), apiKey) {
				t.Errorf("the logs hold the entry's key")
			}
		})
	}
}
