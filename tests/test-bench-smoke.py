#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-bench-smoke - every benchmark in a tiny configuration, and the
statistics of bench/compare.

Usage: test-bench-smoke.py BUILD_ROOT SOURCE_ROOT VERSION

Runs each program of bench/ with --json and checks what it reports, never
how fast: the records parse, have the documented layout (schema 2, with
the run's context), the counts add up
(messages sent = received, round trips = pairs * loops, requests timed =
requests run) and percentiles are ordered.  Then bench/compare --selftest
(its statistics on fixed data) and one tiny comparison.  Prints TAP.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE, VERSION = sys.argv[1], sys.argv[2], sys.argv[3]
results = []


def bench(name, *args, expect_rc=0, stderr=False):
    cmd = [os.path.join(BUILD, "bench", name)] + list(args)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    if proc.returncode != expect_rc:
        raise AssertionError("%s: exit %d, expected %d; stderr: %s" %
                             (" ".join(cmd), proc.returncode, expect_rc,
                              proc.stderr.strip()))
    return (proc.stdout, proc.stderr) if stderr else proc.stdout


CONTEXT = ("host", "kernel", "kernel_version", "arch", "cpu_model",
           "nr_cpus", "nr_cpus_allowed", "loadavg_before", "loadavg_after",
           "cpu_busy_others", "libfiber_version", "git_revision",
           "sched_clock", "topology", "topology_source", "features", "env",
           "command", "date")


def records(out):
    """The JSON records of @out, checked against schema 2: the top-level
    members, each once, and a context with every field."""
    recs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    for r in recs:
        assert r["schema"] == 2, r
        assert set(r) == {"schema", "bench", "mode", "params", "metrics",
                          "warnings", "context"}, sorted(r)
        assert all(isinstance(w, str) for w in r["warnings"]), r
        assert set(r["context"]) == set(CONTEXT), sorted(r["context"])
        # No member at two levels.
        assert not set(r["params"]) & set(r["metrics"]), r
        for group in ("params", "metrics", "context"):
            assert not set(r[group]) & set(r) - {group}, r
    return recs


def features(rec):
    return rec["context"]["features"].split()


def ordered(metrics, keys):
    vals = [metrics[k] for k in keys]
    assert all(v > 0 for v in vals), "non-positive percentile: %s" % vals
    assert vals == sorted(vals), "percentiles out of order: %s" % vals


def test(fn):
    results.append(fn)
    return fn


@test
def pipe_pingpong_counts_and_percentiles():
    recs = records(bench("pipe-pingpong", "--pairs", "2", "--workers", "2",
                         "--loops", "2000", "--thread-loops", "500",
                         "--latency", "--json"))
    assert [r["mode"] for r in recs] == ["fiber", "threads"], recs
    for r, loops in zip(recs, (2000, 500)):
        m = r["metrics"]
        assert r["params"]["loops"] == loops, r
        assert m["roundtrips"] == 2 * loops, r
        assert m["ns_per_roundtrip"] > 0 and m["roundtrips_per_sec"] > 0
        ordered(m, ["p50_ns", "p90_ns", "p99_ns", "p99.9_ns"])


@test
def pipe_pingpong_duration():
    recs = records(bench("pipe-pingpong", "--duration", "1", "--fibers",
                         "--json"))
    assert len(recs) == 1 and recs[0]["params"]["duration_s"] == 1
    assert recs[0]["metrics"]["roundtrips"] > 0
    assert 0.9 < recs[0]["metrics"]["elapsed_s"] < 30
    bench("pipe-pingpong", "--duration", "1", "--loops", "5",
          expect_rc=2)


@test
def pipe_pingpong_spin_floor():
    """--spin adds the two-thread spinning floor as its own record, and
    the table gives fiber / spin."""
    if os.cpu_count() < 2:
        return
    recs = records(bench("pipe-pingpong", "--workers", "2", "--loops",
                         "2000", "--fibers", "--spin", "--json"))
    assert [r["mode"] for r in recs] == ["fiber", "spin"], recs
    for r in recs:
        assert r["metrics"]["roundtrips"] == 2000, r
        assert r["metrics"]["ns_per_roundtrip"] > 0, r
    out = bench("pipe-pingpong", "--workers", "2", "--loops", "2000",
                "--fibers", "--spin")
    assert "ratio fiber/spin: " in out, out


@test
def boost_peer_and_vs_boost():
    """bench/peers/boost-pingpong (built only with Boost) reports both
    modes, and bench/vs-boost prints the three medians and both ratios."""
    if not os.access(os.path.join(BUILD, "bench", "boost-pingpong"),
                     os.X_OK):
        return
    for mode in ("channel", "jump"):
        out = bench("boost-pingpong", "--mode", mode, "--loops", "2000")
        r = json.loads(out)
        assert r["mode"] == mode and r["loops"] == 2000, r
        assert r["ns_per_roundtrip"] > 0 and r["boost"], r
    bench("boost-pingpong", "--mode", "nosuch", expect_rc=2)
    proc = subprocess.run([os.path.join(SOURCE, "bench", "vs-boost"), "-k",
                           "1", "--loops", "2000", "--build", BUILD],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for want in ("libfiber pipe, 1 worker", "Boost.Fiber unbuffered_channel",
                 "Boost.Context jump_fcontext", "libfiber / channel",
                 "libfiber / jump_fcontext", "load average"):
        assert want in proc.stdout, proc.stdout


def shared_machine(*args):
    return subprocess.run([os.path.join(SOURCE, "bench", "shared-machine"),
                           "--build", BUILD] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)


def busy_loops():
    return set(subprocess.run(["pgrep", "-f", "while :; do :; done"],
                              stdout=subprocess.PIPE,
                              text=True).stdout.split())


@test
def shared_machine_rounds_and_shares():
    """bench/shared-machine runs the four sides once per round beside its
    busy loops, and reports wrk's figures in order and CPU shares that
    fit in the machine; its busy loops are gone when it returns."""
    if not shutil.which("wrk") or not os.access(
            os.path.join(BUILD, "examples", "httpd"), os.X_OK):
        return
    small = ("--duration", "1", "--loops", "2000", "--thread-loops", "200")
    before = busy_loops()
    proc = shared_machine("-k", "2", "--hogs", "1", "--json", *small)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert (r["hogs"], r["rounds"], r["workers"]) == (1, 2, 2), r
    assert sorted(r["results"]) == ["httpd fibers", "httpd threads",
                                    "pingpong fibers", "pingpong threads"]
    for side, runs in r["results"].items():
        assert len(runs) == 2, (side, runs)
        for m in runs:
            if side.startswith("pingpong"):
                assert m["ns_per_roundtrip"] > 0, m
                continue
            assert m["requests_per_sec"] > 0, m
            assert 0 < m["p50_ms"] <= m["p90_ms"] <= m["p99_ms"], m
            assert 0 < m["server_cpu_share"] <= 1, m
            assert 0 < m["hogs_cpu_share"] <= 1, m
            assert m["server_cpu_share"] + m["hogs_cpu_share"] <= 1.05, m
    # Others' busy loops (./dev loaded runs the suite beside two) stay.
    left = busy_loops() - before
    assert not left, "busy loops left running: %s" % left
    proc = shared_machine("-k", "1", "--hogs", "0", *small)
    assert proc.returncode == 0, proc.stderr
    for want in ("beside 0 busy loop(s)", "pingpong ns_per_roundtrip",
                 "httpd p99_ms (ms)", "httpd server_cpu_share", "f/t"):
        assert want in proc.stdout, proc.stdout
    # Killed in the middle, even by SIGKILL, it leaves no busy loop.
    proc = subprocess.Popen([os.path.join(SOURCE, "bench", "shared-machine"),
                             "--build", BUILD, "--hogs", "1", "-k", "5"] +
                            list(small), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(300):  # until its busy loop runs
        if busy_loops() - before:
            break
        time.sleep(0.05)
    assert busy_loops() - before, "no busy loop started"
    proc.kill()
    proc.wait()
    for _ in range(300):  # the kernel kills the children after it
        if not busy_loops() - before:
            break
        time.sleep(0.05)
    left = busy_loops() - before
    assert not left, "busy loops outlived a killed run: %s" % left
    for bad, name in ((("--hogs", "-1"), "--hogs"), (("-k", "0"), "-k"),
                      (("--duration", "0"), "--duration")):
        proc = shared_machine(*bad)
        assert proc.returncode != 0 and name in proc.stderr, proc.stderr


@test
def create_join_park_reports_rss():
    recs = records(bench("create-join", "--park", "--fibers", "2000",
                         "--json"))
    m = recs[0]["metrics"]
    assert m["rss_per_fiber_bytes"] > 0 and m["rss_parked_kb"] > 0, recs
    env = dict(os.environ, LIBFIBER_STACK_GUARD="0")
    proc = subprocess.run([os.path.join(BUILD, "bench", "create-join"),
                           "--park", "--fibers", "2000", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert records(proc.stdout)[0]["metrics"]["rss_per_fiber_bytes"] > 0


@test
def create_join_park_refuses_batch_and_wg():
    # A park run joins every fiber with fiber_join, all N at once: --wg
    # and --batch were dropped while the record claimed them.
    for extra, name in ((["--wg"], "--wg"), (["--batch", "7"], "--batch"),
                        (["--batch", "1"], "--batch")):
        _, err = bench("create-join", "--park", "--fibers", "10", "--json",
                       *extra, expect_rc=2, stderr=True)
        assert "--park" in err and "does not take %s" % name in err, err


@test
def balance_evidence_checks_its_arguments():
    # atoi() took anything: "asym 2 0" printed records_per_s inf, a
    # negative N overflowed calloc, an unknown command exited 0.
    for args, what in ((["asym", "2", "0"], "SECONDS: invalid value '0'"),
                       (["asym", "x", "1"], "N: invalid value 'x'"),
                       (["asym", "-1", "1"], "N: invalid value '-1'"),
                       (["create", "2"], "AFFINED: invalid value '2'"),
                       (["asym", "1"], "usage:"), (["foo", "bar"], "usage:"),
                       ([], "usage:")):
        _, err = bench("balance-evidence", *args, expect_rc=2, stderr=True)
        assert what in err, (args, err)


@test
def schbench_nothing_timed():
    # The only round of each worker starts in the warm-up and ends after
    # the run: no request is timed, and the ratios were 0/0, "-nan".
    out, err = bench("schbench", "-r", "1", "-s", "1000000", "-m", "1",
                     "-t", "1", stderr=True)
    assert "nan" not in out.lower(), out
    assert "ratio threads/fiber: requests/s n/a, wakeup p50 n/a, " \
        "p99 n/a" in out, out
    assert "fiber: no request was timed" in err, err


@test
def workers_beyond_the_runtime_refused():
    # --workers took up to 4096, and fiber_init() refused 1025 with a
    # message naming fiber_config.workers and exit 1.
    for name in ("pipe-pingpong", "create-join", "hackbench", "schbench"):
        _, err = bench(name, "--workers", "1025", expect_rc=2, stderr=True)
        assert "--workers: invalid value '1025' (expected a whole number " \
            "from 1 to 1024)" in err, (name, err)
        assert "fiber_config" not in err, (name, err)


@test
def pipe_pingpong_features():
    recs = records(bench("pipe-pingpong", "--loops", "1000", "--fibers",
                         "--features", "NO_TTWU_QUEUE", "--json"))
    assert "NO_TTWU_QUEUE" in features(recs[0]), recs
    bench("pipe-pingpong", "--features", "NO_SUCH_FEATURE", expect_rc=2)


@test
def features_errors_name_the_option():
    # --features bogus printed the library's message first, naming
    # LIBFIBER_SCHED_FEATURES (later fiber_sched_features_set), which the
    # user never used; one message names --features, the value, the word
    # and the names, before anything starts.
    for name in ("pipe-pingpong", "hackbench"):
        _, err = bench(name, "--features", "WA_IDLE,bogus", expect_rc=2,
                       stderr=True)
        assert err.startswith("%s: --features: invalid value "
                              "'WA_IDLE,bogus': unknown scheduler feature "
                              "'bogus' (" % name), (name, err)
        assert "NO_NAME turns off; names: SIS_UTIL " in err, (name, err)
        assert "LIBFIBER_SCHED_FEATURES" not in err, (name, err)
        assert "fiber_sched_features_set" not in err, (name, err)


@test
def hackbench_messages_add_up():
    recs = records(bench("hackbench", "--groups", "2", "--fds", "3",
                         "--loops", "20", "--datasize", "64", "--workers",
                         "2", "--json"))
    assert [r["mode"] for r in recs] == ["fiber", "threads"], recs
    for r in recs:
        m = r["metrics"]
        assert m["messages_sent"] == m["messages_received"] == 2 * 3 * 3 * 20
        assert m["seconds"] > 0 and m["messages_per_sec"] > 0


@test
def hackbench_spinners_report_wake_costs():
    recs = records(bench("hackbench", "--groups", "1", "--fds", "2",
                         "--loops", "20", "--workers", "4", "--spinners",
                         "2", "--spin-senders", "--fibers", "--json"))
    assert [r["mode"] for r in recs] == ["fiber"], recs
    p, m = recs[0]["params"], recs[0]["metrics"]
    assert p["spinners"] == 2 and p["spin_senders"] == 1, p
    assert m["messages_sent"] == m["messages_received"] == 2 * 2 * 20
    assert m["probes_per_wakeup"] >= 0 and m["core_scans_per_wakeup"] >= 0
    bench("hackbench", "--workers", "2", "--spin-senders", expect_rc=2)


@test
def schbench_counts_and_percentiles():
    recs = records(bench("schbench", "--messages", "2",
                         "--workers-per-message", "2", "--runtime", "2",
                         "--warmup", "0", "--think-us", "5", "--sleep-us",
                         "3", "--workers", "2", "--json"))
    assert [r["mode"] for r in recs] == ["fiber", "threads"], recs
    for r in recs:
        p, m = r["params"], r["metrics"]
        assert (p["warmup_s"], p["sleep_us"]) == (0, 3), p
        assert m["requests"] > 0 and m["requests_per_sec"] > 0, r
        # The stop wakeups are taken, not timed.
        assert m["wakeups"] >= m["requests"] + 4, r
        for what in ("wakeup", "request"):
            ordered(m, ["%s_%s_us" % (what, p) for p in
                        ("p50", "p75", "p90", "p95", "p99", "p99.5",
                         "p99.9", "max")])
            assert 0 <= m[what + "_min_us"] <= m[what + "_p50_us"], m
        # One RPS sample per whole second after the warm-up: 2 s, none.
        assert m["rps_samples"] == 2, m
        ordered(m, ["rps_min", "rps_p20", "rps_p50", "rps_p90", "rps_max"])
    bench("schbench", "-r", "2", "-w", "2", expect_rc=2)


@test
def create_join_record():
    recs = records(bench("create-join", "--fibers", "1000", "--json"))
    assert recs[0]["metrics"]["fibers_per_sec"] > 0, recs
    assert recs[0]["params"]["join"] == "join", recs
    # --wg: detached fibers and a wait group per batch; the slots they
    # fill are checked by the benchmark itself (exit 1 on a wrong one).
    recs = records(bench("create-join", "--fibers", "1000", "--batch",
                         "100", "--wg", "--workers", "2", "--json"))
    assert recs[0]["metrics"]["fibers_per_sec"] > 0, recs
    assert recs[0]["params"]["join"] == "wg", recs


@test
def tables_print():
    for name, args in (("pipe-pingpong", ["--loops", "500"]),
                       ("hackbench", ["--groups", "1", "--fds", "2",
                                      "--loops", "5"]),
                       ("schbench", ["--runtime", "1",
                                     "--workers-per-message", "1"])):
        out = bench(name, *args)
        assert out.startswith(name + ":") and "ratio threads/fiber" in out


@test
def short_options_as_the_tools_take_them():
    # rt-tests hackbench: -g groups, -f fds, -l loops, -s datasize,
    # -T threads, -p pipes.
    recs = records(bench("hackbench", "-g", "1", "-f", "2", "-l", "10",
                         "-s", "64", "-T", "-p", "--json"))
    assert [r["mode"] for r in recs] == ["threads"], recs
    assert recs[0]["params"]["groups"] == 1, recs
    assert recs[0]["params"]["fds"] == 2, recs
    assert recs[0]["params"]["loops"] == 10, recs
    assert recs[0]["params"]["datasize"] == 64, recs
    # perf bench sched pipe: -l loops, -T threads.
    recs = records(bench("pipe-pingpong", "-l", "300", "-T", "--json"))
    assert [r["mode"] for r in recs] == ["threads"], recs
    assert recs[0]["params"]["loops"] == 300, recs
    # perf's -l is the loop count of whatever runs: no cap for threads.
    recs = records(bench("pipe-pingpong", "-l", "50001", "-T", "--json"))
    assert recs[0]["metrics"]["roundtrips"] == 50001, recs
    # schbench: -m message threads, -t workers per message, -r runtime,
    # -c think time.
    recs = records(bench("schbench", "-m", "2", "-t", "1", "-r", "1",
                         "-c", "5", "--fibers", "--json"))
    p = recs[0]["params"]
    assert (p["messages"], p["workers_per_message"], p["runtime_s"],
            p["think_us"]) == (2, 1, 1, 5), p
    # Long and short spellings are the same option.
    a = records(bench("hackbench", "--groups", "1", "--fds", "2",
                      "--loops", "5", "--threads", "--json"))[0]["params"]
    b = records(bench("hackbench", "-g1", "-f2", "-l5", "-T",
                      "--json"))[0]["params"]
    assert a == b, (a, b)


@test
def options_refused_and_help():
    for name, args in (("hackbench", ["-P"]), ("hackbench", ["-g", "x"]),
                       ("hackbench", ["-g"]), ("schbench", ["-R", "100"]),
                       ("pipe-pingpong", ["-G", "a,b"]),
                       ("pipe-pingpong", ["--no-such-option"]),
                       ("create-join", ["stray"])):
        bench(name, *args, expect_rc=2)
    out = bench("hackbench", "-h")
    for want in ("-g, --groups G", "-f, --fds F", "-l, --loops L",
                 "-s, --datasize D", "-T, --threads", "-p, --pipe",
                 "(default 10)"):
        assert want in out, (want, out)
    out = bench("schbench", "--help")
    for want in ("-m, --messages M", "-t, --workers-per-message T",
                 "-r, --runtime S", "-c, --think-us U"):
        assert want in out, (want, out)
    assert "-l, --loops L" in bench("pipe-pingpong", "--help")


@test
def json_context():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LIBFIBER_")}
    env.update(LIBFIBER_CLOCK="monotonic", LIBFIBER_IDLE_POLL_US="7")
    proc = subprocess.run([os.path.join(BUILD, "bench", "create-join"),
                           "--fibers", "200", "--json"], env=env,
                          stdout=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0
    rec = records(proc.stdout)[0]
    c = rec["context"]
    assert c["host"] and c["kernel"] and c["arch"] and c["cpu_model"], c
    assert c["nr_cpus"] >= c["nr_cpus_allowed"] >= 1, c
    for key in ("loadavg_before", "loadavg_after"):
        assert len(c[key]) == 3 and all(v >= 0 for v in c[key]), c
    assert c["cpu_busy_others"] is None or 0 <= c["cpu_busy_others"] <= 1
    assert c["libfiber_version"] == VERSION, (c, VERSION)
    assert c["git_revision"] is None or len(c["git_revision"]) >= 7, c
    # The environment's clock is the runtime's, and it is recorded.
    assert c["sched_clock"] == "monotonic", c
    assert c["env"] == {"LIBFIBER_CLOCK": "monotonic",
                        "LIBFIBER_IDLE_POLL_US": "7"}, c
    assert c["topology_source"] == "machine" and c["topology"], c
    assert "WA_IDLE" in c["features"].split(), c
    assert c["command"][1:] == ["--fibers", "200", "--json"], c
    env["LIBFIBER_TOPOLOGY"] = "pack:1 l3:1 core:2 pu:1"
    proc = subprocess.run([os.path.join(BUILD, "bench", "create-join"),
                           "--fibers", "200", "--json"], env=env,
                          stdout=subprocess.PIPE, text=True, timeout=60)
    c = records(proc.stdout)[0]["context"]
    assert c["topology"] == "pack:1 l3:1 core:2 pu:1", c
    assert c["topology_source"] == "LIBFIBER_TOPOLOGY", c


@test
def json_escapes_bytes_that_are_not_utf8():
    # A topology file with a Latin-1 name: the record was not UTF-8
    # and no strict parser read it.  Each such byte is written as
    # \u00XX; good UTF-8 (the second e-acute) passes unchanged.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(os.fsencode(tmp), b"topo-\xe9-\xc3\xa9.xml")
        shutil.copy(os.path.join(SOURCE, "tests", "topologies", "n4.xml"),
                    path)
        env = {k: v for k, v in os.environb.items()
               if not k.startswith(b"LIBFIBER_")}
        env[b"LIBFIBER_TOPOLOGY"] = path
        proc = subprocess.run([os.path.join(BUILD, "bench", "create-join"),
                               "--fibers", "100", "--json",
                               "--features", "WA_IDLE"], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)
        assert proc.returncode == 0
        line = proc.stdout.decode("utf-8")  # strictly
        rec = records(line)[0]
        c = rec["context"]
        name = "topo-\u00e9-\u00e9.xml"
        assert c["topology"].endswith(name), c["topology"]
        assert c["env"]["LIBFIBER_TOPOLOGY"].endswith(name), c["env"]
        assert "\\u00e9-\u00e9.xml" in line, line


@test
def compare_json_is_strict():
    # probes_per_wakeup is 0 on both sides with one worker: its change,
    # mean, spread and interval were NaN, written as NaN tokens that
    # strict JSON readers refuse.  They are null, and --load reads them.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cmp")
        run_compare("--build", BUILD, "--bench", "hackbench", "--b",
                    "NO_WA_IDLE", "-k", "2", "--warmup", "0", "--seed", "1",
                    "--no-plot", "--out", out, "--", "-g", "1", "-f", "2",
                    "-l", "5", "--workers", "1")

        def refuse(token):
            raise ValueError("not JSON: " + token)

        with open(out + ".json") as f:
            data = json.load(f, parse_constant=refuse)
        row = [r for r in data["rows"] if r["metric"] == "probes_per_wakeup"]
        assert row and row[0]["change"] is None, row
        stdout, _ = run_compare("--load", out + ".json", "--no-plot")
        assert "probes_per_wakeup" in stdout, stdout


@test
def compare_reports_a_failed_run_with_bytes_not_utf8():
    # The run fails with the file's name, a byte that is not UTF-8 in
    # it, on stderr: compare said so instead of a UnicodeDecodeError.
    proc = subprocess.run(
        [sys.executable.encode(), COMPARE.encode(), b"--build",
         BUILD.encode(), b"--bench", b"create-join", b"-k", b"2",
         b"--warmup", b"0", b"--no-plot", b"--a-env",
         b"LIBFIBER_TOPOLOGY=/nonexistent/topo-\xe9.xml", b"--",
         b"--fibers", b"10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=120)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "compare: " in err, err


def run_compat(name, *args):
    out = bench(name, "--format", "compat", *args)
    assert "{" not in out, out
    return out


@test
def hackbench_compat_output():
    # What rt-tests' users parse: "Time: S" (mmtests, LKP: ^Time:).
    out = run_compat("hackbench", "-g", "2", "-f", "3", "-l", "10")
    assert re.search(r"^Running in fiber mode with 2 groups using 6 file "
                     r"descriptors each \(== 12 tasks\)$", out, re.M), out
    assert re.search(r"^Each sender will pass 10 messages of 100 bytes$",
                     out, re.M), out
    times = re.findall(r"^Time: (\d+\.\d{3})$", out, re.M)
    assert len(times) == 1, out  # the fiber mode only
    out = run_compat("hackbench", "-g", "1", "-f", "2", "-l", "5", "-T")
    assert "Running in threaded mode" in out, out
    assert len(re.findall(r"^Time: \d+\.\d{3}$", out, re.M)) == 1, out


@test
def pipe_pingpong_compat_output():
    # What perf bench sched pipe's users parse: total time, usecs/op,
    # ops/sec.
    out = run_compat("pipe-pingpong", "-l", "2000")
    assert out.startswith("# Running 'sched/pipe' benchmark:\n"), out
    assert re.search(r"^# Executed 2000 pipe operations between two "
                     r"fibers$", out, re.M), out
    total = float(re.search(r"^\s+Total time: (\d+\.\d{3}) \[sec\]$", out,
                            re.M).group(1))
    usecs = float(re.search(r"^\s+(\d+\.\d{6}) usecs/op$", out,
                            re.M).group(1))
    ops = int(re.search(r"^\s+(\d+) ops/sec$", out, re.M).group(1))
    # One pair: ops/sec and usecs/op are each other's inverse, and the
    # total time is the loops' (to its printed precision).
    assert abs(ops * usecs / 1e6 - 1) < 0.01, (ops, usecs)
    assert abs(total - usecs * 2000 / 1e6) <= 0.0011, (total, usecs)
    out = run_compat("pipe-pingpong", "-l", "500", "-T")
    assert "between two threads" in out, out


SCHBENCH_BLOCK = re.compile(
    r"^(Wakeup Latencies|Request Latencies) percentiles \(usec\) runtime "
    r"(\d+) \(s\) \((\d+) total samples\)\n"
    r"((?:\t[* ] \d+\.\dth: \d+ +\(\d+ samples\)\n)+)"
    r"\t  min=(\d+), max=(\d+)$", re.M)
SCHBENCH_RPS = re.compile(
    r"^RPS percentiles \(requests\) runtime (\d+) \(s\) \((\d+) total "
    r"samples\)\n((?:\t[* ] \d+\.\dth: \d+ +\(\d+ samples\)\n)*)"
    r"\t  min=(\d+), max=(\d+)$", re.M)
SCHBENCH_LINE = re.compile(r"\t([* ]) (\d+\.\d)th: (\d+) +\((\d+) samples\)")


@test
def schbench_compat_output():
    # What schbench's users parse (mmtests' extract-schbench, LKP): the
    # wakeup and request latency blocks, the RPS block, average rps.
    out = run_compat("schbench", "-m", "1", "-t", "2", "-r", "2", "-w",
                     "0", "-c", "5")
    blocks = SCHBENCH_BLOCK.findall(out)
    assert [b[0] for b in blocks] == ["Wakeup Latencies",
                                      "Request Latencies"], out
    for label, runtime, total, lines, lo, hi in blocks:
        assert runtime == "2" and int(total) > 0, out
        pct = SCHBENCH_LINE.findall(lines)
        assert [p[1] for p in pct] == ["50.0", "90.0", "99.0", "99.9"], out
        assert [p[0] for p in pct] == [" ", " ", "*", " "], out
        vals = [int(p[2]) for p in pct]
        assert int(lo) <= vals[0] and vals == sorted(vals) and \
            vals[-1] <= int(hi), out
        assert sum(int(p[3]) for p in pct) <= int(total), out
    rps = SCHBENCH_RPS.search(out)
    assert rps and rps.group(1) == "2" and rps.group(2) == "2", out
    pct = SCHBENCH_LINE.findall(rps.group(3))
    assert [p[1] for p in pct] == ["20.0", "50.0", "90.0"], out
    assert [p[0] for p in pct] == [" ", "*", " "], out
    assert sum(int(p[3]) for p in pct) == 2, out
    assert re.search(r"^average rps: \d+\.\d\d$", out, re.M), out


@test
def tables_have_min_max_and_samples():
    out = bench("pipe-pingpong", "-l", "500", "--latency")
    head = [l for l in out.splitlines() if l.startswith("mode ")][-1]
    assert head.split() == ["mode", "samples", "min", "p50", "p90", "p99",
                            "p99.9", "max"], out
    out = bench("schbench", "-t", "1", "-r", "1", "--fibers")
    for title in ("wakeup latency (us)", "request latency (us)"):
        head = [l for l in out.splitlines() if l.startswith(title)][0]
        assert head.split()[3:] == ["samples", "min", "p50", "p75", "p90",
                                    "p95", "p99", "p99.5", "p99.9",
                                    "max"], out
    assert re.search(r"^host \S+: .* CPUs.*; libfiber ", out, re.M), out


@test
def short_runs_warn():
    out, err = bench("hackbench", "-g", "1", "-f", "2", "-l", "5",
                     "--fibers", "--json", stderr=True)
    rec = records(out)[0]
    assert any(w.startswith("fiber: the measured run lasted")
               for w in rec["warnings"]), rec["warnings"]
    assert "hackbench: warning: fiber: the measured run lasted" in err, err
    out, err = bench("pipe-pingpong", "-l", "100", "--latency", "--fibers",
                     stderr=True)
    assert "samples leave 0 above p99.9" in err, err


@test
def installed_name_in_messages():
    # Installed as fiber-hackbench (a link), the program names itself so.
    with tempfile.TemporaryDirectory() as tmp:
        link = os.path.join(tmp, "fiber-hackbench")
        os.symlink(os.path.join(BUILD, "bench", "hackbench"), link)
        proc = subprocess.run([link, "-h"], stdout=subprocess.PIPE,
                              text=True, timeout=60)
        assert proc.stdout.startswith("Usage: fiber-hackbench "), proc.stdout
        proc = subprocess.run([link, "-P"], stderr=subprocess.PIPE,
                              text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        proc = subprocess.run([link, "-Q"], stderr=subprocess.PIPE,
                              text=True, timeout=60)
        assert "Try 'fiber-hackbench --help'." in proc.stderr, proc.stderr


COMPARE = os.path.join(SOURCE, "bench", "compare")


def compare_module():
    """bench/compare as a module, with its statistics in the standard
    library's versions (scipy or not)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("compare", COMPARE)
    spec = importlib.util.spec_from_loader("compare", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    mod.scipy_stats = None
    return mod


def run_compare(*args, timeout=300):
    proc = subprocess.run([sys.executable, COMPARE] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


@test
def compare_selftest():
    out, _ = run_compare("--selftest")
    assert out.rstrip().endswith("all passed"), out


@test
def compare_mann_whitney_known_values():
    c = compare_module()
    # Separated samples of 5: U = 0, exact p = 2 / C(10, 5).
    u, p, how = c.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert (u, how) == (0, "exact") and abs(p - 2 / 252) < 1e-12, (u, p)
    # The textbook example of scipy's documentation: U = 17, exact
    # p = 0.1111..., normal approximation p = 0.11134688653314041.
    males, females = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    u, p, how = c.mann_whitney(males, females)
    assert (u, how) == (17, "exact") and abs(p - 1 / 9) < 1e-12, (u, p)
    c.EXACT_MWU_MAX = 0
    u, p, how = c.mann_whitney(males, females)
    assert how == "asymptotic" and abs(p - 0.11134688653314041) < 1e-9, p
    # Ties: U counts them as halves.
    u, p, how = c.mann_whitney([1, 2, 2, 3], [2, 3, 4, 5])
    assert u == 2.5 and how == "asymptotic", (u, how)


@test
def compare_bootstrap_is_seeded():
    c = compare_module()
    a, b = [10.0, 10.5, 9.8, 10.2, 10.1], [11.0, 11.4, 10.9, 11.2, 11.6]
    one = c.bootstrap_ci("ns_per_op", a, b, 1000, c.random.Random(42))
    two = c.bootstrap_ci("ns_per_op", a, b, 1000, c.random.Random(42))
    other = c.bootstrap_ci("ns_per_op", a, b, 1000, c.random.Random(43))
    assert one == two, (one, two)
    assert one != other, (one, other)
    change = c.change_pct("ns_per_op", a, b)
    assert one[0] < change < one[1], (one, change)
    # The plan: warm-ups first, then rounds of A and B in a seeded order.
    p1 = c.plan(4, 1, c.random.Random(9))
    assert p1 == c.plan(4, 1, c.random.Random(9)), p1
    assert [w for _, w in p1] == [True] * 2 + [False] * 8, p1
    for i in range(0, len(p1), 2):
        assert sorted(s for s, _ in p1[i:i + 2]) == ["A", "B"], p1


def saved_compare(tmp, a, b, metric="ns_per_fiber"):
    """An OUT.json as compare writes it, with fixed values."""
    path = os.path.join(tmp, "fixed.json")
    side = {"features": "", "env": {}, "build": BUILD, "mode": "fiber",
            "contexts": [None] * len(a), "warnings": [],
            "others": [0.0] * len(a)}
    with open(path, "w") as f:
        json.dump({"bench": "create-join", "args": [], "k": len(a),
                   "warmup": 1, "seed": 1, "load_start": 0.0,
                   "A": dict(side, label="A", values={metric: a}),
                   "B": dict(side, label="B", values={metric: b})}, f)
    return path


@test
def compare_tables_and_cov_warning_on_fixed_data():
    with tempfile.TemporaryDirectory() as tmp:
        # A quiet shift of +20%: significant, no CoV warning.
        path = saved_compare(tmp, [100, 101, 99, 100.5, 99.5],
                             [120, 121, 119, 120.5, 119.5])
        out, _ = run_compare("--load", path, "--no-plot", "--out",
                             os.path.join(tmp, "o"))
        for stat in ("Amean", "Hmean", "Stddev", "CoeffVar", "Min", "Max"):
            assert re.search(r"^%s +ns_per_fiber " % stat, out, re.M), out
        # Lower is better for a time: B's gain is -20%, marked.
        assert re.search(r"^Amean +ns_per_fiber +100\.00 \(   0\.00%\) "
                         r"+120\.00 \* -20\.00%\*$", out, re.M), out
        assert re.search(r"^ns_per_fiber \(am\) +\+20\.0% ", out, re.M), out
        assert "CoV above" not in out, out
        # U of A: no A run above a B run.
        assert re.search(r" 0\.0 +0\.0079\*$", out, re.M), out
        # A noisy A: CoV 20% is named in a warning.
        path = saved_compare(tmp, [80, 100, 120, 80, 120],
                             [100, 101, 99, 100, 100])
        out, _ = run_compare("--load", path, "--no-plot", "--out",
                             os.path.join(tmp, "o"))
        warn = [l for l in out.splitlines() if "CoV above 5%" in l]
        assert warn and "ns_per_fiber (A 20.0%)" in warn[0], out


@test
def compare_table_prints_n_a_not_nan():
    # A's mean is 0: B's gain over it, A's harmonic mean and CoV have no
    # value, and the table printed "nan" for them.
    with tempfile.TemporaryDirectory() as tmp:
        path = saved_compare(tmp, [0, 0, 0, 0], [1, 2, 1, 2])
        out, _ = run_compare("--load", path, "--no-plot", "--out",
                             os.path.join(tmp, "o"))
        assert "nan" not in out.lower(), out
        assert re.search(r"^Amean +ns_per_fiber +0 \(   0\.00%\) +1\.50 "
                         r"[*(]    n/a [*)]$", out, re.M), out
        assert re.search(r"^CoeffVar +ns_per_fiber +n/a ", out, re.M), out


@test
def compare_runs_both_sides():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cmp")
        stdout, stderr = run_compare(
            "--a-build", BUILD, "--b-build", BUILD, "--bench",
            "create-join", "-k", "2", "--warmup", "1", "--seed", "3",
            "--b", "NO_WA_IDLE", "--b-env", "LIBFIBER_IDLE_POLL_US=5",
            "--out", out, "--", "--fibers", "500")
        assert "Amean     ns_per_fiber" in stdout, stdout
        assert "ns_per_fiber (am)" in stdout, stdout
        assert "fibers_per_sec (hm)" in stdout, stdout
        assert re.search(r"compare: run 6/6: [AB], \d+:\d\d elapsed, ETA",
                         stderr), stderr
        with open(out + ".json") as f:
            data = json.load(f)
        assert len(data["A"]["values"]["ns_per_fiber"]) == 2, data
        assert len(data["B"]["values"]["ns_per_fiber"]) == 2, data
        assert [w for _, w in data["order"]] == ["warm-up"] * 2 + \
            ["measured"] * 4, data["order"]
        # What each side ran with is in its records' context.
        a, b = data["A"]["contexts"][0], data["B"]["contexts"][0]
        assert "WA_IDLE" in a["features"].split(), a
        assert "NO_WA_IDLE" in b["features"].split(), b
        assert b["env"].get("LIBFIBER_IDLE_POLL_US") == "5", b
        assert "LIBFIBER_IDLE_POLL_US" not in a["env"], a
        if shutil.which("gnuplot"):
            assert os.path.getsize(out + ".png") > 1000


def main():
    print("1..%d" % len(results))
    failed = 0
    for i, fn in enumerate(results, 1):
        try:
            fn()
            print("ok %d - %s" % (i, fn.__name__))
        except Exception as e:  # report every failure, keep going
            failed += 1
            print("not ok %d - %s" % (i, fn.__name__))
            for line in str(e).splitlines():
                print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
