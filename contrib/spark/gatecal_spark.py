#!/usr/bin/env python3
"""Run gate-dist over a fleet's EPP logs on Apache Spark.

Reads every input (paths, folders or globs in any Hadoop-compatible store:
local, hdfs://, s3a://, gs://, abfss://), cuts each file into shards of
(file, time window) with a warm-up before each window, runs
``gate-dist --since SINCE --until UNTIL --source-path FILE --emit-partial - -``
on each shard inside the executors (the shard's lines on stdin, named by
the file they were cut from; the partial on stdout; no temporary files), collects the partials on the driver and merges them with
``gate-dist merge -``, which prints the report one run over all the input
would give.

    spark-submit gatecal_spark.py --binary ./gate-dist --window 1h \\
        's3a://logs/epp/2026-08-21/*.log.gz' -- --format markdown

Everything after ``--`` goes to ``gate-dist merge`` (report flags:
``--format``, ``-o``, ``--fail-if``...); ``--shard-arg`` passes a flag to
every shard run (``--shard-arg=--config=epp.yaml``, the file shipped with
``--files``). See contrib/spark/README.md.

How shards are cut (done here, in Python, from the lines' own timestamps):

* Each file is read whole (``binaryFiles``), gunzipped when its content is
  gzip, and split into lines. A line's time is the first timestamp on it:
  an RFC 3339 time (the kubectl ``--timestamps`` prefix, stern, logcli,
  the kubelet's files, zap's ISO encoder) or an epoch number under a
  ``ts``/``time``/``timestamp``/``@timestamp``/``date``/``timeUnixNano``
  key (zap's default encoder, Docker, Fluent Bit, Vector, OpenTelemetry).
  A line without one (a stack trace, a wrapped line) takes the time of the
  line before it.
* Windows are ``--window`` long and aligned to the Unix epoch, so shards of
  different files and of successive runs line up. A file gets every window
  from the one holding its first line to the one holding its last.
* A shard holds the file's lines timed in
  ``[since - warm-up, until + tail)``: the warm-up lines rebuild the
  in-flight state the reconstruction needs (decisions before ``since`` are
  read, not counted), the tail lines give the first tokens (observed TTFT)
  of requests decided just before ``until``. Extra lines are harmless: the
  binary counts only the decisions in ``[since, until)``.
* A file's first shard has no ``--since`` and its last no ``--until``, so
  no decision is lost to a difference between the clock of a line's prefix
  and that of its record.
* A file whose lines mostly carry no timestamp this program recognises
  (a Loki API response, a pretty-printed JSON document) is one shard, read
  whole, without ``--since``/``--until``: exact, but not split.

All the pods of one file share its shards: the binary keeps pods apart by
itself (requests are grouped by pod), so a kubectl capture with
``--prefix`` needs no per-pod split.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import zlib
from datetime import datetime, timezone

PROG = "gatecal-spark"

# The first timestamp on a line: an RFC 3339 time, or an epoch number under
# one of the keys log shippers use. One regex, so the leftmost wins.
_TS = re.compile(
    rb"(?P<iso>(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    rb"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|z|[+-]\d\d:?\d\d)?)"
    rb'|"(?:ts|time|timestamp|@timestamp|date|timeUnixNano|observedTimeUnixNano)"'
    rb'\s*:\s*"?(?P<epoch>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![-:\d])'
)

# A line's timestamp is looked for in its first bytes first (where every
# format above puts it, except some shippers' records), then in the rest.
_HEAD = 512

# A file is cut into windows only when at least this share of its non-blank
# lines carries a timestamp of its own.
_MIN_TIMED_SHARE = 0.5

# Times outside [2000, 2200) are not log times (a number under "date" that
# is something else): ignored.
_T_MIN, _T_MAX = 946684800.0, 7258118400.0


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``90s``, ``15m``, ``1h30m``, ``2d``."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    t = text.strip()
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+|\d+(?:\.\d+)?", t)
    if not parts:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: expected e.g. 90s, 15m, 1h, 1h30m"
        )
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        secs = float(t)
    else:
        secs = sum(
            float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", t)
        )
    if not math.isfinite(secs) or secs < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}")
    return secs


def _window(text: str) -> float:
    secs = parse_duration(text)
    if secs < 1 or secs != int(secs):
        raise argparse.ArgumentTypeError(
            f"invalid window {text!r}: a whole number of seconds, at least 1 s"
        )
    return secs


def line_time(line: bytes) -> float | None:
    """The epoch seconds of the first timestamp on ``line``, if any."""
    m = _TS.search(line, 0, _HEAD) or (_TS.search(line) if len(line) > _HEAD else None)
    if m is None:
        return None
    try:
        if m.group("iso") is not None:
            frac = m.group("frac") or b""
            dt = datetime(
                int(m.group("y")),
                int(m.group("mo")),
                int(m.group("d")),
                int(m.group("h")),
                int(m.group("mi")),
                int(m.group("s")),
                tzinfo=timezone.utc,
            )
            t = dt.timestamp() + (float(b"0." + frac) if frac else 0.0)
            tz = m.group("tz")
            if tz and tz not in (b"Z", b"z"):
                sign = -1 if tz[:1] == b"-" else 1
                digits = tz[1:].replace(b":", b"")
                t -= sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
        else:
            t = float(m.group("epoch"))
            # Nanoseconds, microseconds or milliseconds since the epoch.
            if t > 1e17:
                t /= 1e9
            elif t > 1e14:
                t /= 1e6
            elif t > 1e11:
                t /= 1e3
    except (ValueError, OverflowError):
        return None
    return t if _T_MIN <= t < _T_MAX else None


def decompress(path: str, data: bytes) -> bytes:
    """The file's content, gunzipped when it is gzip (by its magic bytes)."""
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{path}: not readable as gzip: {e}") from e


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def split_shards(
    path: str, raw: bytes, window: float, warm_up: float, tail: float
) -> list[dict]:
    """The shards of one file: each a dict with its ``path``, ``index``,
    ``since``/``until`` (RFC 3339, or None at the file's outer edges),
    ``lines`` and ``data`` (the bytes to feed the binary)."""
    data = decompress(path, raw)
    # Lines with their ending; the last one may have none.
    lines = data.split(b"\n")
    ends_nl = data.endswith(b"\n")
    if ends_nl:
        lines.pop()
    times: list[float | None] = []
    timed = nonblank = 0
    for ln in lines:
        t = line_time(ln)
        times.append(t)
        if ln.strip():
            nonblank += 1
            if t is not None:
                timed += 1
    known = [t for t in times if t is not None]
    if not known or timed < _MIN_TIMED_SHARE * nonblank:
        return [
            {
                "path": path,
                "index": 0,
                "since": None,
                "until": None,
                "lines": len(lines),
                "whole": True,
                "data": raw,
            }
        ]
    # Untimed lines take the time of the line before (leading ones: the
    # first time in the file).
    last = known[0]
    for i, t in enumerate(times):
        if t is None:
            times[i] = last
        else:
            last = t
    first_w = math.floor(min(known) / window)
    last_w = math.floor(max(known) / window)
    n = last_w - first_w + 1
    buckets: list[list[bytes]] = [[] for _ in range(n)]
    for i, (ln, t) in enumerate(zip(lines, times)):
        piece = ln + b"\n" if (ends_nl or i + 1 < len(lines)) else ln
        # Windows k with  since_k - warm_up <= t < until_k + tail.
        lo = max(math.floor((t - tail) / window) - first_w, 0)
        hi = min(math.floor((t + warm_up) / window) - first_w, n - 1)
        for k in range(lo, hi + 1):
            buckets[k].append(piece)
    shards = []
    for k, b in enumerate(buckets):
        since = (first_w + k) * window
        shards.append(
            {
                "path": path,
                "index": k,
                "since": rfc3339(since) if k > 0 else None,
                "until": rfc3339(since + window) if k < n - 1 else None,
                "lines": len(b),
                "whole": False,
                "data": b"".join(b),
            }
        )
    return shards


