"""The live page's HTML and JavaScript: one self-contained document, no external assets.

It polls the JSON endpoints once a second and builds the DOM with `textContent`
only (move texts and boards come from games and agents: never parsed as HTML).
Boards are drawn as SVG from the public text view where the game is known (chess
from its FEN, Go, connect four, tic-tac-toe; Kuhn and Leduc poker as cards dealt by
the chance steps, face down while hidden, i.e. until the match ends); any other game
shows only the text view (which stays under a picture, collapsible). The head-to-head
matrix is computed in the page from the finished two-seat matches of the list; the
rating chart draws the tournament's own Elo as the feed computed it over time (the
same numbers as the standings and the run report).
A ladder process (`spielbus ladder FILE.toml`) puts its leaderboard (`/api/ladder`) at the top,
full width, as the page's focus: one game at a time (tabs), rank, entry, games, rating with its
interval, move quality when the ladder reads the analyst's rows (`--analysis`: accuracy, mean
winning-chances loss and blunders per 100 moves, each over its 95% interval), budget class, status
(benched with the reason) and, for games of more than two players, openskill's mu and sigma,
sortable by any column, with the ladder's live matches beside it, the paced pairings and the
collusion audit under it. Every column fits at 1280 px
(tests/test_ladder_page.py measures it in headless Chromium).
While `spielbus analyst` runs on the bus, the match view shows its live verdicts (`move_verdict`):
an evaluation bar (seat 0's winning chances after the last judged move) and each move's class.
The selected match is kept in the URL fragment (`#match=<id>`), so a link to a
match can be shared. The board pictures are `games.pictures`, shared with the
human seat's page.
"""

from games.pictures import PICTURES_JS

