package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
)

// TestDurability_KillDuringReports kills -9 a running broker in the middle
// of a burst of declaration reports; after a restart, every report that was
// answered 200 is there (or a later one from the same box).
func TestDurability_KillDuringReports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real broker")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "boxbroker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	const boxes = 8
	tokens := make([]string, boxes)
	for i := range tokens {
		out, err := exec.Command(bin, "box", "add", "--data", data, fmt.Sprintf("box-%d", i)).Output()
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = strings.TrimSpace(string(out))
	}
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0", "--log-level", "error")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("serve printed %q: %v", line, err)
		}
		_, url, _ := strings.Cut(strings.TrimSpace(line), "listening on ")
		return cmd, url
	}
	cmd, url := start()

	var mu sync.Mutex
	acked := make([]int, boxes) // last n answered 200, per box
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < boxes; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 1; ctx.Err() == nil; n++ {
				body := fmt.Sprintf(`{"capabilities":[],"listing":{"title":"n=%d","line":"x"}}`, n)
				req, _ := http.NewRequestWithContext(ctx, "POST", url+"/api/box/declaration", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the broker died
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					acked[i] = n
					mu.Unlock()
				}
			}
		}(i)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cancel()
	wg.Wait()

	cmd, _ = start() // a restart recovers the WAL
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	cfg := server.Config{DataDir: data}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	total := 0
	for i := 0; i < boxes; i++ {
		total += acked[i]
		doc, _, err := st.Declaration(context.Background(), fmt.Sprintf("box-%d", i))
		if acked[i] == 0 {
			continue
		}
		if err != nil {
			t.Errorf("box-%d: acknowledged report %d, store has none: %v", i, acked[i], err)
			continue
		}
		var d struct {
			Listing struct{ Title string } `json:"listing"`
		}
		json.Unmarshal(doc, &d)
		var got int
		fmt.Sscanf(d.Listing.Title, "n=%d", &got)
		if got < acked[i] {
			t.Errorf("box-%d: acknowledged report %d, store has %d", i, acked[i], got)
		}
	}
	if total == 0 {
		t.Fatal("no report was acknowledged before the kill")
	}
	t.Logf("%d reports acknowledged before kill -9; all there after restart", total)
	_ = os.Remove(bin)
}