def resolve_binary(spec: str) -> str:
    """The gate-dist to run on this node: the file shipped with the job
    (``--files`` or ``--binary PATH``), else ``spec`` as a path, else on
    PATH."""
    try:
        from pyspark import SparkFiles  # noqa: PLC0415

        shipped = SparkFiles.get(os.path.basename(spec))
        if os.path.isfile(shipped):
            mode = os.stat(shipped).st_mode
            if not mode & stat.S_IXUSR:
                os.chmod(shipped, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            return shipped
    except Exception:  # noqa: BLE001 - no SparkContext files on this node
        pass
    if os.sep in spec and os.path.isfile(spec):
        return os.path.abspath(spec)
    # YARN puts the files of --files in the container's working directory.
    local = os.path.abspath(os.path.basename(spec))
    if os.path.isfile(local) and os.access(local, os.X_OK):
        return local
    found = shutil.which(spec)
    if found:
        return found
    raise FileNotFoundError(
        f"{spec}: no such gate-dist on this node (ship it with --files, "
        "give --binary a path on the driver, or install it on the PATH)"
    )


def files_dir() -> str | None:
    """Where Spark puts the files shipped with ``--files`` on this node:
    relative paths in ``--shard-arg`` (``--config=epp.yaml``) resolve there."""
    try:
        from pyspark import SparkFiles  # noqa: PLC0415

        root = SparkFiles.getRootDirectory()
        return root if root and os.path.isdir(root) else None
    except Exception:  # noqa: BLE001 - not inside a Spark job
        return None


def _stderr_tail(err: bytes, limit: int = 2000) -> str:
    text = err.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def run_shard(binary: str, shard_args: list[str], name: str | None, shard: dict) -> dict:
    """Runs the binary on one shard; returns the shard's description and its
    partial (one line of JSON)."""
    exe = resolve_binary(binary)
    cmd = [exe, *shard_args]
    if shard["since"]:
        cmd += ["--since", shard["since"]]
    if shard["until"]:
        cmd += ["--until", shard["until"]]
    # --source-path: the shard is the file's, as if read from it (the EPP
    # pod of a kubelet path; the stream of lines that name no pod).
    cmd += ["--source-path", shard["path"]]
    cmd += ["--emit-partial", "-", f"{name}=-" if name else "-"]
    proc = subprocess.run(
        cmd, input=shard["data"], capture_output=True, check=False, cwd=files_dir()
    )
    where = describe(shard)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{PROG}: gate-dist failed on {where} (exit {proc.returncode}): "
            f"{_stderr_tail(proc.stderr)}"
        )
    out = proc.stdout.strip()
    if not out or b"\n" in out:
        raise RuntimeError(
            f"{PROG}: gate-dist wrote {len(out.splitlines())} lines on {where}, "
            "expected one partial document"
        )
    return {k: v for k, v in shard.items() if k != "data"} | {"partial": out}


