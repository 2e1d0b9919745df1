// The lane emulator of runtime/backend/mslemu: runs one dispatch of a kernel of
// kernels.metal (compiled against emu/metal_stdlib) on the CPU.
//
// Threadgroups run one after another; the threads of a threadgroup run as
// fibers on the calling OS thread. A fiber runs until it reaches a SIMD-group
// function, a barrier or its end, then hands over to the next lane of its
// simdgroup; the last lane to reach a SIMD-group function computes it for
// all and goes on. The scheduler starts simdgroup 0 and lets it run until it
// waits at a threadgroup barrier (or ends), then simdgroup 1, and so on, and
// releases a threadgroup barrier once every thread waits at it. One
// simdgroup therefore always runs ahead of the others up to the next
// barrier, which is the interleaving most likely to expose a missing
// barrier. Threadgroup memory (the kernel's static threadgroup variables) is
// filled with NaN bytes before every threadgroup, so reading what no thread
// wrote shows.
//
// What Metal leaves undefined is an error here: a SIMD-group function that
// the live lanes of a simdgroup do not all reach together (divergence), a
// barrier some thread never reaches, a threadgroup barrier after a thread
// returned. Reading a lane that has returned (shuffle, broadcast) gives NaN
// (or 0xdeadbeef).
//
// Built with STRATA_EMU_TSAN (the kernels compiled with -fsanitize=thread),
// each thread is a ThreadSanitizer fiber switched without synchronization;
// barriers are release/acquire pairs, so a missing barrier is a reported race.
// Threadgroups are ordered one after the other for it (their threadgroup
// memory is the same static storage), so it finds races inside a threadgroup,
// not between threadgroups.
// With STRATA_EMU_ASAN, stack switches are announced to AddressSanitizer.
//
// Plain C++ and libc only (no C++ runtime library to link).

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(STRATA_EMU_TSAN)
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
}
#endif
#if defined(STRATA_EMU_ASAN)
extern "C" {
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
void *__asan_region_is_poisoned(void *beg, size_t size);
}
#endif

// The generated harness (kernels.metal plus the per-kernel calls).
struct strata_emu_ids {
  uint32_t tgpig[4];
  uint32_t tid, ntg, lane, sg, nsg;
};
extern "C" void __strata_emu_call(int kernel, void *const *bufs, const strata_emu_ids *ids);
extern "C" void __strata_emu_constants(int kernel, int n, const int32_t *index, const uint32_t *value);

// One dispatch, as runtime/backend/mslemu lays it out (cDispatch in emu.go).
enum { kMaxSlots = 32, kMaxConsts = 64, kMaxTGMem = 16, kErrBytes = 2048 };
struct strata_emu_dispatch {
  int32_t kernel;
  int32_t nconst;
  uint32_t grid[3];
  uint32_t tg[3];
  int32_t ntgmem;
  uint32_t flags; // reserved
  uint64_t bufs[kMaxSlots];
  int32_t const_index[kMaxConsts];
  uint32_t const_value[kMaxConsts];
  uint64_t tgmem[kMaxTGMem][2]; // offset from strata_emu_anchor, bytes
  char err[kErrBytes];
};

// Threadgroup variables are found from outside (runtime/backend/mslemu reads the
// symbol table) relative to this symbol.
extern "C" __attribute__((visibility("hidden"), used)) char strata_emu_anchor[16];
char strata_emu_anchor[16];

