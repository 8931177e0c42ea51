#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""worker.py - a demo worker written in Python: the same protocol and the
same spans as worker.c, recorded with the shmtrace Python module into the
same ring, so a request's flow goes client (C) -> broker (C) -> this
process -> broker -> client. The broker runs it with --py-worker:

    python3 worker.py --ring NAME --fd FD --index K [--crash]

FD is its end of the broker's SOCK_SEQPACKET socketpair. Its main thread
("receiver") reads requests, a "compute" thread serves them; the thread
names come from threading. Exit 0 when the broker closes the socket.
"""
import argparse
import os
import queue
import signal
import socket
import struct
import sys
import threading
import zlib

import shmtrace

# struct demo_msg in demo.h: magic, type, status, flow, id, attempt, tag,
# worker, limit, primes, crc, len, data[512]
MSG = struct.Struct("<IHHQIIIIIIII512s")
MAGIC, REQ, REPLY = 0x646D6F31, 1, 2
OK, BUSY = 0, 1
PRIME_MAX = 2000 + 10000
CRASH_AT = 10
CAT = "worker"  # the demo's category (demo.h): flows join within one


def count_primes(limit):
    """The primes <= limit (a sieve: the same count as worker.c's)."""
    if limit < 2:
        return 0
    sieve = bytearray([1]) * (limit + 1)
    sieve[0:2] = b"\0\0"
    for i in range(2, int(limit ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, limit + 1, i)))
    return sum(sieve)


def serve(sock, t, m, index, crash, done):
    """One request on the compute thread; "work" carries the flow."""
    (magic, _, _, flow, rid, attempt, tag, _, limit, primes, crc, length, data) = m
    status = OK
    with t.span("work", cat=CAT, flow=flow):
        if rid % 100 == 42 and attempt == 0:
            t.instant("busy", cat=CAT, flow=flow)
            status = BUSY
        else:
            with t.span("compute", cat=CAT):
                with t.span("primes", cat=CAT):
                    primes = count_primes(limit)
                done[0] += 1
                if crash and done[0] == CRASH_AT:
                    print("shmtrace-demo: worker-%d (python): crashing on request %d as asked"
                          " (--crash-worker)" % (index, rid), file=sys.stderr, flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                with t.span("checksum", cat=CAT):
                    crc = zlib.crc32(data[:length])
        with t.span("reply", cat=CAT):
            sock.send(MSG.pack(magic, REPLY, status, flow, rid, attempt, tag, index, limit,
                               primes, crc, length, data))


def compute(sock, t, q, index, crash, failed):
    done = [0]
    while True:
        m = q.get()
        if m is None:
            break
        try:
            serve(sock, t, m, index, crash, done)
        except OSError:
            failed.set()  # the broker is gone: the receiver sees EOF too
            break
    t.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ring", required=True)
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--crash", action="store_true")
    a = ap.parse_args()

    try:
        t = shmtrace.open(a.ring)
    except shmtrace.Error as e:
        print("shmtrace-demo: worker-%d (python): %s" % (a.index, e), file=sys.stderr)
        return 1
    threading.current_thread().name = "receiver"
    t.set_process_name("worker-%d (python)" % a.index)
    sock = socket.socket(fileno=a.fd)
    q = queue.Queue()
    failed = threading.Event()
    th = threading.Thread(target=compute, name="compute",
                          args=(sock, t, q, a.index, a.crash, failed))
    th.start()
    ret = 0
    while not failed.is_set():
        buf = sock.recv(MSG.size + 1)
        if not buf:
            break  # the broker closed its end: done
        if len(buf) != MSG.size:
            print("shmtrace-demo: worker-%d (python): bad message" % a.index, file=sys.stderr)
            ret = 1
            break
        flow = struct.unpack_from("<Q", buf, 8)[0]
        with t.span("receive", cat=CAT, flow=flow):
            with t.span("decode", cat=CAT):
                m = MSG.unpack(buf)
                if m[0] != MAGIC or m[1] != REQ or m[8] > PRIME_MAX or m[11] > 512:
                    print("shmtrace-demo: worker-%d (python): bad request %d" % (a.index, m[4]),
                          file=sys.stderr)
                    ret = 1
                    break
            q.put(m)
    q.put(None)
    th.join()
    sock.close()
    t.close()
    return ret or int(failed.is_set())


if __name__ == "__main__":
    sys.exit(main())