def describe(shard: dict) -> str:
    since = shard["since"] or "start"
    until = shard["until"] or "end"
    return f"{shard['path']} shard {shard['index']} [{since}, {until})"


def split_name(spec: str) -> tuple[str | None, str]:
    """``NAME=PATH`` names the deployment of everything under PATH (as the
    binary's own ``NAME=PATH``); a URL's ``scheme://`` is not a name."""
    head, sep, rest = spec.partition("=")
    if sep and head and "/" not in head and ":" not in head:
        return head, rest
    return None, spec


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gatecal_spark.py",
        description="Run gate-dist over logs in any Hadoop-compatible store, "
        "sharded by file and time window, and merge the partial reports.",
        epilog="Everything after -- goes to `gate-dist merge` (--format, -o, "
        "--fail-if, ...).",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="file, folder or glob (s3a://bucket/epp/*.log.gz); NAME=INPUT names "
        "the deployment, as gate-dist's NAME=PATH",
    )
    p.add_argument(
        "--window", type=_window, default=3600.0, metavar="DURATION",
        help="shard length, aligned to the Unix epoch (default 1h)",
    )
    p.add_argument(
        "--warm-up", type=parse_duration, default=1800.0, metavar="DURATION",
        help="lines before each window read, not counted, to rebuild the in-flight "
        "state (default 30m)",
    )
    p.add_argument(
        "--tail", type=parse_duration, default=300.0, metavar="DURATION",
        help="lines after each window read, for the first tokens of requests "
        "decided just before its end (default 5m)",
    )
    p.add_argument(
        "--binary", default="gate-dist", metavar="PATH",
        help="gate-dist: a file on the driver (shipped to the executors), a name "
        "shipped with --files, or a command on the executors' PATH (default gate-dist)",
    )
    p.add_argument(
        "--shard-arg", action="append", default=[], metavar="ARG",
        help="a flag for every shard's gate-dist run (repeat; e.g. "
        "--shard-arg=--config=epp.yaml)",
    )
    p.add_argument(
        "--output", metavar="FILE",
        help="write the report to FILE on the driver (default stdout)",
    )
    p.add_argument(
        "--master", metavar="URL",
        help="Spark master when not set by spark-submit (e.g. local[4])",
    )
    return p


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        i = argv.index("--")
        own, merge_args = argv[:i], argv[i + 1 :]
    else:
        own, merge_args = argv, []
    return build_parser().parse_args(own), merge_args


