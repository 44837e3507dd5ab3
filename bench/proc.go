package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat. It is 100 on every Linux this runs on.
const clockTicks = 100

// procs is a proxy's processes: one pid (boxbroker), or nginx's master
// and its workers (found as the master's children when read). Its zero
// value, the direct path's, is no process: it measures 0 and resets
// nothing.
type procs struct {
	pid      int
	children bool // include processes whose parent is pid
}

// pids lists the processes measured.
func (p procs) pids() []int {
	if p.pid == 0 {
		return nil
	}
	out := []int{p.pid}
	if !p.children {
		return out
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == p.pid {
			continue
		}
		if ppid, _, err := statOf(n); err == nil && ppid == p.pid {
			out = append(out, n)
		}
	}
	return out
}

// statOf reads a process's parent and its user+system CPU in seconds.
func statOf(pid int) (ppid int, cpu float64, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// The command name is in parentheses and may hold spaces; fields
	// after it are space separated: state ppid ... utime(14) stime(15).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat of %d: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("stat of %d: %d fields", pid, len(f))
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return ppid, (ut + st) / clockTicks, nil
}

// cpu is the processes' total CPU seconds so far.
func (p procs) cpu() float64 {
	var sum float64
	for _, pid := range p.pids() {
		if _, c, err := statOf(pid); err == nil {
			sum += c
		}
	}
	return sum
}

// statusKB reads a "Key:   N kB" line of /proc/<pid>/status.
func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// rss is the processes' resident memory now, in bytes.
func (p procs) rss() int64 { return p.sum("VmRSS") }

// peak is the processes' peak resident memory since resetPeak, in bytes.
func (p procs) peak() int64 { return p.sum("VmHWM") }

// sum is the processes' status field (a size in kB), in bytes.
func (p procs) sum(field string) int64 {
	var sum int64
	for _, pid := range p.pids() {
		sum += statusKB(pid, field) << 10
	}
	return sum
}

// resetPeak starts a new peak (writing 5 to clear_refs resets VmHWM).
func (p procs) resetPeak() {
	for _, pid := range p.pids() {
		_ = os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
	}
}
