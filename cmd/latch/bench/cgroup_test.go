package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadCPUBudget: the budget of a process comes from its own group of
// the v1 cpu controller (wherever that is mounted by name) or, without
// one, from cgroup v2's cpu.max; a group without a cap, or one that cannot
// be read, is no budget.
func TestReadCPUBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cgroup string            // /proc/7/cgroup
		files  map[string]string // under sys/fs/cgroup
		ok     bool
		cores  float64
		dir    string // under sys/fs/cgroup
	}{
		{"v1 capped", "2:cpuacct:/\n1:cpu:/latch-1-n1\n0::/\n",
			map[string]string{"cpu/latch-1-n1/cpu.cfs_quota_us": "2500\n", "cpu/latch-1-n1/cpu.cfs_period_us": "10000\n"}, true, 0.25, "cpu/latch-1-n1"},
		{"v1 mounted with cpuacct", "3:cpu,cpuacct:/m/n2\n",
			map[string]string{"cpu,cpuacct/m/n2/cpu.cfs_quota_us": "150000", "cpu,cpuacct/m/n2/cpu.cfs_period_us": "100000"}, true, 1.5, "cpu,cpuacct/m/n2"},
		{"v1 uncapped", "1:cpu:/\n",
			map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, false, 0, ""},
		{"v1 wins over the unified line", "1:cpu:/g\n0::/other\n",
			map[string]string{"cpu/g/cpu.cfs_quota_us": "5000", "cpu/g/cpu.cfs_period_us": "10000", "other/cpu.max": "1000 10000"}, true, 0.5, "cpu/g"},
		{"cpuset is not cpu", "4:cpuset:/g\n", map[string]string{"cpuset/g/cpu.cfs_quota_us": "5000", "cpuset/g/cpu.cfs_period_us": "10000"}, false, 0, ""},
		{"v2 capped", "0::/latch/n3\n", map[string]string{"latch/n3/cpu.max": "25000 100000\n"}, true, 0.25, "latch/n3"},
		{"v2 uncapped", "0::/latch/n3\n", map[string]string{"latch/n3/cpu.max": "max 100000\n"}, false, 0, ""},
		{"v1 group gone", "1:cpu:/gone\n", nil, false, 0, ""},
		{"garbage", "not a cgroup line\n", nil, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, filepath.Join(root, "proc/7/cgroup"), tc.cgroup)
			for name, body := range tc.files {
				writeFile(t, filepath.Join(root, "sys/fs/cgroup", name), body)
			}
			b, ok := readCPUBudget(root, 7)
			if ok != tc.ok || b.cores != tc.cores {
				t.Fatalf("budget %+v, %v; want %v cores, %v", b, ok, tc.cores, tc.ok)
			}
			if ok && b.dir != filepath.Join(root, "sys/fs/cgroup", tc.dir) {
				t.Errorf("group %s, want %s", b.dir, tc.dir)
			}
		})
	}
	if _, ok := readCPUBudget(t.TempDir(), 7); ok {
		t.Error("a process without /proc/PID/cgroup has a budget")
	}
}

func TestThrottling(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cpu.stat"), "nr_periods 1394\nnr_throttled 198\nthrottled_time 778120918\nnr_bursts 0\n")
	periods, throttled, err := cpuBudget{dir: dir}.throttling()
	if err != nil || periods != 1394 || throttled != 198 {
		t.Errorf("throttling = %d, %d, %v; want 1394, 198", periods, throttled, err)
	}
	// v2 names them the same, among usage figures.
	writeFile(t, filepath.Join(dir, "cpu.stat"), "usage_usec 100\nnr_periods 5\nnr_throttled 5\nthrottled_usec 9\n")
	if periods, throttled, err = (cpuBudget{dir: dir}).throttling(); err != nil || periods != 5 || throttled != 5 {
		t.Errorf("v2 throttling = %d, %d, %v; want 5, 5", periods, throttled, err)
	}
	writeFile(t, filepath.Join(dir, "cpu.stat"), "usage_usec 100\n")
	if _, _, err := (cpuBudget{dir: dir}).throttling(); err == nil {
		t.Error("cpu.stat without the counters: no error")
	}
	writeFile(t, filepath.Join(dir, "cpu.stat"), "nr_periods x\nnr_throttled 1\n")
	if _, _, err := (cpuBudget{dir: dir}).throttling(); err == nil {
		t.Error("a bad count: no error")
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
