package sysmem

import "golang.org/x/sys/unix"

// read takes hw.memsize and, for what is available, the free, speculative,
// purgeable and file-backed (reclaimable) pages: what Activity Monitor
// counts as not in use by apps, wired memory or compression.
func read() (Info, error) {
	total, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return Info{}, err
	}
	page, err := unix.SysctlUint32("hw.pagesize")
	if err != nil {
		return Info{}, err
	}
	var pages uint64
	for _, name := range []string{"vm.page_free_count", "vm.page_speculative_count", "vm.page_purgeable_count", "vm.page_pageable_external_count"} {
		n, err := unix.SysctlUint32(name)
		if err != nil {
			// Older systems lack some counters: half the memory is a
			// guess that neither starves the model nor the machine.
			return Info{Total: total, Available: total / 2, Source: "half of hw.memsize (" + name + " unreadable)"}, nil
		}
		pages += uint64(n)
	}
	return Info{Total: total, Available: min(pages*uint64(page), total), Source: "free, speculative, purgeable and file-backed pages (sysctl vm.*)"}, nil
}