namespace {

const int kSimd = 32;
const int kMaxThreads = 1024;
const size_t kStackBytes =
#if defined(STRATA_EMU_TSAN) || defined(STRATA_EMU_ASAN)
    512 * 1024;
#else
    128 * 1024;
#endif

// ---- Context switch: saves the callee-saved registers on the current stack,
// stores its pointer in *save and resumes the stack at load. The floating-
// point control state is shared: no kernel changes it.
extern "C" void strata_emu_swap(void **save, void *load);
extern "C" void strata_emu_start(void);

#if defined(__x86_64__)
asm(R"(
.text
.p2align 4
.hidden strata_emu_swap
.globl strata_emu_swap
.type strata_emu_swap,@function
strata_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size strata_emu_swap,.-strata_emu_swap
.p2align 4
.hidden strata_emu_start
.globl strata_emu_start
.type strata_emu_start,@function
strata_emu_start:
  movq %r12, %rdi
  callq *%r13
  ud2
.size strata_emu_start,.-strata_emu_start
)");

// A fresh stack whose first swap lands in strata_emu_start, calling fn(arg).
void *initial_stack(char *top, void (*fn)(void *), void *arg) {
  uint64_t *sp = (uint64_t *)((uintptr_t)top & ~(uintptr_t)15);
  *--sp = (uint64_t)&strata_emu_start;   // ret: lands 16-aligned, as a call needs
  *--sp = 0;                              // rbp
  *--sp = 0;                              // rbx
  *--sp = (uint64_t)arg;                  // r12
  *--sp = (uint64_t)fn;                   // r13
  *--sp = 0;                              // r14
  *--sp = 0;                              // r15
  return sp;
}
#elif defined(__aarch64__)
asm(R"(
.text
.p2align 4
.hidden strata_emu_swap
.globl strata_emu_swap
strata_emu_swap:
  sub sp, sp, #160
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #160
  ret
.p2align 4
.hidden strata_emu_start
.globl strata_emu_start
strata_emu_start:
  mov x0, x19
  blr x20
  brk #0
)");

void *initial_stack(char *top, void (*fn)(void *), void *arg) {
  uint64_t *sp = (uint64_t *)((uintptr_t)top & ~(uintptr_t)15);
  sp -= 20;
  memset(sp, 0, 160);
  sp[0] = (uint64_t)arg;                // x19
  sp[1] = (uint64_t)fn;                 // x20
  sp[11] = (uint64_t)&strata_emu_start; // x30
  return sp;
}
#else
#error "the lane emulator switches stacks on x86-64 and arm64 only"
#endif

enum State { kReady, kAtSimd, kAtBarrier, kDone };

// simdgroup_multiply_accumulate's operation code (after emu/metal_stdlib's
// __strata_simd_op codes).
const int kOpMMA = 13;

struct Lane {
  void *sp;  // saved stack pointer while switched out
  int state;
  int scope; // of the barrier waited at: 0 threadgroup, 1 simdgroup
  int op, type;
  uint32_t arg;
  uint32_t value; // a SIMD-group function's operand, then its result
  float mat[6];     // simdgroup_multiply_accumulate: the lane's elements of A, B and C
  float mat_out[2]; // and of D
  strata_emu_ids ids;
  char *stack;
#if defined(STRATA_EMU_TSAN)
  void *fiber;
#endif
};

// What the lanes of one simdgroup are doing.
struct Group {
  int n;          // lanes
  int live;       // lanes not done
  int ready;      // lanes that can run
  int at_simd;    // at a SIMD-group function
  int at_sg;      // at a simdgroup barrier
  int at_tg;      // at a threadgroup barrier
};

const char *op_name(int op) {
  static const char *names[] = {"?", "simd_sum", "simd_max", "simd_min", "simd_prefix_exclusive_sum",
                                "simd_prefix_inclusive_sum", "simd_shuffle_xor", "simd_shuffle_down", "simd_shuffle",
                                "simd_broadcast", "simd_broadcast_first", "simd_any", "simd_all",
                                "simdgroup_multiply_accumulate"};
  return op >= 1 && op <= kOpMMA ? names[op] : "?";
}

struct Emu {
  Lane lanes[kMaxThreads];
  Group groups[kMaxThreads / kSimd];
  char *stacks;
  void *sched_sp;
  Lane *current; // the running lane, nullptr in the scheduler
  int kernel;
  void *bufs[kMaxSlots];
  uint32_t ntg, nsg;
  bool exited; // a thread of the threadgroup has returned
  bool failed;
  char *err;
#if defined(STRATA_EMU_TSAN)
  void *sched_fiber;
  // Sync objects: a threadgroup's start and end; its barriers (0: the
  // threadgroup's, 1 + s: simdgroup s's).
  char sync_start, sync_end, sync_barrier[kMaxThreads / kSimd + 1];
#endif
} emu;

void fail(const char *format, ...) {
  if (emu.failed) {
    return;
  }
  emu.failed = true;
  va_list ap;
  va_start(ap, format);
  vsnprintf(emu.err, kErrBytes, format, ap);
  va_end(ap);
}

// transfer is the only stack switch: from the running context (a lane, or
// the scheduler when from is nullptr) to lane to (the scheduler when nullptr).
// A finished lane (from->state == kDone) is never resumed.
void transfer(Lane *from, Lane *to) {
  void **save = from != nullptr ? &from->sp : &emu.sched_sp;
  void *load = to != nullptr ? to->sp : emu.sched_sp;
  emu.current = to;
#if defined(STRATA_EMU_TSAN)
  __tsan_switch_to_fiber(to != nullptr ? to->fiber : emu.sched_fiber, 1);
#endif
#if defined(STRATA_EMU_ASAN)
  void *fake = nullptr;
  const bool finished = from != nullptr && from->state == kDone;
  __sanitizer_start_switch_fiber(finished ? nullptr : &fake, to != nullptr ? to->stack : nullptr, to != nullptr ? kStackBytes : 0);
#endif
  strata_emu_swap(save, load);
#if defined(STRATA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

// ---- SIMD-group functions, computed once every live lane has arrived.

float f32(uint32_t v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
uint32_t bits(float f) {
  uint32_t v;
  memcpy(&v, &f, 4);
  return v;
}

const uint32_t kPoisonF32 = 0x7fc00bad; // a quiet NaN
const uint32_t kPoisonInt = 0xdeadbeef;

uint32_t add(int type, uint32_t a, uint32_t b) {
  switch (type) {
  case 1:
    return bits(f32(a) + f32(b));
  default:
    return a + b; // int and uint wrap alike
  }
}

uint32_t pick(int type, int op, uint32_t a, uint32_t b) {
  bool take_b;
  switch (type) {
  case 1:
    return bits(op == 2 ? fmaxf(f32(a), f32(b)) : fminf(f32(a), f32(b)));
  case 2:
    take_b = op == 2 ? (int32_t)b > (int32_t)a : (int32_t)b < (int32_t)a;
    break;
  default:
    take_b = op == 2 ? b > a : b < a;
  }
  return take_b ? b : a;
}

// Completes simdgroup_multiply_accumulate, which every lane of simdgroup s
// waits at: D = A·B + C over the 8×8 matrices the lanes hold two elements
// each of (lane l: elements 2l, 2l + 1, row major; emu/metal_stdlib), in
// float, the products added to C in k order.
void complete_mma(int s) {
  Lane *first = &emu.lanes[s * kSimd];
  Group *g = &emu.groups[s];
  if (g->n != kSimd || g->at_simd != kSimd) {
    fail("threadgroup (%u,%u,%u), simdgroup %u: simdgroup_multiply_accumulate with %d of %d lanes: a simdgroup matrix needs every lane of a full simdgroup",
         first->ids.tgpig[0], first->ids.tgpig[1], first->ids.tgpig[2], (unsigned)s, g->at_simd, kSimd);
    return;
  }
  float a[64], b[64], c[64];
  for (int l = 0; l < kSimd; l++) {
    for (int h = 0; h < 2; h++) {
      a[2 * l + h] = first[l].mat[h];
      b[2 * l + h] = first[l].mat[2 + h];
      c[2 * l + h] = first[l].mat[4 + h];
    }
  }
  for (int e = 0; e < 64; e++) {
    const int i = e / 8, j = e % 8;
    float d = c[e];
    for (int k = 0; k < 8; k++) {
      const float p = a[i * 8 + k] * b[k * 8 + j];
      d = d + p;
    }
    first[e / 2].mat_out[e % 2] = d;
  }
  for (int l = 0; l < kSimd; l++) {
    first[l].state = kReady;
  }
  g->ready += g->at_simd;
  g->at_simd = 0;
}

// Runs the SIMD-group function every live lane of simdgroup s waits at; the
// lanes become ready with their results.
void complete_simd(int s) {
  Lane *first = &emu.lanes[s * kSimd];
  Group *g = &emu.groups[s];
  const int n = g->n;
  Lane *ref = nullptr;
  for (int i = 0; i < n; i++) {
    Lane *l = &first[i];
    if (l->state != kAtSimd) {
      continue;
    }
    if (ref == nullptr) {
      ref = l;
    } else if (l->op != ref->op || l->type != ref->type) {
      fail("threadgroup (%u,%u,%u), simdgroup %u: lane %u is at %s and lane %u at %s: SIMD-group functions must be reached by every live lane of the simdgroup together",
           ref->ids.tgpig[0], ref->ids.tgpig[1], ref->ids.tgpig[2], ref->ids.sg, ref->ids.lane, op_name(ref->op),
           l->ids.lane, op_name(l->op));
      return;
    }
  }
  const int op = ref->op, type = ref->type;
  if (op == kOpMMA) {
    complete_mma(s);
    return;
  }
  uint32_t in[kSimd];
  bool live[kSimd];
  for (int i = 0; i < kSimd; i++) {
    live[i] = i < n && first[i].state == kAtSimd;
    in[i] = live[i] ? first[i].value : 0;
  }
  const uint32_t poison = type == 1 ? kPoisonF32 : kPoisonInt;
  uint32_t total = 0, running = 0;
  bool any = false, all = true, have = false;
  int first_live = -1;
  for (int i = 0; i < n; i++) {
    if (!live[i]) {
      continue;
    }
    if (first_live < 0) {
      first_live = i;
    }
    switch (op) {
    case 1:
      total = have ? add(type, total, in[i]) : in[i];
      break;
    case 2:
    case 3:
      total = have ? pick(type, op, total, in[i]) : in[i];
      break;
    case 11:
      any = any || in[i] != 0;
      break;
    case 12:
      all = all && in[i] != 0;
      break;
    }
    have = true;
  }
  for (int i = 0; i < n; i++) {
    if (!live[i]) {
      continue;
    }
    Lane *l = &first[i];
    uint32_t out = 0;
    switch (op) {
    case 1:
    case 2:
    case 3:
      out = total;
      break;
    case 4: // exclusive prefix sum over the live lanes below
      out = running;
      running = add(type, running, in[i]);
      break;
    case 5:
      running = i == first_live ? in[i] : add(type, running, in[i]);
      out = running;
      break;
    case 6: {
      const uint32_t src = (uint32_t)i ^ l->arg;
      out = src < (uint32_t)kSimd && live[src] ? in[src] : poison;
      break;
    }
    case 7: { // the upper lanes keep their own value
      const uint32_t src = (uint32_t)i + l->arg;
      out = src >= (uint32_t)n ? in[i] : (live[src] ? in[src] : poison);
      break;
    }
    case 8:
    case 9:
      out = l->arg < (uint32_t)kSimd && live[l->arg] ? in[l->arg] : poison;
      break;
    case 10:
      out = in[first_live];
      break;
    case 11:
      out = any;
      break;
    case 12:
      out = all;
      break;
    default:
      fail("unknown SIMD-group operation %d", op);
      return;
    }
    l->value = out;
    l->state = kReady;
  }
  g->ready += g->at_simd;
  g->at_simd = 0;
}

// Releases simdgroup s's lanes from its simdgroup barrier.
void release_sg(int s) {
  Lane *first = &emu.lanes[s * kSimd];
  Group *g = &emu.groups[s];
  for (int i = 0; i < g->n; i++) {
    if (first[i].state == kAtBarrier) {
      first[i].state = kReady;
    }
  }
  g->ready += g->at_sg;
  g->at_sg = 0;
}

// Called by the running lane l after it stopped (waits or has finished):
// runs the next lane of its simdgroup that can run, completing a
// SIMD-group function or simdgroup barrier once every live lane is at it; l
// continues itself when it can (it returns then), else, when the simdgroup
// cannot go on by itself, the scheduler takes over.
void yield(Lane *l) {
  const int s = (int)l->ids.sg;
  Group *g = &emu.groups[s];
  for (;;) {
    if (l->state == kReady) {
      g->ready--;
      return;
    }
    if (g->ready == 0 && g->live > 0 && !emu.failed) {
      if (g->at_simd == g->live) {
        complete_simd(s);
        continue;
      }
      if (g->at_sg == g->live) {
        release_sg(s);
        continue;
      }
    }
    break;
  }
  Lane *next = nullptr;
  if (g->ready > 0 && !emu.failed) {
    Lane *first = &emu.lanes[s * kSimd];
    for (int i = 1; i <= g->n; i++) { // after l, in lane order
      Lane *c = &first[((int)l->ids.lane + i) % g->n];
      if (c->state == kReady) {
        next = c;
        break;
      }
    }
    g->ready--;
  }
  transfer(l, next);
}

void lane_main(void *arg) {
  Lane *l = (Lane *)arg;
#if defined(STRATA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
#if defined(STRATA_EMU_TSAN)
  __tsan_acquire(&emu.sync_start);
#endif
  __strata_emu_call(emu.kernel, emu.bufs, &l->ids);
#if defined(STRATA_EMU_TSAN)
  __tsan_release(&emu.sync_end);
#endif
  l->state = kDone;
  emu.groups[l->ids.sg].live--;
  emu.exited = true;
  yield(l);
  abort(); // a finished lane is never resumed
}

// ---- The threadgroup scheduler.

// Lets every fiber of the threadgroup run until all have finished. A
// simdgroup runs by itself (its lanes hand over to each other) until it
// waits at a threadgroup barrier, finishes, or is stuck; simdgroup 0 goes
// first, then 1, …; then a threadgroup barrier every thread waits at is
// released, and so on.
void run_threadgroup() {
  const uint32_t ntg = emu.ntg, nsg = emu.nsg;
  for (uint32_t t = 0; t < ntg; t++) {
    Lane *l = &emu.lanes[t];
    l->state = kReady;
    l->sp = initial_stack(l->stack + kStackBytes, lane_main, l);
  }
  for (uint32_t s = 0; s < nsg; s++) {
    Group *g = &emu.groups[s];
    g->n = (int)(s + 1 < nsg ? kSimd : ntg - s * kSimd);
    g->live = g->ready = g->n;
    g->at_simd = g->at_sg = g->at_tg = 0;
  }
  emu.exited = false;
  for (;;) {
    bool progress = false;
    for (uint32_t s = 0; s < nsg && !emu.failed; s++) {
      Group *g = &emu.groups[s];
      if (g->ready == 0) {
        continue;
      }
      Lane *first = &emu.lanes[s * kSimd];
      int i = 0;
      while (first[i].state != kReady) {
        i++;
      }
      g->ready--;
      transfer(nullptr, &first[i]);
      progress = true;
    }
    if (emu.failed) {
      return;
    }
    // Every simdgroup is done, at a threadgroup barrier, or stuck.
    int live = 0, at_tg = 0;
    for (uint32_t s = 0; s < nsg; s++) {
      live += emu.groups[s].live;
      at_tg += emu.groups[s].at_tg;
    }
    if (live == 0) {
      return;
    }
    if (at_tg == live) {
      if (emu.exited) {
        for (uint32_t t = 0; t < ntg; t++) {
          if (emu.lanes[t].state == kDone) {
            fail("threadgroup (%u,%u,%u): thread %u returned before a threadgroup_barrier the others wait at (every thread of the threadgroup must reach it)",
                 emu.lanes[0].ids.tgpig[0], emu.lanes[0].ids.tgpig[1], emu.lanes[0].ids.tgpig[2], t);
            return;
          }
        }
      }
      for (uint32_t t = 0; t < ntg; t++) {
        if (emu.lanes[t].state == kAtBarrier) {
          emu.lanes[t].state = kReady;
        }
      }
      for (uint32_t s = 0; s < nsg; s++) {
        emu.groups[s].ready += emu.groups[s].at_tg;
        emu.groups[s].at_tg = 0;
      }
      continue;
    }
    for (uint32_t s = 0; s < nsg; s++) {
      const Group &g = emu.groups[s];
      if (g.at_simd == 0) {
        continue;
      }
      const Lane *first = &emu.lanes[s * kSimd];
      const Lane *waiting = first;
      while (waiting->state != kAtSimd) {
        waiting++;
      }
      for (int i = 0; i < g.n; i++) {
        if (first[i].state == kAtBarrier) {
          fail("threadgroup (%u,%u,%u), simdgroup %u: lane %u waits at %s while lane %d waits at a %s barrier: SIMD-group functions must be reached by every live lane of the simdgroup together",
               first[i].ids.tgpig[0], first[i].ids.tgpig[1], first[i].ids.tgpig[2], s, waiting->ids.lane,
               op_name(waiting->op), i, first[i].scope == 0 ? "threadgroup" : "simdgroup");
          return;
        }
      }
    }
    if (!progress) {
      for (uint32_t t = 0; t < ntg; t++) {
        const Lane &l = emu.lanes[t];
        if (l.state == kAtBarrier) {
          fail("threadgroup (%u,%u,%u): thread %u waits at a %s barrier that other threads never reach",
               l.ids.tgpig[0], l.ids.tgpig[1], l.ids.tgpig[2], t, l.scope == 0 ? "threadgroup" : "simdgroup");
          return;
        }
      }
      fail("threadgroup (%u,%u,%u): no thread can proceed", emu.lanes[0].ids.tgpig[0], emu.lanes[0].ids.tgpig[1],
           emu.lanes[0].ids.tgpig[2]);
      return;
    }
  }
}

bool setup() {
  if (emu.stacks != nullptr) {
    return true;
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t each = kStackBytes + page; // a guard page below each stack
  const int n = kMaxThreads;
  char *mem = (char *)mmap(nullptr, each * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    return false;
  }
  for (int i = 0; i < n; i++) {
    char *base = mem + (size_t)i * each;
    mprotect(base, page, PROT_NONE);
    emu.lanes[i].stack = base + page;
  }
  emu.stacks = mem;
  return true;
}

} // namespace

// strata_emu_dispatch runs one dispatch; 0 when it ran, else d->err says why.
extern "C" __attribute__((visibility("default"))) int strata_emu_dispatch(strata_emu_dispatch *d) {
  emu.failed = false;
  emu.err = d->err;
  d->err[0] = 0;
  if (!setup()) {
    fail("cannot map fiber stacks");
    return 1;
  }
  const uint32_t ntg = d->tg[0] * d->tg[1] * d->tg[2];
  if (ntg == 0 || ntg > (uint32_t)kMaxThreads || d->nconst > kMaxConsts || d->ntgmem > kMaxTGMem) {
    fail("threadgroup of %u threads (1..%d), %d constants, %d threadgroup variables", ntg, kMaxThreads, d->nconst, d->ntgmem);
    return 1;
  }
  emu.kernel = d->kernel;
  emu.ntg = ntg;
  emu.nsg = (ntg + kSimd - 1) / kSimd;
  for (int i = 0; i < kMaxSlots; i++) {
    emu.bufs[i] = (void *)(uintptr_t)d->bufs[i];
  }
  __strata_emu_constants(d->kernel, d->nconst, d->const_index, d->const_value);
  char *anchor = strata_emu_anchor;
#if defined(STRATA_EMU_TSAN)
  emu.sched_fiber = __tsan_get_current_fiber();
  for (uint32_t t = 0; t < ntg; t++) {
    if (emu.lanes[t].fiber == nullptr) {
      emu.lanes[t].fiber = __tsan_create_fiber(0);
    }
  }
#endif
  for (uint32_t t = 0; t < ntg; t++) {
    Lane *l = &emu.lanes[t];
    l->ids.tid = t;
    l->ids.ntg = ntg;
    l->ids.lane = t % kSimd;
    l->ids.sg = t / kSimd;
    l->ids.nsg = emu.nsg;
  }
  for (uint32_t z = 0; z < d->grid[2]; z++) {
    for (uint32_t y = 0; y < d->grid[1]; y++) {
      for (uint32_t x = 0; x < d->grid[0]; x++) {
        for (int i = 0; i < d->ntgmem; i++) {
          char *p = anchor + (intptr_t)d->tgmem[i][0];
          size_t n = d->tgmem[i][1];
#if defined(STRATA_EMU_ASAN)
          // The symbol's size includes the redzone after the variable.
          if (char *end = (char *)__asan_region_is_poisoned(p, n)) {
            n = (size_t)(end - p);
          }
#endif
          memset(p, 0xff, n); // NaN floats, 0xffffffff integers
        }
#if defined(STRATA_EMU_TSAN)
        __tsan_release(&emu.sync_start);
#endif
        for (uint32_t t = 0; t < ntg; t++) {
          emu.lanes[t].ids.tgpig[0] = x;
          emu.lanes[t].ids.tgpig[1] = y;
          emu.lanes[t].ids.tgpig[2] = z;
        }
        run_threadgroup();
#if defined(STRATA_EMU_TSAN)
        __tsan_acquire(&emu.sync_end);
#endif
        if (emu.failed) {
          return 1;
        }
      }
    }
  }
  return 0;
}

// strata_emu_abi is the layout version of strata_emu_dispatch.
extern "C" __attribute__((visibility("default"))) int strata_emu_abi(void) { return 1; }

// ---- Half conversions. clang 14 lowers half <-> float on x86-64 to these
// compiler-rt calls, which libgcc lacks; IEEE binary16, round to nearest even.

extern "C" __attribute__((visibility("hidden"))) float __gnu_h2f_ieee(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13; // inf, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | (exp + 112) << 23 | mant << 13;
  } else if (mant == 0) {
    bits = sign;
  } else { // subnormal: normalize
    int e = -1;
    uint32_t m = mant;
    do {
      e++;
      m <<= 1;
    } while ((m & 0x400) == 0);
    bits = sign | (uint32_t)(112 - e) << 23 | (m & 0x3ff) << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

extern "C" __attribute__((visibility("hidden"))) uint16_t __gnu_f2h_ieee(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  const uint32_t exp = (x >> 23) & 0xff;
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) {
    return sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0); // NaN stays NaN
  }
  const int e = (int)exp - 127 + 15;
  if (e >= 0x1f) {
    return sign | 0x7c00;
  }
  if (e <= 0) { // subnormal or zero: shift the implicit bit in, round
    if (e < -10) {
      return sign;
    }
    mant |= 0x800000;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) {
      h++;
    }
    return sign | (uint16_t)h;
  }
  uint32_t h = (uint32_t)e << 10 | mant >> 13;
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) {
    h++; // may carry into the exponent, up to infinity: correct
  }
  return sign | (uint16_t)h;
}

