#!/usr/bin/env python3
"""Writes work.h for pingpong.c's WITH_WORK build: two ways to run the same number of
simple instructions per message, to tell what the size of the code a round trip runs costs
apart from its instruction count (PROFILE.md, 2026-11-28).

- `bloat(x, n)`: the last n of 8,000 distinct straight-line steps (one `add`, `sub` or `xor`
  of an immediate on one of four registers, 7 bytes each): n instructions in n * 7 bytes of
  code, each run once per message.
- `loop(x, n)`: n / 4 turns of a loop doing the same four kinds of step from a 64-entry table:
  about 3.5 n instructions in about 100 bytes of code.

    python3 gen_work.py > work.h && gcc -O2 -DWITH_WORK -o /tmp/pingpong pingpong.c
"""
import random

STEPS = 8000
rng = random.Random(1)
out = ["#include <stdint.h>", '#define KEEP(v) __asm__ volatile("" : "+r"(v))']
out.append("__attribute__((noinline)) static uint64_t bloat(uint64_t x, int steps) {")
out.append("    uint64_t a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3;")
out.append("    switch (steps) {")
for i in range(STEPS):
    op = rng.choice(["^=", "+=", "-="])
    out.append(f"    case {STEPS - i}: a{i % 4} {op} {rng.getrandbits(30)}; KEEP(a{i % 4});")
out.append("    default: break;")
out.append("    }")
out.append("    return a0 ^ a1 ^ a2 ^ a3;")
out.append("}")
out.append("static uint64_t K[64];")
out.append("static void init_k(void) {")
out.append("    for (int i = 0; i < 64; i++) K[i] = (0x9E3779B97F4A7C15ULL * (i + 1)) >> 34;")
out.append("}")
out.append("__attribute__((noinline)) static uint64_t loop(uint64_t x, int steps) {")
out.append("    uint64_t a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3;")
out.append("    for (int i = 0; i + 4 <= steps; i += 4) {")
out.append("        a0 ^= K[i & 63]; a1 += K[(i + 1) & 63]; a2 -= K[(i + 2) & 63]; a3 ^= K[(i + 3) & 63];")
out.append("        KEEP(a0); KEEP(a1); KEEP(a2); KEEP(a3);")
out.append("    }")
out.append("    return a0 ^ a1 ^ a2 ^ a3;")
out.append("}")
print("\n".join(out))
