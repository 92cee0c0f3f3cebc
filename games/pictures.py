"""The board pictures, in JavaScript, shared by the live page and the human seat's page.

Each `*Picture` function builds an SVG element from a text view (or returns null when the
text does not parse): chess from its FEN, Go from its board text, connect four and
tic-tac-toe from their grids, Kuhn and Leduc poker cards from the chance steps. The parts a
player can click carry a `data-cell` key (chess squares `"e2"`, Go points `"b1"`, connect
four columns `"3"`, tic-tac-toe cells `"1,2"`); `agents.human.clicks` says which keys
choose which legal action. Texts are only ever set with `textContent`.
"""

PICTURES_JS = r"""
// ---- Pictures: boards drawn as SVG from the public text view; others keep the text. ----------
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function gameName(label) { return String(label || "").split("(")[0]; }
// Solid glyphs for both colours, told apart by fill and outline.
const CHESS_GLYPHS = { k: "\u265A", q: "\u265B", r: "\u265C", b: "\u265D", n: "\u265E", p: "\u265F" };
// `flip`: Black's side at the bottom (the seat page, when the seat plays Black): `at` turns a board
// row or column (row 0 = rank 8) into its place on the picture; `data-cell` keys stay square names.
function chessPicture(fen, flip) {
  const rows = String(fen).trim().split(/\s+/)[0].split("/");
  if (rows.length !== 8) return null;
  const at = i => flip ? 7 - i : i;
  const S = 40, root = svg("svg", { viewBox: "0 0 " + (8 * S + 16) + " " + (8 * S + 16), width: 8 * S + 16,
    "data-game": "chess", role: "img" });
  let pieces = 0;
  for (let r = 0; r < 8; r++) {
    let c = 0;
    for (const ch of rows[r]) {
      if (/[1-8]/.test(ch)) { c += Number(ch); continue; }
      const g = CHESS_GLYPHS[ch.toLowerCase()];
      if (!g || c > 7) return null;
      const white = ch !== ch.toLowerCase();
      root.appendChild(svg("text", { x: 16 + at(c) * S + S / 2, y: at(r) * S + S * 0.8,
        "text-anchor": "middle", "font-size": S * 0.8, fill: white ? "#fff" : "#111",
        stroke: white ? "#111" : "#fff", "stroke-width": white ? 1.2 : 0.4, class: "piece", "data-piece": ch,
        "pointer-events": "none" }, g));
      pieces++; c++;
    }
    if (c !== 8) return null;
  }
  for (let r = 0; r < 8; r++) {
    for (let c = 0; c < 8; c++) {
      root.insertBefore(svg("rect", { x: 16 + at(c) * S, y: at(r) * S, width: S, height: S,
        fill: (r + c) % 2 ? "#b58863" : "#f0d9b5", "data-cell": "abcdefgh"[c] + (8 - r) }), root.firstChild);
    }
    root.appendChild(svg("text", { x: 4, y: at(r) * S + S * 0.6, "font-size": 11, fill: "#555" }, 8 - r));
    root.appendChild(svg("text", { x: 16 + at(r) * S + S / 2, y: 8 * S + 12, "font-size": 11, fill: "#555",
      "text-anchor": "middle" }, "abcdefgh"[r]));
  }
  root.dataset.pieces = pieces;
  return root;
}
function gridRows(text, re) {
  return String(text).split("\n").map(l => l.match(re)).filter(Boolean).map(m => m[1]);
}
function goPicture(text) {
  const rows = gridRows(text, /^\s*\d+ ([+XO.]+)\s*$/);
  const n = rows.length;
  if (!n || rows.some(r => r.length !== n)) return null;
  const S = 28, P = 22, W = P * 2 + S * (n - 1);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + W, width: W, "data-game": "go", role: "img" });
  root.appendChild(svg("rect", { x: 0, y: 0, width: W, height: W, fill: "#dcb35c" }));
  for (let i = 0; i < n; i++) {
    const end = P + (n - 1) * S, at = P + i * S;
    root.appendChild(svg("line", { x1: P, y1: at, x2: end, y2: at, stroke: "#333" }));
    root.appendChild(svg("line", { x1: at, y1: P, x2: at, y2: end, stroke: "#333" }));
  }
  let stones = 0;
  const letters = (gridRows(text, /^\s+([A-Z]+)\s*$/)[0] || "").toLowerCase();
  rows.forEach((row, r) => [...row].forEach((ch, c) => {
    const cell = letters.length === n ? { "data-cell": letters[c] + (n - r) } : {};
    if (ch !== "X" && ch !== "O") {
      root.appendChild(svg("circle", { cx: P + c * S, cy: P + r * S, r: S * 0.45, fill: "transparent",
        class: "point", ...cell }));
      return;
    }
    stones++;
    root.appendChild(svg("circle", { cx: P + c * S, cy: P + r * S, r: S * 0.45, class: "stone",
      fill: ch === "X" ? "#111" : "#f8f8f8", stroke: "#111", ...cell }));
  }));
  root.dataset.stones = stones;
  return root;
}
function discPicture(text, game) {
  const rows = gridRows(text, /^([.xo]+)\s*$/);
  if (!rows.length || rows.some(r => r.length !== rows[0].length)) return null;
  const S = 44, w = rows[0].length, h = rows.length, c4 = game === "connect_four";
  const root = svg("svg", { viewBox: "0 0 " + w * S + " " + h * S, width: w * S, "data-game": game,
    role: "img" });
  root.appendChild(svg("rect", { x: 0, y: 0, width: w * S, height: h * S, fill: c4 ? "#1f5fbf" : "#fff",
    stroke: "#333" }));
  let marks = 0;
  rows.forEach((row, r) => [...row].forEach((ch, c) => {
    const cx = c * S + S / 2, cy = r * S + S / 2;
    if (c4) {
      root.appendChild(svg("circle", { cx, cy, r: S * 0.4, class: ch === "." ? "hole" : "mark",
        fill: ch === "x" ? "#d62828" : ch === "o" ? "#f6c915" : "#fff", "data-cell": String(c) }));
    } else {
      root.appendChild(svg("rect", { x: c * S, y: r * S, width: S, height: S, fill: "transparent",
        stroke: "#333", "data-cell": r + "," + c }));
      if (ch !== ".") root.appendChild(svg("text", { x: cx, y: cy + S * 0.25, "text-anchor": "middle",
        "font-size": S * 0.7, class: "mark", fill: ch === "x" ? "#b3261e" : "#1f5fbf",
        "pointer-events": "none" },
        ch.toUpperCase()));
    }
    if (ch !== ".") marks++;
  }));
  root.dataset.marks = marks;
  return root;
}
// Poker: the chance steps deal the cards; a card is face down while its step is hidden.
const KUHN = ["J", "Q", "K"];
const LEDUC = ["J\u2660", "J\u2665", "Q\u2660", "Q\u2665", "K\u2660", "K\u2665"];
function cardsPicture(m, game) {
  const deals = m.steps.filter(s => s.player < 0);
  const names = game === "kuhn_poker" ? KUHN : LEDUC;
  const who = deals.map((_, i) => i < m.seats.length ? m.seats[i] : "board");
  const W = 64, H = 88;
  const root = svg("svg", { viewBox: "0 0 " + (deals.length * (W + 56) + 24) + " " + (H + 30),
    width: deals.length * (W + 56) + 24, "data-game": game, role: "img" });
  deals.forEach((s, i) => {
    const x = 36 + i * (W + 56);
    const id = (String(s.text).match(/(\d+)\s*$/) || [])[1];
    const down = s.hidden || id === undefined;
    root.appendChild(svg("rect", { x, y: 4, width: W, height: H, rx: 6, stroke: "#333",
      fill: down ? "#22303c" : "#fff", class: down ? "card down" : "card up" }));
    root.appendChild(svg("text", { x: x + W / 2, y: H / 2 + 14, "text-anchor": "middle", "font-size": 28,
      fill: down ? "#8fa3b5" : /\u2665/.test(names[id] || "") ? "#b3261e" : "#111" },
      down ? "?" : (names[id] || id)));
    root.appendChild(svg("text", { x: x + W / 2, y: H + 24, "text-anchor": "middle", "font-size": 12,
      fill: "#555" }, who[i]));
  });
  return deals.length ? root : null;
}
function picture(m, flip) {
  const game = gameName(m.game);
  if (game === "kuhn_poker" || game === "leduc_poker") return cardsPicture(m, game);
  if (!m.observation) return null;
  if (game === "chess") return chessPicture(m.observation, flip);
  if (game === "go") return goPicture(m.observation);
  if (game === "connect_four" || game === "tic_tac_toe") return discPicture(m.observation, game);
  return null;
}

"""
