// The process runtime/backend/mslemu starts for a sanitizer build of the kernels
// (ThreadSanitizer and AddressSanitizer need their runtime in the process
// from its start, so they cannot be loaded into a Go program): it maps the
// model's buffers from the memfds it inherits (fd 3, 4, ...), then runs the
// dispatches it reads on stdin and answers each on stdout. A sanitizer report
// ends the process; runtime/backend/mslemu returns it as the error.
//
// Protocol (native byte order): setup = u32 magic, u32 buffers, then per
// buffer u64 size and u64 offset of its start in the memfd; answered by u32 0. Then per dispatch: the strata_emu_dispatch
// struct whose bufs hold (buffer + 1) << 48 | offset, or kArgsRef for the
// argument struct; u32 argument-struct bytes and the bytes; u32 ranges and
// per range u32 buffer, u64 offset, u64 size: what the dispatch declares it
// reads and writes. The answer is i32 status and, when not 0, the err text.
// With AddressSanitizer every byte of every buffer outside the declared
// ranges is poisoned while the dispatch runs, so a kernel straying outside
// them is reported.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(STRATA_EMU_ASAN)
extern "C" {
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
}
#endif

enum { kMaxSlots = 32, kMaxConsts = 64, kMaxTGMem = 16, kErrBytes = 2048 };
struct strata_emu_dispatch {
  int32_t kernel;
  int32_t nconst;
  uint32_t grid[3];
  uint32_t tg[3];
  int32_t ntgmem;
  uint32_t flags;
  uint64_t bufs[kMaxSlots];
  int32_t const_index[kMaxConsts];
  uint32_t const_value[kMaxConsts];
  uint64_t tgmem[kMaxTGMem][2];
  char err[kErrBytes];
};
extern "C" int strata_emu_dispatch(strata_emu_dispatch *d);

namespace {

const uint32_t kMagic = 0x454d5553; // "SUME"
const uint64_t kArgsRef = ~0ull;

void read_all(void *p, size_t n) {
  char *c = (char *)p;
  while (n > 0) {
    ssize_t r = read(0, c, n);
    if (r <= 0) {
      exit(r == 0 ? 0 : 3); // the parent went away
    }
    c += r;
    n -= (size_t)r;
  }
}

void write_all(const void *p, size_t n) {
  const char *c = (const char *)p;
  while (n > 0) {
    ssize_t r = write(1, c, n);
    if (r <= 0) {
      exit(4);
    }
    c += r;
    n -= (size_t)r;
  }
}

struct Buffer {
  char *base;
  uint64_t size;
};

} // namespace

int main() {
  uint32_t head[2];
  read_all(head, sizeof head);
  if (head[0] != kMagic) {
    fprintf(stderr, "mslemu driver: bad setup message\n");
    return 2;
  }
  const uint32_t nbuf = head[1];
  Buffer *bufs = (Buffer *)calloc(nbuf + 1, sizeof(Buffer));
  for (uint32_t i = 0; i < nbuf; i++) {
    uint64_t skip;
    read_all(&bufs[i].size, 8);
    read_all(&skip, 8);
    if (bufs[i].size == 0) {
      continue;
    }
    void *p = mmap(nullptr, skip + bufs[i].size, PROT_READ | PROT_WRITE, MAP_SHARED, 3 + (int)i, 0);
    if (p == MAP_FAILED) {
      fprintf(stderr, "mslemu driver: cannot map buffer %u (%llu bytes)\n", i, (unsigned long long)bufs[i].size);
      return 2;
    }
    bufs[i].base = (char *)p + skip;
  }
  const uint32_t ok = 0;
  write_all(&ok, 4);

  static struct strata_emu_dispatch d;
  alignas(16) static char args[4096];
  for (;;) {
    read_all(&d, sizeof d);
    uint32_t nargs;
    read_all(&nargs, 4);
    if (nargs > sizeof args) {
      fprintf(stderr, "mslemu driver: argument struct of %u bytes\n", nargs);
      return 2;
    }
    read_all(args, nargs);
    uint32_t nranges;
    read_all(&nranges, 4);
    struct Range {
      uint32_t buf;
      uint64_t off, size;
    };
    Range *ranges = (Range *)calloc(nranges + 1, sizeof(Range));
    for (uint32_t i = 0; i < nranges; i++) {
      read_all(&ranges[i].buf, 4);
      read_all(&ranges[i].off, 8);
      read_all(&ranges[i].size, 8);
    }
    for (int s = 0; s < kMaxSlots; s++) {
      const uint64_t v = d.bufs[s];
      if (v == kArgsRef) {
        d.bufs[s] = (uint64_t)(uintptr_t)args;
      } else if (v != 0) {
        const uint64_t b = (v >> 48) - 1, off = v & ((1ull << 48) - 1);
        d.bufs[s] = b < nbuf ? (uint64_t)(uintptr_t)(bufs[b].base + off) : 0;
      }
    }
#if defined(STRATA_EMU_ASAN)
    for (uint32_t i = 0; i < nbuf; i++) {
      if (bufs[i].size > 0) {
        __asan_poison_memory_region(bufs[i].base, bufs[i].size);
      }
    }
    for (uint32_t i = 0; i < nranges; i++) {
      if (ranges[i].buf < nbuf) {
        __asan_unpoison_memory_region(bufs[ranges[i].buf].base + ranges[i].off, ranges[i].size);
      }
    }
#endif
    const int32_t status = strata_emu_dispatch(&d);
#if defined(STRATA_EMU_ASAN)
    for (uint32_t i = 0; i < nbuf; i++) {
      if (bufs[i].size > 0) {
        __asan_unpoison_memory_region(bufs[i].base, bufs[i].size);
      }
    }
#endif
    free(ranges);
    write_all(&status, 4);
    if (status != 0) {
      write_all(d.err, sizeof d.err);
    }
  }
}
