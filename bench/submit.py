"""``make bench-submit``: a long submission run against the simulator's rate limit, with and
without kills (about 20-25 min; not part of ``make bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import BENCH, RESULTS, machine, put_section, save
from scrape_pipeline.clock import SYSTEM_CLOCK
from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.runs.sqlite import SqliteJournal

KEY = "bench-submit-key"
LIMIT_PER_S = SimConfig().rate_limit_per_s
BURST = SimConfig().rate_limit_burst
ROUTES = {"async": "POST /v1/extract", "batch": "POST /v1/batch"}
BATCH_SIZE = 10
CLI = Path(sys.executable).with_name("scrape-pipeline")
TARGETS = {"fraction_of_limit": 0.9, "share_429": 0.02, "kill_wall_ratio": 1.15}
RESULTS_MD = BENCH / "RESULTS.md"
TEMPLATE = BENCH / "templates" / "submit.md"  # the section's prose, figures as fields
SUBMIT_JSON = RESULTS / "submit.json"
SETTLE_TIMEOUT_S = 120.0  # the simulator's batches settle within ~20 s of their POST


def start_simulator() -> SimulatorServer:
    """The simulator on the real clock, its default rate limit, and nothing else to do but
    the deliveries of the one subscription the batch kill run makes (``subscribe``)."""
    config = SimConfig(
        seed=19,
        api_keys=(KEY,),
        retryable_failure_rate=0.0,
        permanent_failure_rate=0.0,
    )
    return SimulatorServer(config, SYSTEM_CLOCK).start()


def lose_answers(server: SimulatorServer, share: float, rng: random.Random) -> None:
    """Lose ``share`` of POST answers after the API acted (a 502, as a failing gateway does)."""
    faults = server.sim.faults
    own = faults.lost_answer

    def lost_answer(route: str) -> Any:
        queued = own(route)
        if queued is not None:
            return queued
        return 502 if route in ROUTES.values() and rng.random() < share else None

    faults.lost_answer = lost_answer  # type: ignore[method-assign]


def subscribe(server: SimulatorServer) -> None:
    """A ``batch_completed`` subscription to a port nobody listens on: every delivery fails,
    and the delivery log keeps each attempt, the evidence a run without a stack reads."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again once the block ends
    with AdminClient(KEY, base_url=server.base_url) as client:
        client.create_webhook(f"http://127.0.0.1:{port}/hook", "batch_completed")


def command(mode: str, path: Path, journal: Path, name: str) -> list[str]:
    cmd = [str(CLI), "submit", str(path), "--mode", mode, "--journal", str(journal)]
    cmd += ["--run", name, "--json"]  # one JSON line per entry: adoptions are counted
    return cmd + (["--batch-size", str(BATCH_SIZE)] if mode == "batch" else [])


def in_doubt(journal: Path, name: str) -> int:
    """Entries of the run in doubt, read from its journal while no process writes it."""
    opened = SqliteJournal(journal)
    try:
        return len(opened.entries(name, [EntryState.IN_DOUBT]))
    finally:
        opened.close()


