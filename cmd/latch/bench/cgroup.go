package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpuBudget is the CPU cap of a process's cgroup: what cluster.sh CPU=...
// gives each member, so that a member's CPU can be read against it.
type cpuBudget struct {
	dir   string  // the group's directory
	cores float64 // quota / period
}

// readCPUBudget finds the CPU budget of process pid under root ("/"
// outside tests) from /proc/PID/cgroup: the cgroup v1 cpu controller's
// cpu.cfs_quota_us / cpu.cfs_period_us, else cgroup v2's cpu.max. Only
// the process's own group counts, not a cap on a parent. ok is false when
// the group sets no cap or cannot be read (another host's process, no
// cgroup file system).
func readCPUBudget(root string, pid int) (b cpuBudget, ok bool) {
	f, err := os.Open(filepath.Join(root, "proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return cpuBudget{}, false
	}
	defer f.Close()
	var v1, v2 string
	haveV1 := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "cpu"):
			v1, haveV1 = filepath.Join(root, "sys/fs/cgroup", parts[1], parts[2]), true
		case parts[0] == "0" && parts[1] == "":
			v2 = filepath.Join(root, "sys/fs/cgroup", parts[2])
		}
	}
	if haveV1 {
		quota, err1 := readInt(filepath.Join(v1, "cpu.cfs_quota_us"))
		period, err2 := readInt(filepath.Join(v1, "cpu.cfs_period_us"))
		if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
			return cpuBudget{}, false
		}
		return cpuBudget{dir: v1, cores: float64(quota) / float64(period)}, true
	}
	if v2 == "" {
		return cpuBudget{}, false
	}
	raw, err := os.ReadFile(filepath.Join(v2, "cpu.max")) // "max 100000" or "25000 100000"
	if err != nil {
		return cpuBudget{}, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 || fields[0] == "max" {
		return cpuBudget{}, false
	}
	quota, err1 := strconv.ParseInt(fields[0], 10, 64)
	period, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return cpuBudget{}, false
	}
	return cpuBudget{dir: v2, cores: float64(quota) / float64(period)}, true
}

// throttling reads the group's cpu.stat: scheduling periods in which the
// group ran, and those in which it used up its budget and was held.
func (b cpuBudget) throttling() (periods, throttled int64, err error) {
	f, err := os.Open(filepath.Join(b.dir, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		var p *int64
		switch k {
		case "nr_periods":
			p = &periods
		case "nr_throttled":
			p = &throttled
		default:
			continue
		}
		if *p, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %v", f.Name(), k, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s: no nr_periods and nr_throttled", f.Name())
	}
	return periods, throttled, nil
}

func readInt(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}