_HEAD = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Spielbus live</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
  header { background: #22303c; color: #fff; padding: 8px 16px; display: flex; gap: 16px;
           align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  header select { margin-left: auto; }
  main { display: grid; grid-template-columns: minmax(320px, 1fr) minmax(420px, 2fr); gap: 12px;
         padding: 12px; }
  section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 8px 12px; }
  h2 { font-size: 15px; margin: 4px 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 2px 6px; border-bottom: 1px solid #eef0f2; vertical-align: top; }
  th { color: #5a6570; font-weight: 600; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  tr.match { cursor: pointer; }
  tr.match:hover { background: #eef4fb; }
  tr.match.selected { background: #dbe9f8; }
  .playing { color: #0b7a36; font-weight: 600; }
  .hidden { color: #8a939c; font-style: italic; }
  .forced, .fault { color: #b3261e; }
  pre#board { background: #10161c; color: #e8eef3; padding: 8px; border-radius: 4px; overflow: auto;
              font: 13px/1.25 ui-monospace, monospace; min-height: 3em; }
  #moves-box { max-height: 360px; overflow: auto; }
  #moves tr.current td { background: #fff3c4; }
  td.calls pre { white-space: pre-wrap; max-height: 240px; overflow: auto; margin: 2px 0;
                 font: 12px/1.3 ui-monospace, monospace; background: #f3f5f7; padding: 4px; }
  td.calls .call { border-top: 1px solid #eef0f2; padding: 2px 0; }
  td.calls .call.provider, td.calls .call.config, td.calls .call.filtered,
  td.calls .call.truncated { color: #b3261e; }
  #stepper button { font-size: 15px; min-width: 2.2em; }
  #stepper { margin: 6px 0; display: flex; gap: 6px; align-items: center; }
  .muted { color: #6b7580; }
  #left { display: flex; flex-direction: column; gap: 12px; }
  #picture svg { display: block; margin: 4px 0 8px; max-width: 100%; height: auto; }
  #h2h td.num { min-width: 3em; }
  #h2h td.self { background: #eef0f2; }
  #rating-chart svg { width: 100%; height: auto; }
  #rating-chart .legend { font-size: 12px; overflow-wrap: anywhere; }
  #eval { margin: 4px 0 8px; }
  #evalbar { height: 14px; background: #2b2f33; border-radius: 3px; overflow: hidden; }
  #evalfill { height: 100%; background: #eceff1; transition: width 0.3s; }
  .q-best, .q-good { color: #0b7a36; }
  .q-inaccuracy { color: #9a7400; }
  .q-mistake { color: #c25e00; }
  .q-blunder { color: #b3261e; font-weight: 600; }
  /* The ladder's leaderboard is the page's focus when a ladder runs: full width, live matches beside. */
  #ladder-top { display: grid; grid-template-columns: minmax(0, 1fr) minmax(200px, 280px); gap: 12px;
                padding: 12px 12px 0; }
  #ladder-top[hidden] { display: none; }
  /* Below 1200 px the quality columns need the whole width: the live matches go under the table. */
  @media (max-width: 1199px) { #ladder-top { grid-template-columns: minmax(0, 1fr); } }
  #ladder td.entry { overflow-wrap: anywhere; min-width: 8em; }
  #ladder td.num { white-space: nowrap; }
  #ladder th[data-key] { cursor: pointer; user-select: none; white-space: nowrap; }
  #ladder th[aria-sort="ascending"]::after { content: " \25B2"; }
  #ladder th[aria-sort="descending"]::after { content: " \25BC"; }
  #ladder.no-pl .pl { display: none; }
  #ladder.no-q .q { display: none; }
  #ladder td.q { white-space: pre; line-height: 1.15; }
  #ladder-games { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
  #ladder-games button { border: 1px solid #c9d0d7; background: #f3f5f7; border-radius: 4px;
                         padding: 2px 8px; }
  #ladder-games button[aria-selected="true"] { background: #22303c; color: #fff; }
  #ladder-live { list-style: none; padding: 0; margin: 0; }
  #ladder-live li { padding: 3px 0; border-bottom: 1px solid #eef0f2; cursor: pointer;
                    overflow-wrap: anywhere; }
  #ladder-live li:hover { background: #eef4fb; }
</style>
</head>
<body>
<header>
  <h1>Spielbus live</h1>
  <span id="status" class="muted">connecting…</span>
  <select id="tournament" title="tournament"></select>
</header>
<div id="ladder-top" hidden>
  <section id="ladder-box">
    <h2>Ladder <span id="ladder-note" class="muted"></span></h2>
    <div id="ladder-games" role="tablist" aria-label="games"></div>
    <table id="ladder"><thead><tr><th class="num" data-key="rank">#</th><th data-key="entry">entry</th>
      <th class="num" data-key="games">games</th><th class="num" data-key="bt">BT</th>
      <th class="num" data-key="bt_low" title="95% profile-likelihood interval">95% interval</th>
      <th class="num q" data-key="accuracy"
        title="move accuracy, percent (spielbus analyst), over its 95% interval">accuracy</th>
      <th class="num q" data-key="mean_loss"
        title="mean winning-chances loss per move, over its 95% interval">loss</th>
      <th class="num q" data-key="blunders"
        title="blunders per 100 moves, over its 95% interval">blunders</th>
      <th data-key="budget">budget</th><th data-key="status">status</th>
      <th class="num pl" data-key="pl_mu"
        title="openskill Plackett-Luce, games of more than two players">μ ± σ</th>
      </tr></thead><tbody></tbody></table>
    <ul id="ladder-paced" class="muted"></ul>
    <div id="ladder-audit-box" hidden>
      <h2>Collusion audit <span id="ladder-audit-note" class="muted"></span></h2>
      <table id="ladder-audit"><thead><tr><th>game</th><th>pairing</th><th class="num">games</th>
        <th class="num" title="first's mutual score">score</th>
        <th class="num" title="what their results against everyone else predict">expected</th>
        <th class="num" title="exact two-sided binomial test">p</th></tr></thead><tbody></tbody></table>
      <ul id="ladder-forfeits" class="fault"></ul>
    </div>
  </section>
  <section id="ladder-live-box">
    <h2>Live matches <span id="ladder-live-note" class="muted"></span></h2>
    <ul id="ladder-live"></ul>
  </section>
</div>
<main>
  <div id="left">
    <section>
      <h2>Standings <span id="standings-note" class="muted"></span></h2>
      <table id="standings"><thead><tr><th>agent</th><th class="num">played</th><th class="num">W</th>
        <th class="num">L</th><th class="num">D</th><th class="num">faults/100</th>
        <th class="num" title="moves that were random fallbacks for a failed LLM answer">fallbacks</th>
        <th class="num">calls/move</th><th class="num">tokens/move</th><th class="num">BT</th>
        <th class="num">Elo</th></tr></thead><tbody></tbody></table>
      <div id="fallback-warning" class="fault"></div>
    </section>
    <section id="seats-box" hidden>
      <h2>Seats for a person</h2>
      <p class="muted">Play as one of these agents: open its seat, with the token printed on the console
        that started it (no token, no seat: spectators cannot move for it).</p>
      <ul id="seats"></ul>
    </section>
    <section>
      <h2>Matches</h2>
      <table id="matches"><thead><tr><th>status</th><th>game</th><th>seats</th><th class="num">moves</th>
        <th>outcome</th></tr></thead><tbody></tbody></table>
    </section>
    <section>
      <h2>Head to head <span class="muted">(row's score against column: win 1, draw ½)</span></h2>
      <table id="h2h"><thead></thead><tbody></tbody></table>
    </section>
    <section>
      <h2>Rating over time <span class="muted">(the tournament's Elo, as the Standings show it, after
        each number of finished matches)</span></h2>
      <div id="rating-chart"></div>
    </section>
  </div>
  <section id="match">
    <h2 id="match-title">Select a match</h2>
    <div id="match-meta" class="muted"></div>
    <div id="picture"></div>
    <div id="stepper" hidden title="step through the finished match (keys: left and right arrows)">
      <button id="step-first" type="button" aria-label="start">&#x23EE;</button>
      <button id="step-prev" type="button" aria-label="previous move">&#x25C0;</button>
      <span id="step-label" class="muted"></span>
      <button id="step-next" type="button" aria-label="next move">&#x25B6;</button>
      <button id="step-last" type="button" aria-label="end">&#x23ED;</button>
    </div>
    <details id="text-view" open><summary class="muted">text view</summary><pre id="board"></pre></details>
    <div>Last move: <strong id="last-move">–</strong></div>
    <div id="eval" hidden title="seat 0's winning chances after the last judged move (spielbus analyst)">
      <span id="eval-label" class="muted"></span><div id="evalbar"><div id="evalfill"></div></div></div>
    <h2>Clocks</h2>
    <table id="clocks"><thead><tr><th>seat</th><th>agent</th><th class="num">moves</th>
      <th class="num">last (ms)</th><th class="num">total (s)</th></tr></thead><tbody></tbody></table>
    <h2>Faults</h2>
    <ul id="faults"></ul>
    <h2>Moves</h2>
    <div id="moves-box"><table id="moves"><thead><tr><th class="num">turn</th><th>seat</th><th>move</th>
      <th>quality</th><th class="num">ms</th><th class="num">tokens</th><th>LLM calls</th></tr></thead>
      <tbody></tbody></table></div>
  </section>
</main>
<script>
"use strict";
let selected = null;
let tournament = "";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) {
    const td = el("td", c[0], c[1] || "");
    tr.appendChild(td);
  }
  return tr;
}
function fill(tbody, rows) { tbody.replaceChildren(...rows); }
// A move's LLM calls, folded: a line of their classes and thinking size; open, each call's class,
// status, attempts, wait and tokens, its answer, and its thinking folded again. Folds stay as the
// reader left them across refreshes. The thinking of an imperfect-information game's move arrives
// only with the match's end (the referee sends it no earlier), so while it is played only sizes show.
const openFolds = new Set();
function fold(key, summary, cls) {
  const d = el("details", null, cls);
  d.open = openFolds.has(key);
  d.addEventListener("toggle", () => { if (d.open) openFolds.add(key); else openFolds.delete(key); });
  d.addEventListener("click", e => e.stopPropagation());
  d.appendChild(el("summary", summary));
  return d;
}
function callsCell(m, s) {
  const td = el("td", null, "calls");
  if (!s.calls || !s.calls.length) return td;
  const n = s.calls.length;
  const size = c => c.reasoning_chars !== null && c.reasoning_chars !== undefined
    ? c.reasoning_chars : (c.reasoning || "").length;
  const chars = s.calls.reduce((a, c) => a + size(c), 0);
  const rtok = s.calls.reduce((a, c) => a + (c.reasoning_tokens || 0), 0);
  const key = m.match_id + "/" + s.turn;
  const d = fold(key, n + (n > 1 ? " calls: " : " call: ") + s.calls.map(c => c.outcome).join(", ") +
    (chars ? " · thinking " + chars + " chars" : "") + (rtok ? ", " + rtok + " tokens" : ""), "calls");
  s.calls.forEach((c, i) => {
    const meta = [c.outcome, c.status !== null ? "HTTP " + c.status : null,
      c.finish_reason ? "finish " + c.finish_reason : null, c.attempts > 1 ? c.attempts + " attempts" : null,
      c.waited_s ? "waited " + c.waited_s.toFixed(1) + " s" : null,
      c.prompt_tokens !== null ? c.prompt_tokens + " + " + (c.completion_tokens || 0) + " tokens" +
        (c.tokens_estimated ? " (estimated)" : "") : null,
      c.cost_usd !== null && c.cost_usd !== undefined ? "$" + c.cost_usd.toFixed(6) : null];
    const box = el("div", null, "call " + c.outcome);
    box.appendChild(el("div", meta.filter(x => x !== null).join(" · "), "muted"));
    if (c.answer) box.appendChild(el("pre", c.answer, "answer"));
    if (c.reasoning) {
      const t = fold(key + "/" + i, "thinking (" + size(c) + " chars)", "thinking");
      t.appendChild(el("pre", c.reasoning, "thinking"));
      box.appendChild(t);
    } else if (size(c)) {
      box.appendChild(el("div", "thinking: " + size(c) + " chars, shown when the match ends", "muted"));
    }
    d.appendChild(box);
  });
  td.appendChild(d);
  return td;
}
async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}
function readHash() {
  const m = location.hash.match(/match=([A-Za-z0-9_-]+)/);
  selected = m ? m[1] : null;
}
function select(id) { location.hash = "match=" + id; }

"""

_TAIL = r"""// ---- Head to head and rating over time, from the finished matches of the list. -------------
function finishedPairs(matches) {
  return matches.filter(m => m.status === "ended" && m.seats.length === 2 && m.returns.length === 2)
    .sort((a, b) => a.updated - b.updated);
}
function drawH2H(matches) {
  const done = finishedPairs(matches);
  const agents = [...new Set(done.flatMap(m => m.seats))].sort();
  const score = {};
  for (const m of done) {
    const [a, b] = m.seats, [ra, rb] = m.returns;
    const sa = ra > rb ? 1 : ra < rb ? 0 : 0.5;
    for (const [x, y, s] of [[a, b, sa], [b, a, 1 - sa]]) {
      const k = x + "\u0000" + y;
      score[k] = score[k] || { pts: 0, n: 0 };
      score[k].pts += s; score[k].n += 1;
    }
  }
  const head = el("tr"); head.appendChild(el("th", ""));
  for (const a of agents) head.appendChild(el("th", a, "num"));
  document.querySelector("#h2h thead").replaceChildren(head);
  fill(document.querySelector("#h2h tbody"), agents.map(a => {
    const tr = el("tr"); tr.appendChild(el("th", a));
    for (const b of agents) {
      const s = score[a + "\u0000" + b];
      const td = el("td", a === b ? "" : s ? s.pts + "/" + s.n : "–", "num" + (a === b ? " self" : ""));
      if (s) td.title = a + " scored " + s.pts + " in " + s.n + " against " + b;
      tr.appendChild(td);
    }
    return tr;
  }));
}
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
function drawRatings(history) {
  const box = document.getElementById("rating-chart");
  if (!history || !history.length) { box.replaceChildren(el("span", "no ratings yet", "muted")); return; }
  const elo = {}, series = {};
  for (const p of history) {
    for (const [a, v] of Object.entries(p.elo)) {
      (series[a] = series[a] || []).push([p.matches, v]);
      elo[a] = v;
    }
  }
  const all = Object.values(series).flat().map(p => p[1]);
  const lo = Math.min(...all) - 10, hi = Math.max(...all) + 10, n = history[history.length - 1].matches;
  const W = 560, H = 220, L = 44, B = 22, T = 8, R = 12;
  const x = i => L + (W - L - R) * i / Math.max(1, n), y = v => T + (H - T - B) * (hi - v) / (hi - lo);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, "data-game": "ratings", role: "img" });
  root.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }));
  root.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" }));
  for (const v of [lo + 10, (lo + hi) / 2, hi - 10]) {
    root.appendChild(svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 10,
      fill: "#555" }, v.toFixed(0)));
  }
  root.appendChild(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", "font-size": 10,
    fill: "#555" }, "finished matches"));
  const legend = [];
  Object.keys(series).sort().forEach((a, k) => {
    const color = PALETTE[k % PALETTE.length];
    root.appendChild(svg("polyline", { points: series[a].map(p => x(p[0]) + "," + y(p[1])).join(" "),
      fill: "none", stroke: color, "stroke-width": 2, class: "series", "data-agent": a }));
    const [lx, ly] = series[a][series[a].length - 1];  // the latest value, seen even as a single point
    root.appendChild(svg("circle", { cx: x(lx), cy: y(ly), r: 3, fill: color, class: "latest" }));
    const item = el("div", "\u25A0 " + a + " " + elo[a].toFixed(0), "legend");
    item.style.color = color;
    legend.push(item);
  });
  box.replaceChildren(root, ...legend);
}


async function refreshList() {
  const q = tournament ? "?tournament=" + encodeURIComponent(tournament) : "";
  const data = await getJSON("/api/matches" + q);
  const sel = document.getElementById("tournament");
  const opts = ["", ...data.tournaments];
  if (sel.options.length !== opts.length || [...sel.options].some((o, i) => o.value !== opts[i])) {
    sel.replaceChildren(...opts.map(t => {
      const o = el("option", t || "all tournaments"); o.value = t; return o;
    }));
    sel.value = tournament;
  }
  const rows = data.matches.map(m => {
    const tr = row([
      [m.status, m.status === "playing" ? "playing" : ""],
      [m.game],
      [m.seats.join(" vs ")],
      [m.moves, "num"],
      [m.outcome ? m.outcome + (m.returns.length ? " " + m.returns.join(":") : "") : ""],
    ], "match" + (m.match_id === selected ? " selected" : ""));
    tr.dataset.id = m.match_id;
    tr.title = m.match_id;
    tr.addEventListener("click", () => select(m.match_id));
    return tr;
  });
  fill(document.querySelector("#matches tbody"), rows);
  drawH2H(data.matches);
  const playing = data.matches.filter(m => m.status === "playing").length;
  document.getElementById("status").textContent =
    playing + " playing, " + (data.matches.length - playing) + " finished";
}

async function refreshStandings() {
  const q = tournament ? "?tournament=" + encodeURIComponent(tournament) : "";
  const t = await getJSON("/api/standings" + q);
  const rating = {};
  for (const r of t.ratings || []) rating[r.agent] = r;
  const over = (t.standings || []).filter(s => s.fallback_rate > t.fallback_threshold);
  fill(document.querySelector("#standings tbody"), (t.standings || []).map(s => row([
    [s.fallback_rate > t.fallback_threshold ? s.agent + " (fallbacks)" : s.agent],
    [s.played, "num"], [s.wins, "num"], [s.losses, "num"], [s.draws, "num"],
    [s.faults_per_100_moves !== undefined ? s.faults_per_100_moves.toFixed(2) : "", "num"],
    [(100 * (s.fallback_rate || 0)).toFixed(1) + "%",
      "num" + (s.fallback_rate > t.fallback_threshold ? " fault" : "")],
    [(s.calls_per_move || 0).toFixed(2), "num"], [(s.tokens_per_move || 0).toFixed(0), "num"],
    [rating[s.agent] ? rating[s.agent].bt.toFixed(0) : "", "num"],
    [rating[s.agent] ? rating[s.agent].elo.toFixed(1) : "", "num"],
  ])));
  document.getElementById("fallback-warning").textContent = over.map(s =>
    "warning: " + s.fallbacks + " of " + s.moves + " moves of " + s.agent + " were fallbacks (over " +
    (100 * t.fallback_threshold).toFixed(0) + "%): its results say little about its LLM").join("\n");
  drawRatings(t.history);
  document.getElementById("standings-note").textContent =
    t.tournament ? "(" + t.tournament + ", " + t.matches + " finished)" : "";
}

// ---- Stepping through a finished match, move by move (the boards come from the server, which
// replays the record: /api/matches/<id>/boards). `k` is the number of steps applied.
let stepper = { match: null, boards: null, k: 0 };
async function loadBoards(id) {
  if (stepper.match === id) return;
  stepper = { match: id, boards: null, k: 0 };
  try {
    const b = await getJSON("/api/matches/" + id + "/boards");
    if (stepper.match === id) { stepper.boards = b.boards; stepper.k = b.boards.length - 1; }
  } catch (e) { /* a game that does not replay: the final board only */ }
}
function stepTo(k) {
  if (!stepper.boards) return;
  stepper.k = Math.max(0, Math.min(stepper.boards.length - 1, k));
  refreshMatch();
}
document.getElementById("step-first").addEventListener("click", () => stepTo(0));
document.getElementById("step-prev").addEventListener("click", () => stepTo(stepper.k - 1));
document.getElementById("step-next").addEventListener("click", () => stepTo(stepper.k + 1));
document.getElementById("step-last").addEventListener("click", () => stepTo(Infinity));
document.addEventListener("keydown", e => {
  if (!stepper.boards || e.target.tagName === "SELECT") return;
  if (e.key === "ArrowLeft") stepTo(stepper.k - 1);
  else if (e.key === "ArrowRight") stepTo(stepper.k + 1);
});

// The timer and a click can both refresh the match; an older answer that arrives last must not
// overwrite a newer one (the board would step back a move).
let matchRequests = 0;
async function refreshMatch() {
  if (!selected) return;
  const mine = ++matchRequests;
  let m;
  try { m = await getJSON("/api/matches/" + selected); } catch (e) { return; }
  if (mine !== matchRequests) return;
  if (m.status === "ended") {
    await loadBoards(m.match_id);
    if (mine !== matchRequests) return;
  } else if (stepper.match !== null) {
    stepper = { match: null, boards: null, k: 0 };
  }
  const stepping = m.status === "ended" && stepper.match === m.match_id && stepper.boards !== null;
  const k = stepping ? stepper.k : m.steps.length;
  document.getElementById("stepper").hidden = !stepping;
  if (stepping) {
    document.getElementById("step-label").textContent = "move " + k + " of " + m.steps.length;
    m = Object.assign({}, m, {
      observation: stepper.boards[k], steps: m.steps.slice(0, k), allSteps: m.steps,
      last: k > 0 ? m.steps[k - 1] : null,
    });
  }
  document.getElementById("match-title").textContent = m.game + ": " + m.seats.join(" vs ");
  document.getElementById("match-meta").textContent = m.match_id + " · " +
    (m.status === "playing" ? "in progress" : "ended: " + m.outcome +
     (m.returns.length ? " (" + m.returns.join(", ") + ")" : "")) + (m.error ? " · " + m.error : "");
  document.getElementById("board").textContent = m.observation || "(no public board)";
  const pic = picture(m);
  document.getElementById("picture").replaceChildren(...(pic ? [pic] : []));
  const last = m.last;
  document.getElementById("last-move").textContent = last
    ? (last.player >= 0 ? m.seats[last.player] : "chance") + ": " + last.text : "–";
  fill(document.querySelector("#clocks tbody"), m.clocks.map(c => row([
    [c.seat], [c.agent], [c.moves, "num"],
    [c.last_ms !== null ? c.last_ms.toFixed(1) : "", "num"], [(c.total_ms / 1000).toFixed(2), "num"],
  ])));
  document.getElementById("faults").replaceChildren(...m.faults.map(f =>
    el("li", "turn " + f.turn + ", " + f.agent + ": " + f.reason +
       (f.detail ? " (" + f.detail + ")" : ""), "fault")));
  // The analyst's verdicts (move_verdict, by turn): the bar shows the latest one up to the last shown step.
  const verdicts = m.verdicts || {};
  const lastTurn = m.last ? m.last.turn : -Infinity;
  let ev = null;
  for (const v of Object.values(verdicts)) {
    if (v.turn <= lastTurn && (ev === null || v.turn > ev.turn)) ev = v;
  }
  document.getElementById("eval").hidden = ev === null;
  if (ev !== null) {
    const pct = (ev.eval + 1) * 50;
    document.getElementById("evalfill").style.width = pct.toFixed(1) + "%";
    document.getElementById("eval-label").textContent = m.seats[0] + ": " + pct.toFixed(0) +
      "% winning chances after turn " + ev.turn + " (" + ev.reference +
      (ev.exact ? ", exact" : ", estimate") + ")";
  }
  const box = document.getElementById("moves-box");
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const rows = (m.allSteps || m.steps).map((s, i) => {
    const tr = row([
      [s.turn, "num"],
      [s.player >= 0 ? s.player + " " + (s.agent || m.seats[s.player]) : "chance"],
      [s.text + (s.forced ? " (forced)" : ""), s.hidden ? "hidden" : (s.forced ? "forced" : "")],
      verdicts[s.turn] ? [verdicts[s.turn].cls, "quality q-" + verdicts[s.turn].cls] : ["", "quality"],
      [s.latency_ms !== null ? s.latency_ms.toFixed(1) : "", "num"],
      [s.tokens !== null ? s.tokens : "", "num"],
    ], "move" + (s.hidden ? " hidden" : "") + (stepping && i === k - 1 ? " current" : ""));
    tr.appendChild(callsCell(m, s));
    if (stepping) tr.addEventListener("click", () => stepTo(i + 1));
    return tr;
  });
  fill(document.querySelector("#moves tbody"), rows);
  const current = box.querySelector("tr.current");
  if (stepping && current) current.scrollIntoView({ block: "nearest" });
  else if (atBottom && !stepping) box.scrollTop = box.scrollHeight;
}

// The ladder's leaderboard (`spielbus ladder FILE.toml` only; other processes answer {ladder: null}):
// one game at a time (tabs), sortable by any column (click a heading; again to reverse), with the
// ladder's matches being played beside it.
let ladder = null, ladderGame = null, ladderSort = { key: "rank", dir: 1 };
const ladderStatus = r => r.benched ? "benched: " + r.benched : r.playing ? "playing"
  : r.rated === false ? "in the pool, no result yet" : r.present ? "in the pool" : "away";
document.querySelectorAll("#ladder th[data-key]").forEach(th => th.addEventListener("click", () => {
  const key = th.dataset.key, text = ["entry", "budget", "status"].includes(key);
  ladderSort = ladderSort.key === key ? { key, dir: -ladderSort.dir }
    : { key, dir: text || key === "rank" ? 1 : -1 };
  drawLadder();
}));
function drawLadder() {
  const l = ladder;
  const games = [...new Set([...(l.games || []), ...l.rows.map(r => r.game)])];
  if (!games.includes(ladderGame)) ladderGame = games[0] || null;
  const tabs = document.getElementById("ladder-games");
  if ([...tabs.children].map(b => b.textContent).join("\u0000") !== games.join("\u0000")) {
    tabs.replaceChildren(...games.map(g => {
      const b = el("button", g); b.type = "button"; b.setAttribute("role", "tab");
      b.addEventListener("click", () => { ladderGame = g; drawLadder(); });
      return b;
    }));
  }
  [...tabs.children].forEach(b => b.setAttribute("aria-selected", String(b.textContent === ladderGame)));
  // Move quality flattened for sorting: figures, and their intervals under them (2 lines per cell).
  const rated = l.rows.filter(r => r.game === ladderGame)
    .map((r, i) => Object.assign({}, r, r.quality || { accuracy: null, mean_loss: null, blunders: null },
                                 { rank: i + 1 }));
  const waiting = l.unrated.map(r => Object.assign({}, r, { rank: null, games: 0, bt: null, bt_low: null,
    pl_mu: null, accuracy: null, mean_loss: null, blunders: null, rated: false, present: true }));
  const all = [...rated, ...waiting].map(r => Object.assign(r, { status: ladderStatus(r) }));
  const { key, dir } = ladderSort;
  all.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === null || x === undefined) return (y === null || y === undefined) ? 0 : 1;  // blanks last
    if (y === null || y === undefined) return -1;
    return (typeof x === "string" ? x.localeCompare(y) : x - y) * dir;
  });
  document.querySelectorAll("#ladder th[data-key]").forEach(th => {
    if (th.dataset.key === key) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  });
  const table = document.getElementById("ladder");
  table.classList.toggle("no-pl", !rated.some(r => r.players > 2));
  table.classList.toggle("no-q", !rated.some(r => r.quality));
  const q = (r, k, d) => r[k] === null ? ""
    : r[k].toFixed(d) + "\n" + r[k + "_low"].toFixed(d) + "\u2013" + r[k + "_high"].toFixed(d);
  fill(table.querySelector("tbody"), all.map(r => {
    const tr = row([
      [r.rank === null ? "" : r.rank, "num"], [r.entry, "entry"], [r.games, "num"],
      [r.bt === null ? "" : r.bt.toFixed(0), "num"],
      [r.bt_low === null ? "" : r.bt_low.toFixed(0) + " .. " + r.bt_high.toFixed(0), "num"],
      [q(r, "accuracy", 1), "num q"], [q(r, "mean_loss", 3), "num q"], [q(r, "blunders", 1), "num q"],
      [r.budget],
      [r.status, r.benched ? "fault" : r.playing ? "playing" : ""],
      [r.pl_mu === null ? "" : r.pl_mu.toFixed(1) + " ± " + r.pl_sigma.toFixed(1), "num pl"],
    ], "ladder-entry");
    tr.title = r.account ? "account " + r.account : "";
    return tr;
  }));
}
async function refreshLadder() {
  const l = await getJSON("/api/ladder");
  document.getElementById("ladder-top").hidden = !l.ladder;
  if (!l.ladder) return;
  ladder = l;
  drawLadder();
  document.getElementById("ladder-note").textContent =
    "(" + l.ladder + ": " + l.results + " results, " + l.pending + " in flight" +
    (l.hidden ? "; " + l.hidden + " idle or older entries not shown: spielbus ladder standings" : "") + ")";
  // The collusion report (referee/ladder/audit.py), recomputed once per log interval.
  const audit = l.audit;
  document.getElementById("ladder-audit-box").hidden = !audit;
  if (audit) {
    document.getElementById("ladder-audit-note").textContent = "(" + audit.tested +
      " pairings tested; flagged under " + audit.alpha + " / " + Math.max(1, audit.tested) + ")";
    fill(document.querySelector("#ladder-audit tbody"), audit.pairs.map(p => row([
      [p.game], [p.first + " vs " + p.second], [p.games, "num"], [p.score, "num"],
      [p.expected.toFixed(1), "num"], [p.p_value.toExponential(1), "num"]], "audit-pair")));
    fill(document.getElementById("ladder-forfeits"), audit.forfeits.map(f => el("li",
      f.account + " forfeited " + f.forfeits + " matches, all to " + f.opponent + " (" +
      f.other_matches + " matches against others)")));
  }
  // Pairings at the ladder file's pace ([pace]): not scheduled until the time shown.
  const cap = [l.pace.per_pairing_per_hour ? l.pace.per_pairing_per_hour + " per hour" : null,
    l.pace.per_pairing ? l.pace.per_pairing + " in all" : null].filter(x => x).join(", ");
  fill(document.getElementById("ladder-paced"), l.paced.map(p => el("li",
    "paced (" + cap + "): " + p.accounts.join(" vs ") + " in " + p.game + ", " + p.last_hour +
    " in the last hour, " + p.total + " in all; " + (p.until === null ? "no more games"
      : "next game after " + new Date(p.until * 1000).toLocaleTimeString()), "paced")));
  // The ladder's matches being played (its tournament name is the ladder's): click to watch one.
  const m = await getJSON("/api/matches?tournament=" + encodeURIComponent(l.ladder));
  const live = m.matches.filter(x => x.status === "playing");
  document.getElementById("ladder-live-note").textContent = "(" + live.length + ")";
  fill(document.getElementById("ladder-live"), live.map(x => {
    const li = el("li", x.game + ": " + x.seats.join(" vs ") + " · " + x.moves + " moves", "live-match");
    li.addEventListener("click", () => select(x.match_id));
    return li;
  }));
}

async function refreshSeats() {
  const s = await getJSON("/api/seats");
  document.getElementById("seats-box").hidden = !s.seats.length;
  fill(document.getElementById("seats"), s.seats.map(x => {
    const li = el("li"), a = el("a", "take the seat of " + x.agent);
    a.href = x.url; a.target = "_blank"; a.rel = "noopener";
    li.appendChild(a);
    return li;
  }));
}

async function tick() {
  try {
    await Promise.all([refreshList(), refreshStandings(), refreshMatch(), refreshSeats(), refreshLadder()]);
  } catch (e) {
    document.getElementById("status").textContent = "disconnected: " + e.message;
  }
}
document.getElementById("tournament").addEventListener("change", e => {
  tournament = e.target.value; tick();
});
window.addEventListener("hashchange", () => { readHash(); tick(); });
readHash();
tick();
setInterval(tick, 1000);
</script>
</body>
</html>
"""

PAGE = _HEAD + PICTURES_JS + _TAIL
