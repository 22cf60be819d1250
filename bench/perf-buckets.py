#!/usr/bin/env python3
"""Where a server's CPU goes, by part: reads a `perf record` file and sums its flat profile
(`perf report --no-children --sort dso,sym`) into buckets (kernel TCP/IP, scheduling, hyper and
tokio, the OpenRTB reader, the engine, malloc, ...), in % of the samples.

    bench/perf-buckets.py perf.data

Multiply a bucket by the CPU per request (the server's ticks over the run / requests) for its
microseconds per request (docs/benchmarks.md, "Hot-path limits"). The buckets go by symbol
name, so they are approximate: a symbol matching no rule lands in "other".
"""

import collections
import re
import subprocess
import sys

KERNEL = [
    ("kernel: TCP/IP and sockets",
     r"tcp|skb|inet|ip_|sock|net_|__dev|dev_|napi|softirq|bbr|_copy_(to|from)_iter|datagram|rx_|tx"),
    ("kernel: scheduling and wake-ups",
     r"raw_spin|wake|sched|task_switch|schedule|pick_next|enqueue|dequeue|update_curr|futex|switch_"),
    ("kernel: epoll", r"ep_|epoll"),
    ("kernel: syscall entry and fd", r"syscall|fdget|entry_|vfs_|rw_verify|fput|__x64|sys_"),
    ("kernel: block and file system (event log)",
     r"ext4|jbd2|blk|bio|iowrite|virtqueue|filemap|folio|page|writeback|iomap"),
]

USER = [
    ("hyper and http", r"^hyper|hyper::|h1::|http::|httparse"),
    ("tokio runtime", r"tokio|mio"),
    ("serde_json (derived readers)", r"serde_json|serde_core|serde::"),
    ("OpenRTB request reader", r"marquee_openrtb::(request|fast)"),
    ("OpenRTB response write and read", r"marquee_openrtb::(response|json)"),
    ("OpenRTB checks", r"marquee_openrtb::validate"),
    ("engine (index, selection)", r"marquee_engine"),
    ("signing (HMAC-SHA256, base64)", r"sha2|hmac|base64|siphash|tracking"),
    ("gateway", r"marquee_gateway"),
    ("edge", r"marquee_edge"),
    ("event log", r"eventlog|crc32"),
    ("drops, Vec and String", r"drop_in_place|alloc::|core::|<alloc"),
]


def bucket(dso, kind, sym):
    if kind == "k":
        return next((name for name, rx in KERNEL if re.search(rx, sym)), "kernel: other")
    if "libc" in dso:
        if re.search(r"malloc|free|alloc|unlink_chunk|consolidate|tcache", sym):
            return "libc: malloc and free"
        return "libc: memcpy, memcmp and other"
    if "vdso" in dso:
        return "vdso (clock)"
    return next((name for name, rx in USER if re.search(rx, sym)), "other user space")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/perf-buckets.py perf.data")
    report = subprocess.run(
        ["perf", "report", "-i", sys.argv[1], "--no-children", "-g", "none",
         "--sort", "dso,sym", "--percent-limit", "0"],
        capture_output=True, text=True, check=True).stdout
    shares = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if m:
            shares[bucket(m.group(2), m.group(3), m.group(4))] += float(m.group(1))
    for name, share in shares.most_common():
        print(f"{share:6.1f}%  {name}")
    print(f"{sum(shares.values()):6.1f}%  total")


if __name__ == "__main__":
    main()
