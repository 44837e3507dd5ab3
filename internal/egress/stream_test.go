package egress_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapPeak samples the heap in use until stop is called, and returns the
// peak growth over the heap at start, in bytes.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var (
		mu   sync.Mutex // guards peak
		peak = base
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak - base
	}
}

// resetPeakRSS resets the kernel's peak RSS of this process (Linux) and
// returns the RSS now, or 0 where it cannot.
func resetPeakRSS() uint64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0
	}
	return procStatus("VmRSS")
}

// procStatus reads a size field of /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// upload posts size bytes to base+path, streamed, and returns what the
// host says it received.
func upload(t testing.TB, base, path string, header http.Header, size int64) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, io.LimitReader(zeros{}, size))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// download gets base+path and returns how many bytes came.
func download(t testing.TB, base, path string, header http.Header) int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	return n
}

const bigBody = 100 << 20

// TestEgress_LargeBodiesStreamWithBoundedMemory sends 100 MiB up and
// 100 MiB down through the broker and checks that the heap never grows by
// anything near the body's size: the broker streams both ways, and the
// answer passes through the Redactor, without holding either.
func TestEgress_LargeBodiesStreamWithBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 400 MiB over loopback")
	}
	e := newEnv(t, nil)
	bearer := http.Header{"Authorization": {"Bearer " + e.token}}
	// The client, the broker and the host share this process's heap; the
	// same transfers straight to the host are the baseline.
	stop := heapPeak()
	if got := upload(t, e.echo.URL, "/base/x?do=upload", nil, bigBody); got != fmt.Sprintf(`{"received":%d}`, bigBody) {
		t.Fatalf("direct upload = %s", got)
	}
	if n := download(t, e.echo.URL, fmt.Sprintf("/base/x?do=download&n=%d", bigBody), nil); n != bigBody {
		t.Fatalf("direct download = %d bytes", n)
	}
	direct := stop()

	rssBefore := resetPeakRSS()
	stop = heapPeak()
	if got := upload(t, e.br.URL, "/egress/ECHO/x?do=upload", bearer, bigBody); got != fmt.Sprintf(`{"received":%d}`, bigBody) {
		t.Fatalf("upload through the broker = %s, want received %d", got, bigBody)
	}
	if n := download(t, e.br.URL, fmt.Sprintf("/egress/ECHO/x?do=download&n=%d", bigBody), bearer); n != bigBody {
		t.Fatalf("download through the broker = %d bytes, want %d", n, bigBody)
	}
	brokered := stop()
	t.Logf("peak heap growth moving 100 MiB up and 100 MiB down: direct %.1f MiB, through the broker %.1f MiB",
		float64(direct)/(1<<20), float64(brokered)/(1<<20))
	if rssBefore > 0 {
		t.Logf("process RSS %.1f MiB before the brokered transfers, peak %.1f MiB during them", float64(rssBefore)/(1<<20), float64(procStatus("VmHWM"))/(1<<20))
	}
	// Holding either body would grow the heap by at least 100 MiB.
	if brokered > 32<<20 {
		t.Errorf("peak heap growth through the broker = %.1f MiB, want under 32 MiB for 100 MiB bodies", float64(brokered)/(1<<20))
	}
	if l := e.logs.String(); !strings.Contains(l, `"status":200`) {
		t.Errorf("no request was logged as 200")
	}
}

// BenchmarkEgress_Stream100MiB moves 100 MiB down and up, straight to the
// host and through the broker, and reports the broker's time and peak
// heap growth as ratios of and next to the direct transfer's.
func BenchmarkEgress_Stream100MiB(b *testing.B) {
	e := newEnv(b, nil)
	bearer := http.Header{"Authorization": {"Bearer " + e.token}}
	var direct, brokered time.Duration
	var heapDirect, heapBrokered uint64
	for b.Loop() {
		stop := heapPeak()
		start := time.Now()
		download(b, e.echo.URL, fmt.Sprintf("/base/x?do=download&n=%d", bigBody), nil)
		upload(b, e.echo.URL, "/base/x?do=upload", nil, bigBody)
		direct += time.Since(start)
		heapDirect = max(heapDirect, stop())

		stop = heapPeak()
		start = time.Now()
		download(b, e.br.URL, fmt.Sprintf("/egress/ECHO/x?do=download&n=%d", bigBody), bearer)
		upload(b, e.br.URL, "/egress/ECHO/x?do=upload", bearer, bigBody)
		brokered += time.Since(start)
		heapBrokered = max(heapBrokered, stop())
	}
	b.ReportMetric(float64(brokered)/float64(direct), "broker/direct-time")
	b.ReportMetric(float64(heapDirect)/(1<<20), "direct-peak-heap-MiB")
	b.ReportMetric(float64(heapBrokered)/(1<<20), "broker-peak-heap-MiB")
}
