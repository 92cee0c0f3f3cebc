"""The human seat's page: one self-contained document, no external assets.

It reads the seat token from the URL fragment (`#token=...`; a form asks for it when it is
missing), polls `/api/seat` twice a second with the token in the `X-Seat-Token` header, and
shows each turn waiting for the player: the seat's own view (the board drawn by the shared
pictures where the game has one, the text view always), the clock left, the refusal reason of a
retried turn, the steps the seat may know, and the legal moves as buttons. A move is chosen by
a button or by clicking the board (`data-cell` keys; a chess move is two clicks, from-square
then to-square; when several moves share the clicks, such as the four promotions, they are
marked in the list). A seat playing Black in chess sees the board from Black's side. Every text
is set with `textContent`, never parsed as HTML.
"""

from games.pictures import PICTURES_JS

_HEAD = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Spielbus seat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
  header { background: #22303c; color: #fff; padding: 8px 16px; display: flex; gap: 16px;
           align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  main { padding: 12px; display: grid; gap: 12px;
         grid-template-columns: minmax(360px, 2fr) minmax(260px, 1fr); }
  section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 8px 12px; }
  h2 { font-size: 15px; margin: 4px 0 8px; }
  .muted { color: #6b7580; }
  .retry, .error { color: #b3261e; }
  .clock { font-variant-numeric: tabular-nums; font-weight: 600; }
  .clock.low { color: #b3261e; }
  #legal button { margin: 2px; padding: 4px 10px; font: inherit; cursor: pointer; }
  #legal button.candidate { background: #ffe08a; border-color: #b38600; }
  #picture svg { display: block; margin: 4px 0 8px; max-width: 100%; height: auto; }
  #picture [data-cell] { cursor: pointer; }
  #picture .chosen { stroke: #0b7a36; stroke-width: 4; }
  pre { background: #10161c; color: #e8eef3; padding: 8px; border-radius: 4px; overflow: auto;
        font: 13px/1.25 ui-monospace, monospace; }
  #tabs button { margin-right: 4px; }
  #tabs button.on { font-weight: 700; }
  ol#history { max-height: 240px; overflow: auto; }
  #login { display: none; }
</style>
</head>
<body>
<header><h1>Spielbus seat <span id="agent"></span></h1>
  <span id="status" class="muted">connecting…</span></header>
<main>
  <section id="login">
    <h2>This seat needs its token</h2>
    <p class="muted">Whoever started the seat has it: the console of <code>spielbus run</code> (or of
      <code>spielbus agent human</code>) prints the seat's address with the token.</p>
    <form id="login-form"><input id="token-input" size="40" autocomplete="off" placeholder="seat token">
      <button>Take the seat</button></form>
  </section>
  <section id="play">
    <div id="tabs"></div>
    <h2 id="title">Waiting for your turn…</h2>
    <div id="meta" class="muted"></div>
    <div id="retry" class="retry"></div>
    <div>Clock: <span id="clock" class="clock">–</span></div>
    <div id="picture"></div>
    <h2>Your moves</h2>
    <form id="filter-form"><input id="filter" size="30" autocomplete="off"
      placeholder="type to find a move (Enter plays the only match)"></form>
    <div id="legal"></div>
    <div id="more" class="muted"></div>
    <div id="sent" class="muted"></div>
    <details open><summary class="muted">your view (text)</summary><pre id="view"></pre></details>
  </section>
  <section>
    <h2>Steps you know</h2>
    <ol id="history"></ol>
    <h2>Your matches</h2>
    <ul id="playing"></ul>
    <h2>Results</h2>
    <ul id="results"></ul>
  </section>
</main>
<script>
"use strict";
"""

_TAIL = r"""
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function token() {
  const m = location.hash.match(/token=([A-Za-z0-9_-]+)/);
  return m ? m[1] : null;
}
let current = null;   // key of the turn shown
let shown = null;     // that turn as last drawn
let clicks = [];      // board cells clicked so far for it
let busy = false;

async function api(path, body) {
  const r = await fetch(path, {
    method: body ? "POST" : "GET", cache: "no-store",
    headers: { "X-Seat-Token": token() || "", "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) { showLogin(true); throw new Error("wrong or missing seat token"); }
  if (!r.ok) throw new Error(data.error || (path + ": " + r.status));
  return data;
}
function showLogin(on) {
  document.getElementById("login").style.display = on ? "block" : "none";
  document.getElementById("play").style.display = on ? "none" : "block";
}
async function play(t, id) {
  if (busy) return;
  busy = true;
  const text = (t.legal.find(a => a.id === id) || {}).text;
  try {
    await api("/api/move", { match_id: t.match_id, turn: t.turn, action: id });
    document.getElementById("sent").textContent = "You played " + text + ". Waiting for the other seats…";
    document.getElementById("sent").className = "muted";
  } catch (e) {
    document.getElementById("sent").textContent = "Not played: " + e.message;
    document.getElementById("sent").className = "error";
  } finally {
    busy = false; clicks = []; tick();
  }
}
function mark(t) {
  const pic = document.querySelector("#picture svg");
  if (pic) for (const e of pic.querySelectorAll("[data-cell]")) {
    e.classList.toggle("chosen", clicks.includes(e.getAttribute("data-cell")));
  }
  const cands = candidates(t, clicks);
  for (const b of document.querySelectorAll("#legal button")) {
    b.classList.toggle("candidate", clicks.length > 0 && cands.some(a => String(a.id) === b.dataset.id));
  }
}
function candidates(t, seq) {
  return t.legal.filter(a => a.cells && a.cells.length >= seq.length &&
    seq.every((k, i) => a.cells[i] === k));
}
function onCell(t, cell) {
  let seq = [...clicks, cell];
  if (!candidates(t, seq).length) seq = [cell];          // start over from this cell
  const cands = candidates(t, seq);
  if (!cands.length) { clicks = []; mark(t); return; }
  const done = cands.filter(a => a.cells.length === seq.length);
  clicks = seq;
  if (done.length === 1 && cands.length === 1) { play(t, done[0].id); return; }
  mark(t);   // several moves share these clicks (a promotion): the list marks them
}
function steps(t) {
  return t.history.map((h, i) => ({ turn: i, player: h.player, text: h.text, hidden: h.text === null }));
}
function draw(t) {
  document.getElementById("title").textContent = t.game + ": " + t.seats.join(" vs ");
  document.getElementById("meta").textContent = t.match_id + " · you are seat " + t.seat + " (" +
    t.seats[t.seat] + ") · turn " + t.turn;
  document.getElementById("retry").textContent = t.retry ? "Your last answer was refused: " + t.retry : "";
  document.getElementById("view").textContent = t.observation;
  // Chess: the side to move on the seat's own turn is the seat's colour; Black sees its side below.
  const black = gameName(t.game) === "chess" && String(t.observation).trim().split(/\s+/)[1] === "b";
  const pic = picture({ game: t.game, observation: t.observation, steps: steps(t), seats: t.seats }, black);
  if (pic) pic.addEventListener("click", e => {
    const c = e.target.closest("[data-cell]");
    if (c) onCell(t, c.getAttribute("data-cell"));
  });
  document.getElementById("picture").replaceChildren(...(pic ? [pic] : []));
  document.getElementById("filter").value = "";
  buttons(t);
  document.getElementById("history").replaceChildren(...t.history.map(h => el("li",
    (h.player >= 0 ? t.seats[h.player] : h.player === -1 ? "chance" : "all") + ": " +
    (h.text === null ? "(hidden)" : h.text), h.text === null ? "muted" : "")));
  mark(t);
}
// The legal moves as buttons: all of them up to SHOW, else those the filter matches (a word game
// offers thousands of words).
const SHOW = 120;
function matching(t) {
  const f = document.getElementById("filter").value.trim().toLowerCase();
  return f ? t.legal.filter(a => a.text.toLowerCase().includes(f)) : t.legal;
}
function buttons(t) {
  const hits = matching(t);
  document.getElementById("legal").replaceChildren(...hits.slice(0, SHOW).map(a => {
    const b = el("button", a.text);
    b.dataset.id = a.id;
    b.addEventListener("click", () => play(t, a.id));
    return b;
  }));
  document.getElementById("more").textContent = hits.length > SHOW ?
    (hits.length - SHOW) + " more: type to narrow them down" : "";
  mark(t);
}
function clear() {
  for (const id of ["meta", "retry", "view", "history"]) document.getElementById(id).replaceChildren();
  document.getElementById("picture").replaceChildren();
  document.getElementById("legal").replaceChildren();
  document.getElementById("more").textContent = "";
  document.getElementById("title").textContent = "Waiting for your turn…";
  document.getElementById("clock").textContent = "–";
}
async function tick() {
  if (!token()) { showLogin(true); return; }
  let s;
  try { s = await api("/api/seat"); } catch (e) {
    document.getElementById("status").textContent = e.message; return;
  }
  showLogin(false);
  document.getElementById("agent").textContent = s.agent;
  document.getElementById("status").textContent = s.turns.length ? "your move" : "waiting";
  const tabs = document.getElementById("tabs");
  if (!s.turns.some(t => t.key === current)) {
    current = s.turns.length ? s.turns[0].key : null; clicks = [];
  }
  tabs.replaceChildren(...(s.turns.length > 1 ? s.turns.map(t => {
    const b = el("button", t.game + " " + t.seats.join("-"), t.key === current ? "on" : "");
    b.addEventListener("click", () => { current = t.key; clicks = []; shown = null; tick(); });
    return b;
  }) : []));
  const t = s.turns.find(x => x.key === current);
  if (!t) { shown = null; clear(); } else {
    if (!shown || shown.key !== t.key) { draw(t); document.getElementById("sent").textContent = ""; }
    shown = t;
    const clock = document.getElementById("clock");
    clock.textContent = (t.left_ms / 1000).toFixed(1) + " s";
    clock.classList.toggle("low", t.left_ms < 10000);
  }
  document.getElementById("playing").replaceChildren(...s.playing.map(m =>
    el("li", m.game + ": " + m.seats.join(" vs ") + " (you: seat " + m.seat + ")")));
  document.getElementById("results").replaceChildren(...s.results.map(r => {
    const mine = r.returns[r.seat], best = Math.max(...r.returns);
    const word = r.outcome === "draw" || r.returns.every(x => x === best) ? "draw" :
      mine === best ? "won" : "lost";
    return el("li", (r.game || r.match_id) + ": " + word + " (" + r.outcome + ", " +
      r.returns.join(":") + ")");
  }));
}
document.getElementById("filter").addEventListener("input", () => { if (shown) buttons(shown); });
document.getElementById("filter-form").addEventListener("submit", e => {
  e.preventDefault();
  if (!shown) return;
  const f = document.getElementById("filter").value.trim().toLowerCase();
  const hits = matching(shown), exact = hits.filter(a => a.text.toLowerCase() === f);
  const pick = exact.length === 1 ? exact : hits;
  if (pick.length === 1) play(shown, pick[0].id);
});
document.getElementById("login-form").addEventListener("submit", e => {
  e.preventDefault();
  location.hash = "token=" + document.getElementById("token-input").value.trim();
});
window.addEventListener("hashchange", tick);
tick();
setInterval(tick, 500);
</script>
</body>
</html>
"""

SEAT_PAGE = _HEAD + PICTURES_JS + _TAIL
