package sysmem

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tree writes files (path → content) under a temporary root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\nMemAvailable:   12582912 kB\n" // 16 GiB, 12 GiB available
	gib        = 1 << 30
	mib        = 1 << 20
	v2Mounts   = "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	v1Mounts   = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestReadBounds(t *testing.T) {
	for _, c := range []struct {
		name         string
		files        map[string]string
		as           uint64
		total, avail uint64
		source       string // a substring of Info.Source
	}{{
		name: "no limit anywhere",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/user.slice/a.scope\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/user.slice/a.scope/memory.max": "max\n", "sys/fs/cgroup/user.slice/memory.max": "max\n"},
		total: 16 * gib, avail: 12 * gib, source: "MemAvailable",
	}, {
		// The limit is on the parent: the kernel applies the tightest
		// ancestor, and its usage is the parent's, page cache's inactive
		// part reclaimable.
		name: "v2 limit on an ancestor",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/strata-test/job\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/strata-test/job/memory.max":     "max\n",
			"sys/fs/cgroup/strata-test/job/memory.current": "1000\n",
			"sys/fs/cgroup/strata-test/memory.max":         itoa(1500*mib) + "\n",
			"sys/fs/cgroup/strata-test/memory.high":        "max\n",
			"sys/fs/cgroup/strata-test/memory.current":     itoa(300*mib) + "\n",
			"sys/fs/cgroup/strata-test/memory.stat":        "anon 1000\nfile 2000\ninactive_file " + itoa(100*mib) + "\nactive_file 5\n"},
		total: 1500 * mib, avail: 1300 * mib, source: "cgroup v2 memory.max of /strata-test (",
	}, {
		name: "v2 memory.high below memory.max",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/svc\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/svc/memory.max": itoa(4*gib) + "\n", "sys/fs/cgroup/svc/memory.high": itoa(2*gib) + "\n", "sys/fs/cgroup/svc/memory.current": itoa(gib)},
		total: 2 * gib, avail: gib, source: "cgroup v2 memory.high of /svc",
	}, {
		name: "v2 usage over the limit leaves nothing",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/svc\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/svc/memory.max": itoa(gib), "sys/fs/cgroup/svc/memory.current": itoa(2 * gib)},
		total: gib, avail: 0, source: "cgroup v2 memory.max of /svc",
	}, {
		// A container with its own cgroup namespace: /proc/self/cgroup says
		// "/", and the limit is on the mount's top.
		name: "v2 in a container namespace",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/memory.max": itoa(3 * gib), "sys/fs/cgroup/memory.current": itoa(gib)},
		total: 3 * gib, avail: 2 * gib, source: "cgroup v2 memory.max of /",
	}, {
		// cgroup v1 (with a cgroup2 mount that has no memory controller,
		// as hybrid systems have): the memory controller's hierarchy.
		name: "v1 nested",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/mountinfo": v1Mounts,
			"proc/self/cgroup": "9:name=systemd:/\n4:memory:/batch/job7\n1:cpu:/\n0::/\n",
			"sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/batch/job7/memory.usage_in_bytes": "4096\n",
			"sys/fs/cgroup/memory/batch/memory.limit_in_bytes":      itoa(8 * gib),
			"sys/fs/cgroup/memory/batch/memory.usage_in_bytes":      itoa(3 * gib),
			"sys/fs/cgroup/memory/batch/memory.stat":                "cache 5\ninactive_file 7\ntotal_inactive_file " + itoa(gib) + "\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n"},
		total: 8 * gib, avail: 6 * gib, source: "cgroup v1 memory.limit_in_bytes of /batch (",
	}, {
		name: "v1 unlimited",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/mountinfo": v1Mounts,
			"proc/self/cgroup": "4:memory:/process_api/x\n0::/\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/process_api/x/memory.usage_in_bytes": "60485632\n"},
		total: 16 * gib, avail: 12 * gib, source: "MemAvailable",
	}, {
		// Docker without a cgroup namespace: the mount's root is the
		// container's cgroup, which /proc/self/cgroup names in full.
		name: "v1 mount rooted at the container's cgroup",
		files: map[string]string{"proc/meminfo": meminfo16G,
			"proc/self/mountinfo":                        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n",
			"proc/self/cgroup":                           "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": itoa(512 * mib), "sys/fs/cgroup/memory/memory.usage_in_bytes": itoa(12 * mib)},
		total: 512 * mib, avail: 500 * mib, source: "cgroup v1 memory.limit_in_bytes of /docker/abc",
	}, {
		name: "mount point with a space",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/a\n",
			"proc/self/mountinfo":            `25 1 0:23 / /cg\040root rw - cgroup2 cgroup2 rw` + "\n",
			"cg root/a/memory.max":           itoa(gib),
			"cg root/a/memory.current":       "0",
			"sys/fs/cgroup/a/memory.max":     "1",
			"sys/fs/cgroup/a/memory.current": "0"},
		total: gib, avail: gib, source: "cgroup v2 memory.max of /a",
	}, {
		name: "RLIMIT_AS",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": v2Mounts,
			"proc/self/status": "Name:\tstrata\nVmPeak:\t  900000 kB\nVmSize:\t  524288 kB\nVmRSS:\t 1000 kB\n"},
		as: 4 * gib, total: 4 * gib, avail: 4*gib - 512*mib, source: "RLIMIT_AS of 4.29 GB (ulimit -v; 536.9 MB of address space in use)",
	}, {
		name: "the tightest of cgroup and RLIMIT_AS",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/svc\n", "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/svc/memory.max": itoa(2 * gib), "sys/fs/cgroup/svc/memory.current": itoa(gib / 2)},
		as: 4 * gib, total: 2 * gib, avail: 3 * gib / 2, source: "cgroup v2 memory.max of /svc",
	}, {
		// No mountinfo (an unusual /proc): the usual places are read.
		name: "no mountinfo",
		files: map[string]string{"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/svc\n",
			"sys/fs/cgroup/svc/memory.max": itoa(2 * gib), "sys/fs/cgroup/svc/memory.current": "0"},
		total: 2 * gib, avail: 2 * gib, source: "cgroup v2 memory.max of /svc",
	}} {
		t.Run(c.name, func(t *testing.T) {
			i, err := readBounds(tree(t, c.files), c.as)
			if err != nil {
				t.Fatal(err)
			}
			if i.Total != c.total || i.Available != c.avail || !strings.Contains(i.Source, c.source) {
				t.Errorf("got total %d, available %d, source %q; want %d, %d, %q", i.Total, i.Available, i.Source, c.total, c.avail, c.source)
			}
		})
	}
}

func TestReadBoundsNoMeminfo(t *testing.T) {
	if _, err := readBounds(tree(t, map[string]string{"proc/self/cgroup": "0::/\n"}), 0); err == nil || !strings.Contains(err.Error(), "meminfo") {
		t.Errorf("err %v, want one naming meminfo", err)
	}
}