// ---- Called by the kernels (through emu/metal_stdlib).

extern "C" void __strata_emu_simd(int op, int type, void *value, unsigned arg) {
  Lane *l = emu.current;
  l->op = op;
  l->type = type;
  l->arg = arg;
  memcpy(&l->value, value, 4);
  l->state = kAtSimd;
  emu.groups[l->ids.sg].at_simd++;
  yield(l);
  memcpy(value, &l->value, 4);
}

extern "C" unsigned __strata_emu_lane(void) { return emu.current->ids.lane; }

extern "C" void __strata_emu_mma(float *d, const float *a, const float *b, const float *c) {
  Lane *l = emu.current;
  l->op = kOpMMA;
  l->type = 1;
  l->arg = 0;
  memcpy(l->mat, a, 2 * sizeof(float));
  memcpy(l->mat + 2, b, 2 * sizeof(float));
  memcpy(l->mat + 4, c, 2 * sizeof(float));
  l->state = kAtSimd;
  emu.groups[l->ids.sg].at_simd++;
  yield(l);
  memcpy(d, l->mat_out, 2 * sizeof(float));
}

extern "C" void __strata_emu_barrier(int scope) {
  Lane *l = emu.current;
#if defined(STRATA_EMU_TSAN)
  void *sync = &emu.sync_barrier[scope == 0 ? 0 : 1 + l->ids.sg];
  __tsan_release(sync);
#endif
  l->scope = scope;
  l->state = kAtBarrier;
  Group *g = &emu.groups[l->ids.sg];
  if (scope == 0) {
    g->at_tg++;
  } else {
    g->at_sg++;
  }
  yield(l);
#if defined(STRATA_EMU_TSAN)
  __tsan_acquire(sync);
#endif
}