def main(argv: list[str] | None = None) -> int:
    args, merge_args = parse_args(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - the tests need no Spark

    builder = SparkSession.builder.appName("gatecal")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        return run(spark, args, merge_args)
    finally:
        spark.stop()


def run(spark, args: argparse.Namespace, merge_args: list[str]) -> int:
    from pyspark import StorageLevel  # noqa: PLC0415

    sc = spark.sparkContext
    # The executors import this file by name when it is not __main__.
    sc.addPyFile(os.path.abspath(__file__))
    binary = args.binary
    driver_binary = None
    if os.path.isfile(binary):
        driver_binary = os.path.abspath(binary)
        try:
            sc.addFile(driver_binary)
        except Exception as e:  # noqa: BLE001 - the same name shipped with --files
            print(f"{PROG}: {binary}: not shipped again: {e}", file=sys.stderr)
    window, warm_up, tail = args.window, args.warm_up, args.tail
    shard_args = list(args.shard_arg)

    # Each input's files, with the deployment name its NAME= gives.
    named = [split_name(s) for s in args.inputs]
    rdds = []
    for name, path in named:
        try:
            files = sc.binaryFiles(path)
            files.getNumPartitions()  # lists the input: fails here if nothing matches
        except Exception as e:  # noqa: BLE001 - Py4J wraps Hadoop's error
            print(f"{PROG}: {path}: {_java_message(e)}", file=sys.stderr)
            return 2
        rdds.append(files.map(lambda kv, name=name: (name, kv[0], kv[1])))
    files = sc.union(rdds) if len(rdds) > 1 else rdds[0]

    def cut(item):
        name, path, raw = item
        for shard in split_shards(path, raw, window, warm_up, tail):
            yield (shard["path"], shard["index"]), (name, shard)

    # Cut once (kept until the shards have run), then one partition per
    # shard, so the shards of one file run in parallel.
    shards = files.flatMap(cut).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        keys = shards.keys().collect()
        if not keys:
            print(f"{PROG}: no input file matched", file=sys.stderr)
            return 2
        order = {k: i for i, k in enumerate(sorted(keys))}
        results = (
            shards.partitionBy(len(order), lambda k: order[k])
            .map(lambda kv: run_shard(binary, shard_args, kv[1][0], kv[1][1]))
            .collect()
        )
    except Exception as e:  # noqa: BLE001 - a task's error, wrapped by Py4J
        print(task_error(e), file=sys.stderr)
        return 1
    finally:
        shards.unpersist()
    results.sort(key=lambda r: (r["path"], r["index"]))
    n_files = len({r["path"] for r in results})
    whole = sum(1 for r in results if r["whole"])
    lines = sum(r["lines"] for r in results)
    print(
        f"{PROG}: {plural(n_files, 'file')}, {plural(len(results), 'shard')} "
        f"of {plural(lines, 'line')} "
        f"(window {window:g} s, warm-up {warm_up:g} s, tail {tail:g} s)"
        + (f"; {plural(whole, 'file')} read whole: no timestamps to cut by" if whole else ""),
        file=sys.stderr,
    )
    partials = b"".join(r["partial"] + b"\n" for r in results)
    exe = driver_binary or resolve_binary(binary)
    proc = subprocess.run(
        [exe, "merge", *merge_args, "-"], input=partials, capture_output=True, check=False
    )
    sys.stderr.write(name_partials(proc.stderr.decode("utf-8", "replace"), results))
    if not proc.stdout:
        # Refused (merge's error is above), or written to merge's own -o.
        return proc.returncode
    if args.output:
        with open(args.output, "wb") as f:
            f.write(proc.stdout)
    else:
        sys.stdout.buffer.write(proc.stdout)
        sys.stdout.flush()
    return proc.returncode


def name_partials(text: str, results: list[dict]) -> str:
    """``text`` (merge's stderr) with each ``-:N`` (the N-th partial on its
    stdin) followed by the shard it came from."""

    def shard(m: re.Match) -> str:
        n = int(m.group(1))
        if 1 <= n <= len(results):
            return f"{m.group(0)} ({describe(results[n - 1])})"
        return m.group(0)

    return re.sub(r"(?<![\w/.-])-:(\d+)\b", shard, text)


# The errors this job raises inside a task, as Python prints them.
_TASK_ERROR = re.compile(r"^(?:RuntimeError|ValueError|FileNotFoundError): (.*)$", re.M)
# Any other Python error a task died of.
_PY_ERROR = re.compile(r"^[A-Za-z_.]*(?:Error|Exception): .*$", re.M)


def task_error(e: Exception) -> str:
    """The message of the error that failed a task (a shard's run, an
    unreadable file), without the Java and Python stack traces around it."""
    text = str(e)
    m = _TASK_ERROR.search(text)
    if m:
        msg = m.group(1)
        return msg if msg.startswith(PROG) else f"{PROG}: {msg}"
    m = _PY_ERROR.search(text)
    detail = m.group(0) if m else _java_message(e)
    return f"{PROG}: the Spark job failed: {detail}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _java_message(e: Exception) -> str:
    """The first line of a Py4J-wrapped Java exception (e.g. Hadoop's
    ``Input path does not exist``)."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return str(java.getMessage()).splitlines()[0]
        except Exception:  # noqa: BLE001
            pass
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
