"""`spielbus selfplay table1`: the LLM Coaching paper's Table 1 by one command, at laptop scale.

From one coached dataset (`collect` then `coach`), it exports the CFVFP references (D_CFVFP,
eq. 11) and the coach's policies (D_coach, eq. 14), distils each into the embedded SmolLM2 with
`train` (GRPO, eq. 15), serves the base and both distilled GGUFs with the embedded llama.cpp
server, and plays a round robin of four agents on the dataset's game: `base`, `cfvfp_distilled`
and `coach_distilled` (ordinary `llm_policy` agents, `mode = "distribution"`, each on its own
server) and `cfvfp_table` (`policy_table` playing a CFVFP solution of the game, `solve`), the
yardstick for payoffs. `spielbus run` plays it; its ratings are the paper's Elo (appendix B.2,
Brownian win probability, K = 0.2) with a 95% bootstrap interval over the matches, beside
Bradley-Terry with its profile-likelihood interval.

Printed and written to OUT/table1.json and OUT/table1.md: per agent Elo, Bradley-Terry (95%
interval), the paper's Elo where it has one (Table 1: coach 1549 +- 32, CFVFP 1470 +- 31, its
Qwen2.5-32B after 50 GRPO steps of 128 samples each), mean payoff against `cfvfp_table`, the
share of answers the agent could not use (re-asked: `bad_outputs`), of sums it renormalised,
of moves played by the fallback, and of dominated moves with the mean chips a move gave up
against the table (`research.coach.dominated`: more than 0.5 chips below the best legal action's
expected payoff when both play the table elsewhere); and per trained model the training's
steps, seconds a step (wall clock and CPU) and mean reward at the first and last steps.

Every stage resumes: exports are rewritten, a model whose `train.json` shows the requested
steps is not trained again, `train` itself resumes from checkpoints; the tournament is played
again, unless `--rescore` asks for the table from the last finished one's records. Limits: SmolLM2-135M on a
shared CPU trains a few steps in the time the paper's run trains hundreds; the table measures
the pipeline and what these few steps change, not the paper's effect size. The game must be
small enough for `solve` (Leduc, Kuhn, a tiny-deck simplified Hold'em).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import agents.policy_dataset as ds
from agents.llm.server import EmbeddedServer, find_model
from bus.protocol import MatchRecord
from games.loader import load_game, parse_spec
from referee.config import RatingsConfig
from referee.ratings import elo
from research.coach.coach import SERVER_TIMEOUT_S
from research.coach.dominated import MARGIN, move_losses, table_values
from research.coach.export import export
from research.coach.train import TrainSettings, train

PAPER_ELO = {"coach_distilled": "1549 ± 32", "cfvfp_distilled": "1470 ± 31"}
PAPER_NOTE = (
    "The paper's Table 1 (SP-3, Qwen2.5-32B, 50 GRPO steps x 128 samples on 6,400 nodes, rated "
    "against its own field of models); its base Qwen2.5-32B rated 998 raw and 1539 after imitation "
    "learning (its Fig. 3). Our numbers come from a different model, field and scale: compare the "
    "ordering and the gaps, not the levels."
)
LLM_AGENTS = ("base", "cfvfp_distilled", "coach_distilled")
YARDSTICK = "cfvfp_table"


def _toml_value(v: Any) -> str:
    return json.dumps(v)  # JSON strings, numbers and booleans are valid TOML


def tournament_toml(
    game_label: str,
    urls: dict[str, str],
    table: Path,
    *,
    games_per_pairing: int,
    stack: float,
    seed: int,
    run_dir: Path,
) -> str:
    spec = parse_spec(game_label)
    params = ", ".join(f"{k} = {_toml_value(v)}" for k, v in sorted(spec.params.items()))
    lines = [
        "# Written by `spielbus selfplay table1`.",
        'name = "table1"',
        'format = "round_robin"',
        f"games_per_pairing = {games_per_pairing}",
        "concurrency = 1",
        "deadline_ms = 300000",  # a generous turn: three llama.cpp servers on a shared, loaded CPU
        f"seed = {seed}",
        f"run_dir = {_toml_value(str(run_dir))}",
        "allow_fallbacks = true",
        "",
        "[policy]",
        'kind = "random"',
        "",
        "[ratings]",
        'elo_k = "llm_coaching"',  # the paper's K = 0.2 (appendix B.2); the default is arena-scale
        f"stack = {stack}",
        "",
        "[[games]]",
        f"name = {_toml_value(spec.name)}",
        f"params = {{ {params} }}",
    ]
    for name, url in urls.items():
        lines += [
            "",
            f"[llm.{name}]",
            'backend = "openai"',
            'model = "smollm2"',
            f"base_url = {_toml_value(url)}",
            "timeout_s = 300",
            "options = { max_tokens = 32 }",
        ]
    for i, name in enumerate(LLM_AGENTS):
        lines += [
            "",
            f"[agents.{name}]",
            'kind = "llm_policy"',
            f"llm = {_toml_value(name)}",
            f'options = {{ mode = "distribution", seed = {i + 1} }}',
        ]
    lines += [
        "",
        f"[agents.{YARDSTICK}]",
        'kind = "policy_table"',
        'llm = "base"',
        f"options = {{ table = {_toml_value(str(table))}, "
        'source = "policy", fallback_policy = "uniform", seed = 9 }',
    ]
    return "\n".join(lines) + "\n"


def solve_table(game_label: str, out: Path, iterations: int) -> None:
    if out.exists():
        return
    tmp = out.with_name(out.name + ".partial")
    # `selfplay solve` as its own command: the CLI imports this module, so this one does not
    # import the CLI back (tests/test_import_cycles.py).
    solve = ["solve", game_label, "--iterations", str(iterations), "--out", str(tmp)]
    code = subprocess.run([sys.executable, "-m", "research.coach", *solve], check=False).returncode
    if code != 0:
        raise RuntimeError(f"solve {game_label} failed ({code})")
    tmp.replace(out)


def train_once(export_file: Path, out: Path, settings: TrainSettings, progress: bool) -> dict[str, Any]:
    summary = out / "train.json"
    if summary.exists() and (out / "model.gguf").exists():
        done = json.loads(summary.read_text(encoding="utf-8"))
        if done.get("settings", {}).get("steps") == settings.steps:
            return dict(done)
    train(export_file, out, settings, progress=progress)
    return dict(json.loads(summary.read_text(encoding="utf-8")))


def read_table(path: Path, game: str) -> dict[str, dict[int, float]]:
    """A `solve` table as information set -> {action id: probability}."""
    return {
        row.infoset: {a.id: p for a, p in zip(row.legal, row.policy, strict=True)}
        for row in ds.iter_rows(path, ds.TableRow, game)
    }


def agent_stats(
    records: list[MatchRecord], values: dict[str, dict[int, float]] | None = None
) -> dict[str, dict[str, float]]:
    """Per agent: moves, the shares of re-asked answers, renormalised sums and fallback moves, the
    mean payoff against the yardstick and, given the table's action values
    (`research.coach.dominated`), the share of dominated moves and the mean chips a move gave up."""
    moves: dict[str, int] = defaultdict(int)
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    payoff: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        for m in rec.moves:
            if m.agent is None:
                continue
            moves[m.agent] += 1
            extra = (m.stats.model_extra or {}) if m.stats else {}
            for key in ("bad_outputs", "renormalized"):
                v = extra.get(key)
                if isinstance(v, int | float):
                    counts[m.agent][key] += float(v)
            if extra.get("fallback"):
                counts[m.agent]["fallback"] += 1
        if YARDSTICK in rec.seats and len(rec.returns) == len(rec.seats):
            for seat, name in enumerate(rec.seats):
                if name != YARDSTICK:
                    payoff[name].append(rec.returns[seat])
    out: dict[str, dict[str, float]] = {}
    for name, n in moves.items():
        c = counts[name]
        out[name] = {
            "moves": n,
            "bad_output_rate": c["bad_outputs"] / n,
            "renormalized_rate": c["renormalized"] / n,
            "fallback_rate": c["fallback"] / n,
            "payoff_vs_cfvfp_table": sum(payoff[name]) / len(payoff[name]) if payoff[name] else float("nan"),
            "matches_vs_cfvfp_table": len(payoff[name]),
        }
    if values is not None and records:
        losses = move_losses(records, load_game(records[0].game), values).summary(MARGIN)
        for name, row in out.items():
            row.update(losses.get(name, {}))
    return out


def _rate(s: dict[str, float], key: str, fmt: str) -> str:
    v = s.get(key)
    return "-" if v is None or v != v else format(v, fmt)


def _elo_interval(r: dict[str, Any]) -> str:
    return f" ({r['elo_low']:.0f}-{r['elo_high']:.0f})" if "elo_low" in r else ""


def render(result: dict[str, Any]) -> str:
    rows = [
        "| agent | Elo (ours, 95% interval) | Bradley-Terry (95% interval) | Elo (paper) | "
        "payoff vs cfvfp_table | re-asked answers | renormalised | fallback moves | dominated moves | "
        "chips given up a move |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["ratings"]:
        s = result["stats"].get(r["agent"], {})
        pay = s.get("payoff_vs_cfvfp_table", float("nan"))
        rows.append(
            f"| {r['agent']} | {r['elo']:.0f}{_elo_interval(r)} | "
            f"{r['bt']:.0f} ({r['bt_low']:.0f}-{r['bt_high']:.0f}) | "
            f"{PAPER_ELO.get(r['agent'], '-')} | "
            + (f"{pay:+.3f} ({s.get('matches_vs_cfvfp_table', 0)})" if pay == pay else "-")
            + f" | {s.get('bad_output_rate', 0):.1%} | {s.get('renormalized_rate', 0):.1%} | "
            f"{s.get('fallback_rate', 0):.1%} | {_rate(s, 'dominated_rate', '.1%')} | "
            f"{_rate(s, 'mean_loss_vs_best', '.3f')} |"
        )
    rows += [
        "",
        "| model | steps | s/step (wall) | CPU s/step | reward first -> last | tensors merged |",
        "|---|---|---|---|---|---|",
    ]
    for name, t in result["training"].items():
        walls = t.get("step_seconds") or []
        cpus = t.get("step_cpu_seconds") or []
        rew = t.get("rewards") or []
        rows.append(
            f"| {name} | {t['settings']['steps']} | "
            f"{(sum(walls) / len(walls)) if walls else float('nan'):.1f} | "
            f"{(sum(cpus) / len(cpus)) if cpus else float('nan'):.1f} | "
            f"{(f'{rew[0]:.3f} -> {rew[-1]:.3f}') if rew else '-'} | {t.get('replaced_tensors', 0)} |"
        )
    rows += [
        "",
        f"Game: {result['game']}; {result['matches']} matches. Dominated: a move whose expected payoff "
        f"against the CFVFP table, at its information set, is more than {MARGIN} chips below the best "
        "legal action's; chips given up: that gap, averaged over the agent's moves "
        f"(research/coach/dominated.py). Elo intervals: {ELO_BOOTSTRAP} bootstrap resamples of the "
        f"matches. {PAPER_NOTE}",
    ]
    return "\n".join(rows)


def table1(
    data: Path,
    out: Path,
    settings: TrainSettings,
    *,
    games_per_pairing: int = 10,
    solve_iterations: int = 1000,
    seed: int = 0,
    progress: bool = True,
    server_timeout: float = SERVER_TIMEOUT_S,
) -> dict[str, Any]:
    meta, _ = ds.read_nodes(data)
    out.mkdir(parents=True, exist_ok=True)
    exports = {
        "cfvfp_distilled": out / "export-reference-trl.jsonl",
        "coach_distilled": out / "export-coach-trl.jsonl",
    }
    export(data, exports["cfvfp_distilled"], fmt="trl", source="reference")
    export(data, exports["coach_distilled"], fmt="trl", source="coach")
    training = {name: train_once(path, out / name, settings, progress) for name, path in exports.items()}
    table = out / "cfvfp-table.jsonl"
    solve_table(meta.game, table, solve_iterations)
    models = {
        "base": find_model(),
        "cfvfp_distilled": out / "cfvfp_distilled" / "model.gguf",
        "coach_distilled": out / "coach_distilled" / "model.gguf",
    }
    servers = {
        name: EmbeddedServer(model_path=path, n_threads=1, log_path=out / f"{name}-server.log")
        for name, path in models.items()
    }
    stack = float(parse_spec(meta.game).params.get("stack", 100))
    try:
        for s in servers.values():
            s.start(timeout_s=server_timeout)
        toml = out / "table1.toml"
        runs = out / "runs"
        toml.write_text(
            tournament_toml(
                meta.game,
                {n: s.base_url for n, s in servers.items()},
                table,
                games_per_pairing=games_per_pairing,
                stack=stack,
                seed=seed,
                run_dir=runs,
            ),
            encoding="utf-8",
        )
        before = set(runs.glob("*")) if runs.exists() else set()
        t0 = time.monotonic()
        cmd = [
            sys.executable,
            "-m",
            "spielbus.cli",
            "run",
            str(toml),
            "--metrics-port",
            "off",
            "--web-port",
            "off",
        ]
        if not progress:
            cmd.append("--quiet")
        code = subprocess.call(cmd)
        play_s = time.monotonic() - t0
    finally:
        for s in servers.values():
            s.stop()
    new = sorted(set(runs.glob("*")) - before)
    if code != 0 or not new:
        raise RuntimeError(f"the tournament failed (spielbus run exited {code}); see {toml}")
    return summarise(data, out, new[-1], training, round(play_s, 1))


ELO_BOOTSTRAP = 200  # resamples behind the Elo's 95% interval


def elo_intervals(records: list[MatchRecord], agents: list[str], rounds: int = ELO_BOOTSTRAP,
                  seed: int = 0) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Per agent the 95% percentile-bootstrap interval of its Elo (the paper's K = 0.2, appendix B.2):
    the matches resampled with replacement, each resample rated in the schedule's order. The paper
    prints its Elo with a +- (a 95% interval, its Fig. 3) without saying how it is computed."""
    cfg = RatingsConfig.model_validate({"elo_k": "llm_coaching"})
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {a: [] for a in agents}
    for _ in range(rounds if records else 0):
        sample = [records[rng.randrange(len(records))] for _ in records]
        for agent, value in elo(sample, cfg, agents).items():
            draws[agent].append(value)
    out = {}
    for agent, xs in draws.items():
        if xs:
            xs.sort()
            out[agent] = (xs[int(0.025 * (len(xs) - 1))], xs[math.ceil(0.975 * (len(xs) - 1))])
    return out


