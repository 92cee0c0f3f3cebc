#!/usr/bin/env node
// A Spielbus bot that plays chess with a UCI engine (Debian's `stockfish`): the turn's
// `observation` is the position in FEN, handed to the engine as `position fen ...`; the engine's
// `bestmove` (UCI, e.g. `e2e4`, `e7e8n`, `e1g1`) is turned into OpenSpiel's action id (below) and
// checked against `legal_actions`. Other games: a random legal action, so it passes bot-check's
// games too. serve.js does the bus part (docs/protocol.md).
//
//   apt-get install stockfish   # /usr/games/stockfish
//   npm ci                      # in examples/bots
//   NATS_URL=nats://127.0.0.1:4222 node chess_bot.js --name fishbot [--movetime MS] [--engine PATH]
//
// One engine process serves every match, one search at a time (a search takes `--movetime`, 50 ms
// by default, or a tenth of the turn's deadline if that is less).
// Limits: the engine sees the position, not the moves that led to it, so it does not know about
// threefold repetition; standard chess only (no chess960 castling).
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const readline = require("node:readline");
const { parseArgs, serve, run } = require("./serve");

// OpenSpiel's chess action ids (open_spiel 2.0.2, chess_common.h; docs/games.md#chess): a move is
// `(file * 8 + rank) * 73 + destination`, from the mover's side (ranks counted from black's side
// when black moves). Destinations 0-8 are underpromotions (rook, bishop, knight x straight,
// +file, -file); 9-72 queen-like moves (vertical, horizontal, diagonal, anti-diagonal: 14 distances
// each) and then the 8 knight jumps. A queen promotion is the plain pawn move. Castling: 4672
// queenside (O-O-O), 4673 kingside (O-O), for either colour.
const KNIGHT = [[-2, -1], [-2, 1], [-1, -2], [-1, 2], [2, -1], [2, 1], [1, -2], [1, 2]];
const UNDERPROMOTION = { r: 0, b: 1, n: 2 };

function diffIndex(d) {
  return d + 7 - (d > 0 ? 1 : 0);
}

function offsetIndex(dx, dy) {
  if (dx === 0) return diffIndex(dy);
  if (dy === 0) return 14 + diffIndex(dx);
  if (dx === dy) return 28 + diffIndex(dx);
  if (dx === -dy) return 42 + diffIndex(dx);
  const k = KNIGHT.findIndex(([x, y]) => x === dx && y === dy);
  if (k < 0) throw new Error(`offset (${dx}, ${dy}) is no chess move`);
  return 56 + k;
}

// The piece letter on each square of a FEN's board, keyed "e1".
function pieces(fen) {
  const out = {};
  fen.split(" ")[0].split("/").forEach((row, i) => {
    let file = 0;
    for (const ch of row) {
      if (/[1-8]/.test(ch)) file += Number(ch);
      else out[`${"abcdefgh"[file++]}${8 - i}`] = ch;
    }
  });
  return out;
}

function uciToAction(fen, uci) {
  const m = /^([a-h])([1-8])([a-h])([1-8])([qrbn]?)$/.exec(uci);
  if (!m) throw new Error(`${uci} is not a UCI move`);
  const black = fen.split(" ")[1] === "b";
  const fx = m[1].charCodeAt(0) - 97;
  const tx = m[3].charCodeAt(0) - 97;
  const reflect = (r) => (black ? 7 - (Number(r) - 1) : Number(r) - 1);
  const fy = reflect(m[2]);
  const ty = reflect(m[4]);
  const piece = pieces(fen)[m[1] + m[2]] || "";
  if (piece.toLowerCase() === "k" && Math.abs(tx - fx) === 2) return tx > fx ? 4673 : 4672;
  const start = (fx * 8 + fy) * 73;
  if (m[5] && m[5] !== "q") return start + 3 * UNDERPROMOTION[m[5]] + [0, 1, -1].indexOf(tx - fx);
  return start + 9 + offsetIndex(tx - fx, ty - fy);
}

// One UCI engine; `bestmove(fen, ms)` searches one position at a time, in the order asked.
class Engine {
  constructor(path) {
    this.proc = spawn(path, [], { stdio: ["pipe", "pipe", "inherit"] });
    this.waiting = null; // [prefix, resolve]
    this.queue = Promise.resolve();
    this.dead = new Promise((resolve) => this.proc.on("exit", () => resolve()));
    this.proc.on("error", (e) => console.error(`engine: ${e.message}`));
    readline.createInterface({ input: this.proc.stdout }).on("line", (line) => {
      if (this.waiting && line.startsWith(this.waiting[0])) {
        const [, resolve] = this.waiting;
        this.waiting = null;
        resolve(line);
      }
    });
  }

  send(line) {
    this.proc.stdin.write(`${line}\n`);
  }

  expect(prefix) {
    return Promise.race([
      new Promise((resolve) => { this.waiting = [prefix, resolve]; }),
      this.dead.then(() => { throw new Error("the engine exited"); }),
    ]);
  }

  async start() {
    this.send("uci");
    await this.expect("uciok");
    this.send("isready");
    await this.expect("readyok");
  }

  bestmove(fen, ms) {
    const search = this.queue.then(async () => {
      this.send(`position fen ${fen}`);
      this.send(`go movetime ${ms}`);
      return (await this.expect("bestmove")).split(" ")[1];
    });
    this.queue = search.catch(() => {});
    return search;
  }
}

function findEngine(given) {
  for (const p of [given, "/usr/games/stockfish", "/usr/bin/stockfish"]) {
    if (p && fs.existsSync(p)) return p;
  }
  return null;
}

run(async () => {
  const opts = parseArgs(process.argv.slice(2), { name: "fishbot", movetime: "50", engine: "" },
    "chess_bot.js [--movetime MS] [--engine PATH]");
  const movetime = Number(opts.movetime);
  if (!Number.isInteger(movetime) || movetime < 1) {
    console.error("--movetime must be a positive integer (milliseconds)");
    process.exit(2);
  }
  const path = findEngine(opts.engine);
  if (!path) {
    console.error("no UCI engine: apt-get install stockfish, or give --engine PATH");
    process.exit(2);
  }
  const engine = new Engine(path);
  await engine.start();
  await serve({
    opts,
    kind: "example-node-chess",
    description: "example Spielbus bot in JavaScript: chess with a UCI engine",
    choose: async (turn) => {
      const legal = turn.legal_actions;
      if (turn.game.name !== "chess") {
        return { action: legal[Math.floor(Math.random() * legal.length)].id, note: "random: not chess" };
      }
      const ms = Math.max(1, Math.min(movetime, Math.floor(turn.deadline_ms / 10)));
      const uci = await engine.bestmove(turn.observation, ms);
      const action = uciToAction(turn.observation, uci);
      if (!legal.some((a) => a.id === action)) throw new Error(`engine move ${uci} (id ${action}) is not legal`);
      return { action, note: `engine: ${uci}` };
    },
  });
});
