"""Unit tests of the shard cutting (no Spark, no binary needed):

    python3 -m unittest discover -s contrib/spark
"""

import gzip
import os
import random
import sys
import unittest
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gatecal_spark as g  # noqa: E402

T0 = 1787320800.0  # 2026-08-21T14:00:00Z


def zap(t: float, msg: str = "x") -> bytes:
    return b'{"level":"info","ts":%r,"msg":"%s"}' % (t, msg.encode())


def iso(t: float) -> bytes:
    return (
        datetime.fromtimestamp(t, tz=timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        .encode()
    )


class LineTime(unittest.TestCase):
    def test_formats(self):
        cases = [
            (zap(T0 + 0.25), T0 + 0.25),
            (b"[pod/glm-epp-1/epp] " + iso(T0 + 1.5) + b" " + zap(T0), T0 + 1.5),
            (iso(T0 + 2) + b" stdout F " + zap(T0 + 2), T0 + 2),
            (b"2026-08-21T16:00:03+02:00 stdout F hello", T0 + 3),
            (b"2026-08-21T10:00:04-0400 x", T0 + 4),
            (b'{"log":"...","time":"2026-08-21T14:00:05.5Z"}', T0 + 5.5),
            (b'{"body":"...","timeUnixNano":"1787320806000000000"}', T0 + 6),
            (b'{"message":"...","timestamp":1787320807123}', T0 + 7.123),
            (b'{"date":1787320808.5,"log":"..."}', T0 + 8.5),
        ]
        for line, want in cases:
            with self.subTest(line=line):
                self.assertAlmostEqual(g.line_time(line), want, places=3)

    def test_leftmost_timestamp_wins(self):
        line = iso(T0 + 9) + b" " + zap(T0 + 100)
        self.assertAlmostEqual(g.line_time(line), T0 + 9, places=3)

    def test_no_timestamp(self):
        for line in [
            b"",
            b"goroutine 1 [running]:",
            b'{"level":"info","msg":"no time"}',
            b'{"date":42}',  # not a log time
            b"9999-99-99T99:99:99Z",  # not a date
            bytes(range(256)),
        ]:
            with self.subTest(line=line):
                self.assertIsNone(g.line_time(line))

    def test_timestamp_after_the_head(self):
        line = b'{"log":"' + b"a" * 2000 + b'","time":"2026-08-21T14:00:10Z"}'
        self.assertAlmostEqual(g.line_time(line), T0 + 10)

    def test_never_raises_on_random_bytes(self):
        rng = random.Random(7)
        alphabet = b'0123456789-:TZ.+" ts{}'
        for _ in range(2000):
            line = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
            t = g.line_time(line)
            self.assertTrue(t is None or g._T_MIN <= t < g._T_MAX)


class Durations(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(g.parse_duration("90s"), 90)
        self.assertEqual(g.parse_duration("15m"), 900)
        self.assertEqual(g.parse_duration("1h30m"), 5400)
        self.assertEqual(g.parse_duration("2d"), 172800)
        self.assertEqual(g.parse_duration("250ms"), 0.25)
        self.assertEqual(g.parse_duration("45"), 45)
        self.assertEqual(g.parse_duration("0"), 0)

    def test_rejects(self):
        for bad in ["", "m", "1x", "-5m", "1h 30m", "nan"]:
            with self.subTest(bad=bad), self.assertRaises(Exception):
                g.parse_duration(bad)
        for bad in ["0s", "1.5s", "500ms"]:
            with self.subTest(bad=bad), self.assertRaises(Exception):
                g._window(bad)


def log(times, msg="x"):
    return b"".join(zap(t, msg) + b"\n" for t in times)


def parse_rfc3339(text):
    dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return dt.replace(tzinfo=timezone.utc).timestamp()


def counted(shard, t):
    """Whether a decision at t is counted by the shard's --since/--until."""
    since = shard["since"] and parse_rfc3339(shard["since"])
    until = shard["until"] and parse_rfc3339(shard["until"])
    return (since is None or t >= since) and (until is None or t < until)


class Split(unittest.TestCase):
    def test_every_line_counted_by_exactly_one_shard(self):
        rng = random.Random(1)
        times = sorted(T0 + rng.uniform(0, 3600) for _ in range(500))
        shards = g.split_shards("f", log(times), 600, 0, 0)
        self.assertEqual(len(shards), 6)
        self.assertIsNone(shards[0]["since"])
        self.assertIsNone(shards[-1]["until"])
        for a, b in zip(shards, shards[1:]):
            self.assertEqual(a["until"], b["since"])
        self.assertEqual(shards[1]["since"], "2026-08-21T14:10:00Z")
        # Without warm-up or tail the shards partition the lines.
        self.assertEqual(b"".join(s["data"] for s in shards), log(times))
        for t in times:
            self.assertEqual(sum(counted(s, t) for s in shards), 1)

    def test_warm_up_and_tail(self):
        times = [T0 + i for i in range(0, 1800, 7)]
        shards = g.split_shards("f", log(times), 600, 120, 60)
        self.assertEqual(len(shards), 3)
        for s in shards:
            got = [g.line_time(ln) for ln in s["data"].splitlines()]
            self.assertEqual(got, sorted(got))
            start = T0 + 600 * s["index"]
            want = [t for t in times if start - 120 <= t < start + 600 + 60]
            self.assertEqual(got, want)
            self.assertEqual(s["lines"], len(want))

    def test_untimed_lines_follow_the_line_before(self):
        data = (
            b"banner without a time\n"
            + zap(T0 + 10)
            + b"\n"
            + zap(T0 + 650)
            + b"\n  continuation of the line before\n"
            + zap(T0 + 700)
        )  # no final newline: kept as it is
        a, b = g.split_shards("f", data, 600, 0, 0)
        self.assertEqual(a["data"], b"banner without a time\n" + zap(T0 + 10) + b"\n")
        self.assertEqual(
            b["data"],
            zap(T0 + 650) + b"\n  continuation of the line before\n" + zap(T0 + 700),
        )

    def test_gzip_is_read_by_content(self):
        times = [T0 + i for i in range(0, 1200, 30)]
        plain = g.split_shards("f", log(times), 600, 0, 0)
        packed = g.split_shards("f.log", gzip.compress(log(times)), 600, 0, 0)
        self.assertEqual([s["data"] for s in plain], [s["data"] for s in packed])

    def test_bad_gzip_names_the_file(self):
        bad = gzip.compress(log([T0]))[:-12]
        with self.assertRaisesRegex(ValueError, r"^s3a://b/x\.gz: not readable as gzip"):
            g.split_shards("s3a://b/x.gz", bad, 600, 0, 0)

    def test_untimed_file_is_one_whole_shard(self):
        data = b'{\n  "status": "success",\n  "data": {"result": []}\n}\n'
        (s,) = g.split_shards("f", data, 600, 60, 60)
        self.assertTrue(s["whole"])
        self.assertIsNone(s["since"])
        self.assertIsNone(s["until"])
        self.assertEqual(s["data"], data)

    def test_one_window(self):
        (s,) = g.split_shards("f", log([T0 + 1, T0 + 2]), 3600, 600, 300)
        self.assertIsNone(s["since"])
        self.assertIsNone(s["until"])
        self.assertEqual(s["data"], log([T0 + 1, T0 + 2]))


class MergeMessages(unittest.TestCase):
    def test_partials_named_by_their_shard(self):
        results = [
            {"path": "s3a://b/a.log", "index": 0, "since": None, "until": "2026-08-21T15:00:00Z"},
            {"path": "s3a://b/a.log", "index": 1, "since": "2026-08-21T15:00:00Z", "until": None},
        ]
        text = "gate-dist: error: -:2: counts decisions ..., which -:1 counts too; -:3 x-:1\n"
        self.assertEqual(
            g.name_partials(text, results),
            "gate-dist: error: -:2 (s3a://b/a.log shard 1 [2026-08-21T15:00:00Z, end)): "
            "counts decisions ..., which -:1 (s3a://b/a.log shard 0 "
            "[start, 2026-08-21T15:00:00Z)) counts too; -:3 x-:1\n",
        )


class Names(unittest.TestCase):
    def test_split_name(self):
        self.assertEqual(g.split_name("glm=s3a://b/epp/*.gz"), ("glm", "s3a://b/epp/*.gz"))
        self.assertEqual(g.split_name("s3a://b/k=v/x.log"), (None, "s3a://b/k=v/x.log"))
        self.assertEqual(g.split_name("logs/a=b.log"), (None, "logs/a=b.log"))
        self.assertEqual(g.split_name("epp.log"), (None, "epp.log"))

    def test_merge_args_after_double_dash(self):
        args, merge = g.parse_args(["a.log", "--window", "30m", "--", "--format", "json"])
        self.assertEqual(args.inputs, ["a.log"])
        self.assertEqual(args.window, 1800)
        self.assertEqual(merge, ["--format", "json"])


if __name__ == "__main__":
    unittest.main()
