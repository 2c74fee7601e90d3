#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-sim - fiber-sim (bench/fiber-sim, doc/simulator.md) in short runs.

The experiments (--experiment NAME --quick) print their table twice
with the same bytes, in the documented shape, and the feature's off and
on runs differ in the counters the feature controls.

Usage: test-sim.py BUILD_ROOT SOURCE_ROOT

Every workload runs for a few virtual milliseconds on a small SMT
topology with --json: the object has the documented members, the
counters keep the runtime's accounting identities, and the same seed
gives the same bytes (a second seed for a run with random draws).  The
trace writes one decision per line, or Chrome JSON that parses.  Errors
in the command line exit 2 with a message.  Prints TAP; never looks at
the wall clock.
"""

import json
import os
import subprocess
import sys
import tempfile

BUILD, SOURCE = sys.argv[1], sys.argv[2]
SIM = os.path.join(BUILD, "bench", "fiber-sim")
TOPO = "pack:1 l3:2 core:2 pu:2"  # 8 workers, SMT, two LLCs
results = []

WORKLOADS = [
    "hackbench:groups=2,fds=4,loops=20",
    "schbench:m=2,t=4",
    "ebizzy:threads=6",
    "exec:workers=4",
    "exec:workers=4,affine=1",
    "pingpong:pairs=2,loops=500",
    "pingpong:pairs=3,loops=500,pin=0",
    "tbench:clients=4",
]

KEYS = {"schema", "tool", "topology", "topology_desc", "workers",
        "workload", "features", "seed", "asym_smt", "legacy_idle",
        "virtual_ns", "events", "result", "wakeup_latency_us",
        "probes_per_wakeup", "idle_core_hit_rate", "idle_worker_hit_rate",
        "llc_kept_share", "migrations", "balance", "counters",
        "utilisation", "cost"}


def sim(*args, expect_rc=0):
    proc = subprocess.run([SIM] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != expect_rc:
        raise AssertionError("%s: exit %d, expected %d; stderr: %s" %
                             (" ".join(args), proc.returncode, expect_rc,
                              proc.stderr.strip()))
    return proc.stdout, proc.stderr


def run(workload, *extra):
    out, _ = sim("--topology", TOPO, "--workload", workload,
                 "--duration-ms", "20", "--json", *extra)
    return out, json.loads(out)


def test(fn):
    results.append(fn)
    return fn


def check_shape(d):
    assert set(d) == KEYS, sorted(set(d) ^ KEYS)
    assert d["schema"] == 1 and d["tool"] == "fiber-sim", d
    assert d["workers"] == 8, d["workers"]
    assert len(d["utilisation"]) == 8
    assert all(0 <= u <= 1 for u in d["utilisation"]), d["utilisation"]
    lat = d["wakeup_latency_us"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= \
        lat["max"], lat
    for k in ("busy", "idle", "newly_idle"):
        b = d["balance"][k]
        assert b["pulls"] <= 32 * b["attempts"], b
    c = d["counters"]
    # The runtime's identity (tests/test-wake-runtime.c): every wakeup is
    # placed or handed to the worker that is still leaving the wakee.
    assert c["wake_placements"] + c["wake_on_worker"] == c["wakeups"], c
    # Every wakeup and creation is delivered once; active balance adds
    # deliveries of its own.
    delivered = c["wakelist_pushes"] + c["direct_enqueues"] + \
        c["local_enqueues"]
    assert delivered >= c["wakeups"] + c["creates"], c
    assert delivered <= c["wakeups"] + c["creates"] + c["lb_pushes"], c
    if c["wake_placements"]:
        ppw = c["wake_probes"] / c["wake_placements"]
        assert abs(d["probes_per_wakeup"] - ppw) <= 1e-5 * max(1, ppw), d
    else:
        assert d["probes_per_wakeup"] is None, d
    assert sum(c[k] for k in ("wake_target", "wake_prev", "wake_recent",
                              "wake_idle_sibling", "wake_idle_core",
                              "wake_scan_hit", "wake_scan_miss",
                              "wake_affinity",
                              "wake_pinned")) == c["wake_placements"], c
    assert c["exits"] <= c["creates"], c


def each_workload(w):
    def fn():
        out, d = run(w)
        check_shape(d)
        assert d["events"] > 0 and d["virtual_ns"] > 0, d
        assert d["result"]["value"] is not None, d["result"]
        again, _ = run(w)
        assert out == again, "the same seed gave other bytes"
    fn.__name__ = "workload_" + w.replace(":", "_").replace(",", "_") \
        .replace("=", "")
    return fn


for w in WORKLOADS:
    test(each_workload(w))


@test
def seeds_drive_the_random_draws():
    # NI_RANDOM draws from the workers' generators, which --seed sets:
    # another seed, other draws, other skips.  (schbench with more fibers
    # than workers, so that newly-idle balances pass the overload gate;
    # a short hackbench here draws nothing the seed decides.)
    w = "schbench:m=2,t=8"
    a, da = run(w, "--seed", "1")
    b, db = run(w, "--seed", "2")
    assert a == run(w, "--seed", "1")[0]
    assert da["seed"] == 1 and db["seed"] == 2
    del da["seed"], db["seed"]
    assert da != db, "--seed 1 and --seed 2 gave the same run"


@test
def features_apply():
    _, d = run("pingpong:pairs=2,loops=500,pin=0",
               "--features", "NO_TTWU_QUEUE")
    assert "NO_TTWU_QUEUE" in d["features"].split(), d["features"]
    assert d["counters"]["wakelist_pushes"] == 0, d["counters"]
    _, d = run("pingpong:pairs=2,loops=500,pin=0")
    assert d["counters"]["wakelist_pushes"] > 0, d["counters"]


@test
def trace_text_one_decision_per_line():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.txt")
        _, d = run("hackbench:groups=1,fds=4,loops=10", "--trace", path)
        lines = open(path).read().splitlines()
        assert lines[0].startswith("# t_ns"), lines[0]
        wakes = [l.split() for l in lines[1:] if l.split()[1] == "wake"]
        c = d["counters"]
        assert len(wakes) == c["wakeups"], (len(wakes), c["wakeups"])
        for f in wakes:
            assert len(f) == 9, f
            int(f[0]), int(f[2]), int(f[3]), int(f[4]), int(f[5])


@test
def trace_chrome_parses():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        run("schbench:m=1,t=2", "--trace", path, "--trace-format", "chrome")
        t = json.load(open(path))
        assert t["traceEvents"], t
        phases = {e["ph"] for e in t["traceEvents"]}
        assert phases <= {"X", "i"} and "X" in phases, phases


@test
def help_lists_workloads_and_costs():
    out, _ = sim("--help")
    for w in ("hackbench", "schbench", "ebizzy", "exec", "pingpong",
              "tbench", "line_llc", "futex_wake", "blocked_update"):
        assert w in out, w


@test
def bad_arguments_exit_2():
    for args in (["--topology", TOPO, "--workload", "nosuch"],
                 ["--topology", TOPO, "--workload", "hackbench:groups"],
                 ["--topology", TOPO, "--workload", "hackbench:bogus=1"],
                 ["--topology", TOPO, "--workload", "pingpong",
                  "--cost", "nosuch=1"],
                 ["--topology", TOPO, "--workload", "pingpong",
                  "--features", "NO_SUCH"],
                 ["--topology", "bad:topo", "--workload", "pingpong"],
                 ["--workload", "pingpong"]) + tuple(
                     # Hostile sizes and costs: a message, never a crash
                     # or a run that cannot end.
                     ["--topology", TOPO, "--duration-ms", "5",
                      "--workload", w] for w in (
                          "hackbench:groups=1e12", "hackbench:groups=-1",
                          "hackbench:groups=nan", "hackbench:groups=inf",
                          "hackbench:groups=1000,fds=1000",
                          "schbench:m=1e15", "ebizzy:threads=1e30",
                          "ebizzy:first=8", "exec:workers=1e9",
                          "tbench:clients=-5", "pingpong:pairs=1e10")) + \
                tuple(["--topology", TOPO, "--workload", "pingpong",
                       "--cost", c] for c in (
                           "smt2=nan", "switch=inf", "poll_us=1e300",
                           "smt2=0", "little=0", "smt_by_index=2")):
        _, err = sim(*args, expect_rc=2)
        assert err.startswith("fiber-sim:"), err


@test
def refuses_speeds_out_of_range():
    # smt1=1e-15 put a segment's end past 2^64 ns (an undefined
    # conversion) and the run never ended.
    for c in ("smt1=1e-15", "little=1e-300", "smt2=0.0009", "smt4=1001"):
        _, err = sim("--topology", "pu:2", "--workload", "ebizzy",
                     "--duration-ms", "5", "--cost", c, expect_rc=2)
        assert err.startswith("fiber-sim: --cost: %s: a speed is a number "
                              "from 0.001 to 1000" % c), err
    out, _ = sim("--topology", "pu:2", "--workload", "ebizzy",
                 "--duration-ms", "1", "--cost", "smt1=0.001,little=1000",
                 "--json")
    assert json.loads(out)["events"] > 0


@test
def a_run_that_cannot_advance_ends():
    # record=0 yielded at one instant for ever: --duration-ms never came.
    _, err = sim("--topology", "pu:2", "--workload", "ebizzy:record=0",
                 "--duration-ms", "1", expect_rc=2)
    assert err.startswith("fiber-sim: ebizzy: record=0: a record is more "
                          "than 0 us"), err
    # Zero work at zero cost, which the parameters allow: the same.
    _, err = sim("--topology", "pu:2", "--workload",
                 "tbench:server=0,client=0", "--cost",
                 "switch=0,pipe_op=0,select=0,drain=0,drain_fiber=0",
                 "--duration-ms", "1", expect_rc=1)
    assert err.startswith("fiber-sim: tbench:server=0,client=0: no "
                          "progress: "), err


@test
def refuses_a_pipe_that_holds_nothing():
    # pipe=0 took no message: every fiber blocked, and the run printed
    # "seconds nan" with exit 0.
    _, err = sim("--topology", TOPO, "--workload",
                 "hackbench:pipe=0,groups=1,fds=1,loops=1", expect_rc=2)
    assert err.startswith("fiber-sim: hackbench: pipe=0:"), err
    assert "at least 1 byte" in err, err


@test
def topology_errors_name_the_option():
    # "" simulated the host (its output depended on the machine), and a
    # bad topology was blamed on LIBFIBER_TOPOLOGY, which nobody set.
    _, err = sim("--topology", "", "--workload", "pingpong", expect_rc=2)
    assert err.startswith('fiber-sim: --topology "": empty; expected an '
                          'hwloc synthetic description'), err
    for topo in ("pack:0 pu:1", "/nonexistent/topology.xml"):
        _, err = sim("--topology", topo, "--workload", "pingpong",
                     expect_rc=2)
        assert err.startswith('fiber-sim: --topology="%s": not a ' % topo), \
            err
        assert "LIBFIBER_TOPOLOGY" not in err, err


@test
def refuses_a_key_given_twice():
    # pingpong:loops=5,loops=7 ran 5 loops: the second value was dropped.
    for w in ("pingpong:loops=5,loops=7", "tbench:req=1,clients=2,req=1"):
        _, err = sim("--topology", "pu:2", "--workload", w,
                     "--duration-ms", "1", expect_rc=2)
        key = w.split(":")[1].split("=")[0]
        assert err.startswith('fiber-sim: workload parameter "%s" given '
                              'twice in "%s"; expected each key once' %
                              (key, w.split(":")[1])), err


@test
def no_count_of_zero_and_no_nan():
    # exec:workers=0 ran no parent and printed "mean ... nan" with exit
    # 0; a run that measured nothing printed nan in the text summary.
    for w, msg in (("exec:workers=0", "exec: workers=0: expected at least "
                    "1 parent"), ("ebizzy:threads=0", "ebizzy: threads=0: "
                                  "expected at least 1 fiber")):
        _, err = sim("--topology", "pu:2", "--workload", w,
                     "--duration-ms", "2", expect_rc=2)
        assert err.startswith("fiber-sim: " + msg), err
    for w in ("exec:work=1e6", "pingpong:loops=1e6"):
        out, _ = sim("--topology", "pu:2", "--workload", w,
                     "--duration-ms", "1")
        assert "nan" not in out.lower(), out
        assert " n/a\n" in out.splitlines(True)[1], out
        out, _ = sim("--topology", "pu:2", "--workload", w,
                     "--duration-ms", "1", "--json")
        assert json.loads(out)["result"]["value"] is None, out


@test
def empty_window_has_no_percentiles():
    # schbench's window here is about 50 us and holds no wakeup; exec's
    # work=1e6 times no child.  Their percentiles printed as 0, a latency
    # nothing measured: they are n/a and null, next to a count of 0.
    for w, pcts, count in (
            ("schbench:warmup=0.94", ("p99_wakeup_us", "p50_wakeup_us",
                                      "p90_wakeup_us", "p99.9_wakeup_us",
                                      "p99_request_us"),
             ("wakeup_samples", "request_samples")),
            ("exec:work=1e6", ("mean_create_to_run_ns",
                               "p99_create_to_run_ns",
                               "p50_create_to_run_ns"),
             ("create_samples",)),
            ("pingpong:loops=1e6", ("ns_per_roundtrip", "p50_ns", "p99_ns"),
             ("roundtrip_samples",))):
        args = ("--topology", "pu:2", "--workload", w, "--duration-ms", "5")
        out, _ = sim(*args)
        lines = {ln.split()[0]: ln.split()[1:] for ln in
                 out.splitlines()[1:] if ln.strip()}
        for k in pcts:
            assert lines[k] == ["n/a"], (k, out)
        for k in count:
            assert lines[k] == ["0"], (k, out)
        out, _ = sim(*args, "--json")
        res = json.loads(out)["result"]
        assert res["value"] is None, res
        assert res["metric"] == pcts[0], res
        for k in pcts[1:]:
            assert k in res and res[k] is None, (k, res)
        for k in count:
            assert res[k] == 0, (k, res)


@test
def refuses_warmups_that_leave_nothing():
    # warmup=2 (or 1) measured nothing and gave a result of 0 or null
    # with exit 0; schbench's messages stop at 0.95 of the run.
    for w, lim in (("schbench:warmup=2", "0.95"),
                   ("schbench:warmup=0.95", "0.95"),
                   ("ebizzy:warmup=1", "1"), ("tbench:warmup=1", "1"),
                   ("exec:warmup=3", "1")):
        _, err = sim("--topology", "pu:2", "--workload", w,
                     "--duration-ms", "5", expect_rc=2)
        name, val = w.split(":")
        assert err.startswith("fiber-sim: %s: %s: expected a fraction of "
                              "the run from 0 to below %s" %
                              (name, val, lim)), err
    out, _ = sim("--topology", "pu:2", "--workload", "ebizzy:warmup=0.9",
                 "--duration-ms", "5", "--json")
    assert json.loads(out)["result"]["value"] > 0, out


BIG = "pack:2 numa:2 l3:8 core:32 pu:4"  # 4096 PUs, the most workers
TOO_BIG = "pack:17 core:241 pu:1"        # 4097 PUs


@test
def simulates_4096_workers():
    out, _ = sim("--topology", BIG, "--workload",
                 "hackbench:groups=2,fds=4,loops=5", "--duration-ms", "2",
                 "--json")
    d = json.loads(out)
    assert d["workers"] == 4096, d["workers"]
    assert len(d["utilisation"]) == 4096
    assert d["events"] > 0 and d["virtual_ns"] > 0, d
    c = d["counters"]
    assert c["wake_placements"] + c["wake_on_worker"] == c["wakeups"], c
    out, _ = sim("--help")
    assert "(at most 4096)" in out, out


@test
def refuses_more_than_4096_workers():
    _, err = sim("--topology", TOO_BIG, "--workload", "pingpong",
                 "--duration-ms", "1", expect_rc=2)
    assert err.startswith("fiber-sim: --topology \"%s\": 4097 PUs, more "
                          "than the 4096 workers" % TOO_BIG), err
    assert "--workers from 1 to 4096" in err, err
    _, err = sim("--topology", TOO_BIG, "--workload", "pingpong",
                 "--workers", "4097", expect_rc=2)
    assert "up to 4096" in err, err
    # what the message advises works
    out, _ = sim("--topology", TOO_BIG, "--workload", "pingpong",
                 "--workers", "16", "--duration-ms", "1", "--json")
    assert json.loads(out)["workers"] == 16


@test
def idle_path_work_delays_noticing():
    # A worker that ran out of work does its idle path's work (here a
    # blocked-load decay made to cost 50 us) before it polls: a wakeup
    # sent meanwhile waits for the end of that work.
    base = ["--topology", "pack:1 l3:1 core:8 pu:1", "--workload",
            "schbench:m=2,t=2", "--duration-ms", "50", "--json",
            "--features", "NO_BLOCKED_LOAD_RATELIMIT"]
    slow = json.loads(sim(*base, "--cost", "blocked_update=50000")[0])
    fast = json.loads(sim(*base)[0])
    assert slow["counters"]["blocked_decays"] > 1000, slow["counters"]
    assert slow["result"]["value"] >= 40, slow["result"]
    assert fast["result"]["value"] < 5, fast["result"]


EXPERIMENTS = ["sis_util", "wakelist", "asym", "numa_imb", "blocked_load"]
LABEL = 36  # the case column's width


def experiment(name):
    """The table of --experiment NAME --quick, as {label: row}; each row
    a dict of its columns, the counters as (off, on) pairs."""
    out, _ = sim("--experiment", name, "--quick")
    again, _ = sim("--experiment", name, "--quick")
    assert out == again, "%s: the same seed gave other bytes" % name
    lines = out.splitlines()
    assert lines[0].startswith("experiment %s: " % name), lines[0]
    head = [l for l in lines if l.startswith("case ")]
    assert len(head) == 1, lines
    at = lines.index(head[0])
    assert lines[1].lstrip().startswith("off: ") and \
        " on: " in lines[1], lines[1]
    assert "seed 1" in lines[1], lines[1]
    rows = {}
    for line in lines[at + 1:]:
        label, rest = line[:LABEL].strip(), line[LABEL:].split()
        assert label and len(rest) == 12, line
        unit, rb, ra, rc, so, sn, sc, agree = rest[:8]
        cnt = [float(x) for x in rest[8:]]
        for v in (rb, ra):
            assert v == "-" or float(v) > 0, line
        float(so), float(sn)
        assert agree in ("yes", "no", "n/a", "-"), line
        if rb == "-":
            assert agree == "n/a" and rc == "-", line
        else:
            assert rc.endswith("%"), line
        rows[label] = {"unit": unit, "off": float(so), "on": float(sn),
                       "agree": agree, "c": [(cnt[0], cnt[1]),
                                             (cnt[2], cnt[3])]}
    assert rows, out
    return rows


@test
def experiment_list_names_five():
    out, _ = sim("--experiment", "list")
    names = [l.split()[0] for l in out.splitlines()]
    assert names == EXPERIMENTS, names
    help_out, _ = sim("--help")
    for n in EXPERIMENTS:
        assert n in help_out, n


@test
def experiment_sis_util_cuts_core_scans():
    rows = experiment("sis_util")
    assert len(rows) == 5, rows
    for label, r in rows.items():
        # Core-limit cuts exist only with SIS_CORE_LIMIT.
        assert r["c"][1][0] == 0, (label, r)
    # An overloaded LLC with idle cores: the on run cuts idle-core scans
    # short, and its probes per wakeup change with it.
    ctl = [r for l, r in rows.items() if l.startswith("control")]
    assert len(ctl) == 1 and ctl[0]["c"][1][1] > 0, ctl
    assert ctl[0]["c"][0][0] != ctl[0]["c"][0][1], ctl


@test
def experiment_wakelist_hands_off_to_idle_workers():
    rows = experiment("wakelist")
    assert len(rows) == 4, rows
    for label, r in rows.items():
        (wl_off, wl_on), (direct_off, direct_on) = r["c"]
        # TTWU_QUEUE_IDLE: idle targets of the same LLC get the wakelist
        # instead of a direct enqueue under their lock.
        assert wl_on > wl_off, (label, r)
        assert direct_on < direct_off, (label, r)


@test
def experiment_asym_pulls_towards_low_threads():
    rows = experiment("asym")
    assert len(rows) == 2, rows
    for label, r in rows.items():
        assert r["c"][0][0] == 0, (label, r)  # no asym pulls when off
    r = rows["ebizzy 32 threads"]
    assert r["c"][0][1] > 0, r  # ... some when on,
    assert r["c"][1][1] > r["c"][1][0], r  # towards threads 0-1


@test
def experiment_numa_imb_caps_by_mask():
    rows = experiment("numa_imb")
    assert len(rows) == 3, rows
    # No mask, or one that leaves the local node's allowance whole: the
    # cap changes nothing.
    for label in ("unaffined, 8 workers", "affined 0..n-2, 8 workers"):
        r = rows[label]
        assert r["c"][0][0] == r["c"][0][1] and r["off"] == r["on"], r
    # One allowed worker per other LLC: fewer creations kept local.
    r = rows["affined 1 per 2 LLCs, 8 workers"]
    assert r["c"][0][1] < r["c"][0][0], r


@test
def experiment_blocked_load_rate_limits_decays():
    rows = experiment("blocked_load")
    assert len(rows) == 1, rows
    (own_off, own_on), _ = list(rows.values())[0]["c"]
    assert own_on < own_off, rows


@test
def experiment_bad_arguments_exit_2():
    for args in (["--experiment", "nosuch"],
                 ["--experiment", "sis_util", "--topology", TOPO],
                 ["--experiment", "asym", "--features", "ASYM_PACKING"],
                 ["--experiment", "asym", "--json"],
                 ["--experiment", ""],
                 ["--quick", "--topology", TOPO, "--workload", "pingpong"],
                 ["--topology", TOPO, "--duration-ms", "5", "--workload",
                  "exec:stride=2"],
                 ["--topology", TOPO, "--duration-ms", "5", "--workload",
                  "exec:affine=1,stride=99"],
                 ["--topology", TOPO, "--duration-ms", "5", "--workload",
                  "exec:affine=1,stride=-1"]):
        _, err = sim(*args, expect_rc=2)
        assert err.startswith("fiber-sim:"), (args, err)
        if "exec:" in " ".join(args):
            assert "stride" in err, (args, err)


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