def summarise(
    data: Path, out: Path, run_folder: Path, training: dict[str, Any], play_s: float | None
) -> dict[str, Any]:
    """Table 1 from a finished tournament's records; writes OUT/table1.json and OUT/table1.md."""
    meta, _ = ds.read_nodes(data)
    ratings = json.loads((run_folder / "ratings.json").read_text(encoding="utf-8"))
    records = [
        MatchRecord.model_validate_json(line)
        for line in (run_folder / "matches.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    values = table_values(load_game(meta.game), read_table(out / "cfvfp-table.jsonl", meta.game))
    intervals = elo_intervals(records, [r["agent"] for r in ratings])
    for r in ratings:
        if r["agent"] in intervals:
            r["elo_low"], r["elo_high"] = intervals[r["agent"]]
    result = {
        "game": meta.game,
        "data": str(data),
        "run": str(run_folder),
        "matches": len(records),
        "play_seconds": play_s,
        "ratings": ratings,
        "stats": agent_stats(records, values),
        "dominated_margin": MARGIN,
        "training": training,
        "paper": {"elo": PAPER_ELO, "note": PAPER_NOTE},
    }
    (out / "table1.json").write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "table1.md").write_text(render(result) + "\n", encoding="utf-8")
    return result


def rescore(data: Path, out: Path) -> dict[str, Any]:
    """Table 1 again from OUT's last finished tournament and trainings, without training or
    playing (`table1 --rescore`: a tournament costs an hour here, its records keep what it showed)."""
    finished = sorted(p.parent for p in (out / "runs").glob("*/ratings.json"))
    if not finished:
        raise RuntimeError(f"{out / 'runs'}: no finished tournament to rescore (run table1 first)")
    training = {}
    for name in ("cfvfp_distilled", "coach_distilled"):
        summary = out / name / "train.json"
        if not summary.exists():
            raise RuntimeError(f"{summary}: missing (run table1 first)")
        training[name] = json.loads(summary.read_text(encoding="utf-8"))
    before = out / "table1.json"
    play_s = json.loads(before.read_text(encoding="utf-8")).get("play_seconds") if before.exists() else None
    return summarise(data, out, finished[-1], training, play_s)
