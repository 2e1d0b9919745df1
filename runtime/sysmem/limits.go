package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// A process may be held to less than the machine's available memory: by
// its cgroup (a container, a systemd unit) or by RLIMIT_AS (ulimit -v). The
// kernel kills or refuses past those, whatever MemAvailable says, so
// readBounds takes the tightest of them all.

// bound is one limit on what this process may still allocate.
type bound struct {
	limit  uint64 // the limit itself (what Info.Total becomes when it is lower)
	avail  uint64 // what is left under it now
	source string // which limit, for messages
}

// unlimited is where a limit stops meaning anything: cgroup v1 writes
// "no limit" as the largest page-aligned int64.
const unlimited = 1 << 62

// tighten lowers i to b where b is tighter.
func (i *Info) tighten(b bound) {
	i.Total = min(i.Total, b.limit)
	if b.avail < i.Available {
		i.Available, i.Source = b.avail, b.source
	}
	i.Available = min(i.Available, i.Total)
}

// readBounds reads /proc/meminfo under root and tightens it by the
// process's cgroup limits (v2 and v1, every ancestor: the kernel applies
// the tightest) and by the address-space limit as (0: none).
func readBounds(root string, as uint64) (Info, error) {
	data, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return Info{}, err
	}
	i, err := parseMeminfo(data)
	if err != nil {
		return Info{}, err
	}
	for _, b := range cgroupBounds(root) {
		i.tighten(b)
	}
	if as > 0 && as < unlimited {
		b := bound{limit: as, avail: as, source: fmt.Sprintf("RLIMIT_AS of %s (ulimit -v)", Size(as))}
		if vm, ok := statusKB(filepath.Join(root, "proc/self/status"), "VmSize:"); ok {
			b.avail = as - min(vm, as)
			b.source = fmt.Sprintf("RLIMIT_AS of %s (ulimit -v; %s of address space in use)", Size(as), Size(vm))
		}
		i.tighten(b)
	}
	return i, nil
}

// mount is a cgroup hierarchy: where it is mounted, and which cgroup path
// its mount shows (not "/" inside some containers).
type mount struct{ point, root string }

// cgroupBounds is the memory limit of the process's cgroup and of each
// ancestor, in the v2 hierarchy and in v1's memory controller. Files it
// cannot read are no limit: a missing memory.max is the root cgroup, or a
// hierarchy without the memory controller.
func cgroupBounds(root string) []bound {
	v2, v1 := cgroupMounts(root)
	v2path, v1path := cgroupPaths(root)
	var out []bound
	if v2 != nil && v2path != "" {
		walk(*v2, v2path, func(dir, cg string) {
			if b, ok := cgroupV2(filepath.Join(root, dir), cg); ok {
				out = append(out, b)
			}
		})
	}
	if v1 != nil && v1path != "" {
		walk(*v1, v1path, func(dir, cg string) {
			if b, ok := cgroupV1(filepath.Join(root, dir), cg); ok {
				out = append(out, b)
			}
		})
	}
	return out
}

// walk calls f with the folder and name of cgroup cg and of each ancestor
// up to the mount's top.
func walk(m mount, cg string, f func(dir, cg string)) {
	rel := "/"
	switch {
	case m.root == "/":
		rel = cg
	case cg == m.root || strings.HasPrefix(cg, m.root+"/"):
		rel = "/" + strings.TrimPrefix(cg, m.root)
	default:
		cg = m.root // outside the mount: only its top can be read
	}
	rel, cg = path.Clean(rel), path.Clean(cg)
	for {
		f(path.Join(m.point, rel), cg)
		if rel == "/" {
			return
		}
		rel, cg = path.Dir(rel), path.Dir(cg)
	}
}

// cgroupV2 reads one v2 cgroup: memory.max, and memory.high (above which
// the kernel throttles and reclaims hard), less what it uses.
func cgroupV2(dir, cg string) (bound, bool) {
	limit, name := uint64(unlimited), ""
	for _, f := range []string{"memory.max", "memory.high"} {
		if v, ok := limitFile(filepath.Join(dir, f)); ok && v < limit {
			limit, name = v, f
		}
	}
	if name == "" {
		return bound{}, false
	}
	used, _ := limitFile(filepath.Join(dir, "memory.current"))
	inactive, _ := statKey(filepath.Join(dir, "memory.stat"), "inactive_file")
	return used2bound(limit, used, inactive, fmt.Sprintf("cgroup v2 %s of %s", name, cg)), true
}

// cgroupV1 reads one v1 memory cgroup: memory.limit_in_bytes less
// memory.usage_in_bytes.
func cgroupV1(dir, cg string) (bound, bool) {
	limit, ok := limitFile(filepath.Join(dir, "memory.limit_in_bytes"))
	if !ok || limit >= unlimited {
		return bound{}, false
	}
	used, _ := limitFile(filepath.Join(dir, "memory.usage_in_bytes"))
	inactive, ok := statKey(filepath.Join(dir, "memory.stat"), "total_inactive_file")
	if !ok {
		inactive, _ = statKey(filepath.Join(dir, "memory.stat"), "inactive_file")
	}
	return used2bound(limit, used, inactive, "cgroup v1 memory.limit_in_bytes of "+cg), true
}

// used2bound is what is left under limit: the usage counts the page
// cache, whose inactive part the kernel reclaims before it kills.
func used2bound(limit, used, inactive uint64, source string) bound {
	used -= min(inactive, used)
	b := bound{limit: limit, avail: limit - min(used, limit), source: source}
	b.source += fmt.Sprintf(" (%s, %s in use)", Size(limit), Size(used))
	return b
}

// limitFile reads a file holding one number of bytes, or "max" (no limit).
func limitFile(name string) (uint64, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return unlimited, true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// statKey reads the value of key from a memory.stat file ("key value" lines).
func statKey(name, key string) (uint64, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// statusKB reads a "Key: N kB" line of /proc/self/status, in bytes.
func statusKB(name, key string) (uint64, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == key && f[2] == "kB" {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v << 10, err == nil
		}
	}
	return 0, false
}

// cgroupPaths reads /proc/self/cgroup: the process's v2 cgroup ("0::PATH")
// and its v1 memory controller's ("N:...memory...:PATH").
func cgroupPaths(root string) (v2, v1 string) {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return "", ""
	}
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case hasOption(f[1], "memory"):
			v1 = f[2]
		}
	}
	return v2, v1
}

// cgroupMounts finds the cgroup2 mount and the v1 memory controller's in
// /proc/self/mountinfo, else the usual places.
func cgroupMounts(root string) (v2, v1 *mount) {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return &mount{"/sys/fs/cgroup", "/"}, &mount{"/sys/fs/cgroup/memory", "/"}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := &mount{point: unescape(f[4]), root: unescape(f[3])}
		switch {
		case g[0] == "cgroup2" && v2 == nil:
			v2 = m
		case g[0] == "cgroup" && v1 == nil && hasOption(g[2], "memory"):
			v1 = m
		}
	}
	return v2, v1
}

func hasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
