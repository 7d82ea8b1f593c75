#!/usr/bin/env python3
"""Writes the memory-bound cases of docs/performance.md ("Memory bounds")
as EPP logs (and one vLLM log): each stresses one thing the assembler or
the analysis holds while a request is open, a deployment is tracked or a
peak is estimated.

    memory_cases.py CASE OUT

CASE is one of
  big-dumps      10,000 requests that never complete, each with one
                 `Before running filter plugins` line of a 230 KB endpoint
                 dump (330 reflected endpoints): 2.3 GB
  huge-dumps     2,000 requests that never complete, each with one 1.15 MB
                 dump (1,650 endpoints): 2.3 GB
  open-ids       2,000,000 `EPP received request` lines of distinct ids,
                 never completed: 250 MB
  namespaces     50,000 complete decisions, each in its own namespace (so
                 its own deployment): 200 MB
  vllm-lines     4,000,000 vLLM v1 stats lines (`kubectl logs --prefix`)
                 of 64 engines, one each 10 s for 7.2 days, saturated
                 runs and idle stretches (read by recommend): 1.05 GB
"""
import sys
import time

HEAD = '{"level":"debug","ts":%.6f,"caller":"scheduling/scheduler_profile.go:155","msg":"%s","x-request-id":"%s"'
ENDPOINT = ('{"ID":{"Namespace":"%s","Name":"pool-decode-%06d-rank-0"},"Name":"pool-decode-%06d",'
            '"Address":"10.64.%d.%d","NodeAddress":"10.128.1.93","Port":"8000","MetricsHost":"10.64.%d.%d:8000",'
            '"Labels":{"app.kubernetes.io/name":"pool","llm-d.ai/inference-serving":"true","llm-d.ai/model":"pool",'
            '"llm-d.ai/role":"decode","pod-template-hash":"nhkmj6mrpl"},"RankIndex":0,"ActiveModels":{},'
            '"WaitingModels":{},"MaxActiveModels":0,"RunningRequestsSize":2,"WaitingQueueSize":0,'
            '"KVCacheUsagePercent":0.5903,"KvCacheMaxTokenCapacity":0,"CacheBlockSize":64,"CacheNumBlocks":0,'
            '"UpdateTime":"2026-08-21T14:27:01.249564864Z","AttributeMap":{}}')
T0 = 1787320800.0


def dump(ns, n, salt):
    return ",".join(ENDPOINT % (ns, salt + i, salt + i, i % 250, i // 250, i % 250, i // 250) for i in range(n))


def open_dumps(out, requests, endpoints):
    # Requests start 1 ms apart: all are open at once (the age limit is 60 s).
    body = dump("llm-d", endpoints, 0)
    for r in range(requests):
        ts = T0 + r * 0.001
        rid = "req-%07d" % r
        out.write((HEAD % (ts, "EPP received request", rid) + "}\n").encode())
        out.write((HEAD % (ts, "Before running filter plugins", rid) + ',"endpoints":[' + body + "]}\n").encode())


def open_ids(out, n):
    for r in range(n):
        out.write((HEAD % (T0 + r * 0.00001, "EPP received request", "id-%08d" % r) + "}\n").encode())


def namespaces(out, n):
    for r in range(n):
        ts = T0 + r * 0.01
        rid = "req-%07d" % r
        ns = "ns-%05d" % r
        h = lambda msg: HEAD % (ts, msg, rid)
        lines = [
            h("EPP received request") + "}",
            h("PrefixCacheAffinityFilter: narrowed to sticky") + ',"affinityThreshold":0.8,"sticky":1,"total":2}',
            h("Completed running filter plugin successfully") + ',"plugin":"f/prefix-cache-affinity-filter","endpoints":[{"name":"p-0","namespace":"%s"}]}' % ns,
            h("TokenLoadScorer scoring") + ',"endpoint":"%s/p-0","tokenLoad":1200,"score":0.9}' % ns,
            h("TokenLoadScorer scoring") + ',"endpoint":"%s/p-1","tokenLoad":300,"score":0.97}' % ns,
            h("Request handled") + ',"endpoint":"10.0.0.1:8000"}',
        ]
        out.write(("\n".join(lines) + "\n").encode())


VLLM = ("[pod/glm-5-2-decode-nhkmj6mrpl-p%02d/vllm] INFO %s [loggers.py:123] Engine 000: "
        "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
        "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%\n")


def vllm_lines(out, n, pods=64):
    # Every 10 s each engine logs one line; an engine is saturated (requests
    # waiting, high prompt throughput) for 8 of every 20 intervals.
    for step in range(n // pods):
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime(T0 + step * 10))
        lines = []
        for p in range(pods):
            phase = (step + p) % 20
            busy = phase < 8
            rate = 15000.0 + 37.0 * ((step * 7 + p) % 50) if busy else 300.0 + (step + p) % 40
            lines.append(VLLM % (p, stamp, rate, 80.0, 12 if busy else 1, 5 if busy else 0,
                                 60.0 if busy else 4.0, 40.0 + (step + p) % 30))
        out.write("".join(lines).encode())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    case, path = sys.argv[1], sys.argv[2]
    with open(path, "wb", buffering=1 << 20) as out:
        if case == "big-dumps":
            open_dumps(out, 10_000, 330)
        elif case == "huge-dumps":
            open_dumps(out, 2_000, 1_650)
        elif case == "open-ids":
            open_ids(out, 2_000_000)
        elif case == "namespaces":
            namespaces(out, 50_000)
        elif case == "vllm-lines":
            vllm_lines(out, 4_000_000)
        else:
            sys.exit(__doc__)


main()