def settled(server: SimulatorServer, urls: list[str], timeout: float) -> float:
    """Wait until every batch the simulator made of ``urls`` has settled and its delivery was
    tried (the simulator's record); the seconds waited."""
    started, wanted = time.monotonic(), set(urls)
    while time.monotonic() - started < timeout:
        batches = {j["job_id"] for j in server.sim.truth_jobs("batch_item") if j["url"] in wanted}
        tried = {a["job_id"] for a in server.sim.delivery_attempts()}
        if batches <= tried:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def resolve(
    server: SimulatorServer,
    urls: list[str],
    cmd: list[str],
    env: dict[str, str],
    files: tuple[Any, Any],
) -> dict[str, Any]:
    """What an operator does once a run ended with entries in doubt: wait for its batches to
    settle, ``runs resolve`` (adopts what evidence names), ``--repost-in-doubt`` for the
    rest, and the same command again (its lines to ``files``: stdout, stderr). The counts,
    the last exit and the seconds waited."""
    out, err = files
    journal, name = Path(cmd[cmd.index("--journal") + 1]), cmd[cmd.index("--run") + 1]
    found: dict[str, Any] = {"in_doubt_after_submit": in_doubt(journal, name)}
    found.update(adopted_by_resolve=0, reposted=0, settle_wait_s=0.0, exit=None)
    if not found["in_doubt_after_submit"]:
        return found
    found["settle_wait_s"] = round(settled(server, urls, SETTLE_TIMEOUT_S), 2)
    runs = [str(CLI), "runs", "resolve", name, "--journal", str(journal)]
    subprocess.run(runs, env=env, stdout=subprocess.DEVNULL, stderr=err, check=False)
    left = in_doubt(journal, name)
    found["adopted_by_resolve"] = found["in_doubt_after_submit"] - left
    if left:
        reposted = subprocess.run(
            [*runs, "--repost-in-doubt"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        err.write(reposted.stderr)
        found["reposted"] = reposted.stderr.count("planned again:")
    found["exit"] = subprocess.run(cmd, env=env, stdout=out, stderr=err, check=False).returncode
    return found


def posted(server: SimulatorServer, urls: list[str]) -> int:
    counts = server.sim.submissions()
    return sum(1 for url in urls if counts.get(url, 0) > 0)


def one_run(
    server: SimulatorServer,
    mode: str,
    n: int,
    workdir: Path,
    *,
    kill_every: int = 0,
    rng: random.Random,
) -> dict[str, Any]:
    """Submit ``n`` fresh URLs in ``mode`` until the command ends on its own; the figures."""
    tag = f"{mode}-{'kills' if kill_every else 'clean'}"
    if kill_every and mode == "batch":
        # The clean run's batches settle first: their deliveries would be candidates that
        # every evidence read asks the API about (an account's other batches of the last
        # minutes are, outside the bench).
        clean = [f"https://bench.example.com/{mode}-clean/{i}" for i in range(n)]
        settled(server, clean, SETTLE_TIMEOUT_S)
        subscribe(server)
    urls = [f"https://bench.example.com/{tag}/{i}" for i in range(n)]
    path = workdir / f"{tag}.txt"
    path.write_text("\n".join(urls) + "\n")
    env = {**os.environ, API_KEY_ENV: KEY, "GEONODE_BASE_URL": server.base_url}
    cmd = command(mode, path, workdir / f"{tag}.sqlite3", tag)
    time.sleep(BURST / LIMIT_PER_S)  # every run starts with a full bucket
    before = server.sim.stats.snapshot()
    started = time.monotonic()
    kills, exits = 0, []
    stderr = (workdir / f"{tag}.stderr").open("w")
    stdout = (workdir / f"{tag}.jsonl").open("w")
    while True:
        process = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr)
        if kill_every:
            at = posted(server, urls) + rng.randint(kill_every // 2, kill_every * 3 // 2)
            while process.poll() is None and posted(server, urls) < at:
                time.sleep(0.05)
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
                continue
        exits.append(process.wait())
        break
    wall = time.monotonic() - started
    stdout.flush()
    stderr.flush()
    operator = resolve(server, urls, cmd, env, (stdout, stderr))
    complete = time.monotonic() - started
    stderr.close()
    stdout.close()
    if operator.get("exit") is not None:
        exits.append(operator.pop("exit"))
    after = server.sim.stats.snapshot()
    found = figures(server, mode, urls, (before, after), wall=wall, kills=kills, exits=exits)
    adopted = (workdir / f"{tag}.jsonl").read_text().count('"adopted": true')
    found.update(adopted_by_submit=adopted, **operator)
    found["complete_wall_s"] = round(complete, 2)
    return found


def figures(
    server: SimulatorServer,
    mode: str,
    urls: list[str],
    stats: tuple[dict[str, Any], dict[str, Any]],
    *,
    wall: float,
    kills: int,
    exits: list[int],
) -> dict[str, Any]:
    """One run's figures, from the simulator's record and its request counters around it."""
    before, after = stats

    def delta(section: str, key: str) -> int:
        return int(after[section].get(key, 0)) - int(before[section].get(key, 0))

    counts = server.sim.submissions()
    posts = delta("by_route", ROUTES[mode])
    requests = int(after["total"]) - int(before["total"])
    throttled = delta("by_status", "429")  # any route: an upper bound for the POSTs' 429s
    accepted = posts - throttled
    return {
        "mode": mode,
        "urls": len(urls),
        "batch_size": BATCH_SIZE if mode == "batch" else 1,
        "wall_s": round(wall, 2),
        "posts": posts,
        "posts_accepted": accepted,
        "requests": requests,
        "answered_429": throttled,
        "share_429": round(throttled / posts, 4) if posts else 0.0,
        "accepted_posts_per_s": round(accepted / wall, 2),
        "fraction_of_limit": round(accepted / wall / LIMIT_PER_S, 3),
        "requests_fraction_of_limit": round(requests / wall / LIMIT_PER_S, 3),
        "posted_twice": sum(1 for url in urls if counts.get(url, 0) > 1),
        "never_submitted": sum(1 for url in urls if counts.get(url, 0) == 0),
        "kills": kills,
        "exit_codes": exits,
    }


def _evidence_cells(run: dict[str, Any]) -> str:
    """The in-doubt columns: entries adopted by evidence (submit reruns + resolve), re-posted,
    and seconds to complete (operator steps included); blank for runs measured before them."""
    if "adopted_by_submit" not in run:
        return " | | "
    adopted = f"{run['adopted_by_submit']} + {run['adopted_by_resolve']}"
    return f"{adopted} | {run['reposted']} | {run['complete_wall_s']}"


def table(results: dict[str, Any]) -> str:
    lines = [
        "| mode | run | URLs | POSTs | wall s | POSTs/s (x limit) | 429 share | kills | "
        "posted twice | never submitted | wall vs clean | in doubt adopted (submit + resolve) "
        "| re-posted | s to complete |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in results["modes"]:
        for run in ("clean", "kills"):
            r = results["runs"][mode][run]
            ratio = results["runs"][mode].get("kill_wall_ratio") if run == "kills" else None
            lines.append(
                f"| {mode} | {'kill + 1 % lost' if run == 'kills' else 'clean'} | {r['urls']} | "
                f"{r['posts']} | {r['wall_s']} | {r['accepted_posts_per_s']} "
                f"({r['fraction_of_limit']}) | {r['share_429'] * 100:.2f} % | {r['kills']} | "
                f"{r['posted_twice']} | {r['never_submitted']} | "
                f"{'' if ratio is None else f'{ratio}x'} | {_evidence_cells(r)} |"
            )
    return "\n".join(lines)


def verdicts(results: dict[str, Any]) -> list[str]:
    """Each target against its figure, one line per mode: met, or missed by how much."""
    lines = []
    for mode in results["modes"]:
        runs = results["runs"][mode]
        clean, kills = runs["clean"], runs.get("kills")
        limit = TARGETS["kill_wall_ratio"]
        checks = [
            ("POSTs/s x limit", clean["fraction_of_limit"], ">=", TARGETS["fraction_of_limit"]),
            ("429 share", clean["share_429"], "<=", TARGETS["share_429"]),
        ]
        if kills is not None:
            checks += [
                ("posted twice", kills["posted_twice"], "<=", 0),
                ("never submitted", kills["never_submitted"], "<=", 0),
                ("wall with kills / clean", runs["kill_wall_ratio"], "<=", limit),
            ]
            if "complete_wall_ratio" in runs:
                checks.append(("to complete / clean", runs["complete_wall_ratio"], "<=", limit))
        said = []
        for name, value, op, target in checks:
            met = value >= target if op == ">=" else value <= target
            said.append(f"{name} {value} ({'met' if met else 'MISSED'}, target {op} {target})")
        lines.append(f"- {mode}: " + "; ".join(said))
    return lines


def measured(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """When and under which load each mode was measured (older files: one date for all)."""
    whole = {"date": results["date"], "load_before": results["load_before"]}
    whole["load_after"] = results["load_after"]
    saved = results.get("measured", {})
    return {mode: saved.get(mode, whole) for mode in results["modes"]}


def _stamp(results: dict[str, Any]) -> str:
    about = results.get("machine", machine())
    when = "; ".join(
        f"{mode} {m['date']} (load average {m['load_before'][0]} before, "
        f"{m['load_after'][0]} after)"
        for mode, m in measured(results).items()
    )
    on = f"{about['cpus']} CPUs, Python {about['python']}"
    return f"_Measured {when} on {on} (`make bench-submit`)._"


def section(results: dict[str, Any]) -> str:
    """The RESULTS.md section, between its markers."""
    return TEMPLATE.read_text().format_map(
        {
            **results,
            "stamp": _stamp(results),
            "urls": results["runs"][results["modes"][0]]["clean"]["urls"],
            "batch_size": BATCH_SIZE,
            "table": table(results),
            "verdicts": "\n".join(verdicts(results)),
        }
    )


def saved_results(source: Path = SUBMIT_JSON) -> dict[str, Any] | None:
    """The figures saved last, or None."""
    return json.loads(source.read_text()) if source.exists() else None


def merged(saved: dict[str, Any] | None, fresh: dict[str, Any]) -> dict[str, Any]:
    """``fresh`` with the saved runs of the modes it did not measure (and when they were);
    a saved file measured under other settings is not mixed in."""
    same = ("limit_per_s", "burst", "lost_share", "kill_every_urls")
    if saved is None or any(saved.get(k) != fresh[k] for k in same):
        return fresh
    kept = [m for m in saved["modes"] if m not in fresh["modes"]]
    if not kept:
        return fresh
    when = measured(saved)
    out = dict(fresh)
    out["modes"] = [m for m in ROUTES if m in kept or m in fresh["modes"]]
    out["runs"] = {**{m: saved["runs"][m] for m in kept}, **fresh["runs"]}
    out["measured"] = {**{m: when[m] for m in kept}, **fresh["measured"]}
    return out


def from_saved(source: Path = SUBMIT_JSON) -> str:
    """The section from the saved JSON (``bench.results_report``); "" when none saved."""
    if not source.exists():
        return ""
    return section(json.loads(source.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=20_000)
    parser.add_argument("--kill-every", type=int, default=2_000, help="URLs, about")
    parser.add_argument("--lost", type=float, default=0.01, help="share of POST answers lost")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["async", "batch"],
        choices=ROUTES,
        help="measure these modes only; the saved figures of the others are kept",
    )
    parser.add_argument("--workdir", help="keep the URL lists, journals and stderr here")
    parser.add_argument("--no-save", action="store_true", help="print only (a trial)")
    args = parser.parse_args(argv)
    rng = random.Random(19)
    load_before = os.getloadavg()
    server = start_simulator()
    runs: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
            workdir = Path(args.workdir or tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            for mode in args.modes:
                clean = one_run(server, mode, args.urls, workdir, rng=rng)
                print(f"{mode} clean: {clean}", flush=True)
                runs[mode] = {"clean": clean}
            lose_answers(server, args.lost, rng)
            for mode in args.modes:
                kills = one_run(
                    server, mode, args.urls, workdir, kill_every=args.kill_every, rng=rng
                )
                print(f"{mode} kills: {kills}", flush=True)
                runs[mode]["kills"] = kills
                clean_wall = runs[mode]["clean"]["wall_s"]
                runs[mode]["kill_wall_ratio"] = round(kills["wall_s"] / clean_wall, 3)
                runs[mode]["complete_wall_ratio"] = round(kills["complete_wall_s"] / clean_wall, 3)
    finally:
        server.stop()
    now = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    results = merged(
        saved_results() if not args.no_save else None,
        {
            **now,
            "limit_per_s": LIMIT_PER_S,
            "burst": BURST,
            "lost_share": args.lost,
            "kill_every_urls": args.kill_every,
            "modes": args.modes,
            "targets": TARGETS,
            "runs": runs,
            "measured": dict.fromkeys(args.modes, now),
        },
    )
    text = table(results)
    print(text)
    print("\n".join(verdicts(results)))
    if not args.no_save:
        save("submit", results, text, load_start=[round(x, 2) for x in load_before])
        saved = json.loads(SUBMIT_JSON.read_text())  # with its machine
        put_section(RESULTS_MD, "submit", section(saved))
        print(f"wrote {SUBMIT_JSON} and its section of {RESULTS_MD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
