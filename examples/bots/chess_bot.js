#!/usr/bin/env node
// A Spielbus bot that plays chess with a UCI engine (Debian's `stockfish`): the turn's `state` (the
// action ids since the start) is decoded into UCI moves (chess_ids.js) and handed to the engine as
// `position startpos moves e2e4 e7e5 ...` (or `position fen <the game's fen parameter> moves ...`),
// so the engine knows the game's history, repetitions included; its `bestmove` (UCI, e.g. `e2e4`,
// `e7e8n`, `e1g1`) is turned back into OpenSpiel's action id and checked against `legal_actions`.
// Other games: a random legal action, so it passes bot-check's games too. serve.js does the bus
// part (docs/protocol.md).
//
//   apt-get install stockfish   # /usr/games/stockfish
//   npm ci                      # in examples/bots
//   NATS_URL=nats://127.0.0.1:4222 node chess_bot.js --name fishbot [--movetime MS] [--engine PATH]
//
// One engine process serves every match, one search at a time (a search takes `--movetime`, 50 ms
// by default, or a tenth of the turn's deadline if that is less).
// Limits: standard chess only (no chess960 castling).
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const readline = require("node:readline");
const { replay } = require("./chess_ids");
const { parseArgs, serve, run } = require("./serve");

// One UCI engine; `bestmove(position, ms)` searches one position at a time, in the order asked.
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

  // `position`: what follows UCI's `position`, e.g. `startpos moves e2e4`.
  bestmove(position, ms) {
    const search = this.queue.then(async () => {
      this.send(`position ${position}`);
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
      const fen = typeof turn.game.params?.fen === "string" ? turn.game.params.fen : null;
      const { board, moves } = replay(turn.state, fen);
      const start = fen ? `fen ${fen}` : "startpos";
      const uci = await engine.bestmove(`${start}${moves.length ? ` moves ${moves.join(" ")}` : ""}`, ms);
      const action = board.id(uci);
      if (!legal.some((a) => a.id === action)) throw new Error(`engine move ${uci} (id ${action}) is not legal`);
      return { action, note: `engine: ${uci}` };
    },
  });
});
