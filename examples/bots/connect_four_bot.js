#!/usr/bin/env node
// A Spielbus bot that plays connect four well: it rebuilds the board from the turn's `state` (the
// action ids since the start: in connect_four an id is the column, 0-6, and the players alternate,
// seat 0 first) and searches it with alpha-beta (negamax) to a fixed depth, scoring the leaves by
// the open lines of four each side holds. Other games: a random legal action, so it passes
// bot-check's games too. serve.js does the bus part (docs/protocol.md).
//
//   npm ci                      # in examples/bots
//   NATS_URL=nats://127.0.0.1:4222 node connect_four_bot.js --name c4bot [--depth 6]
//
// Limits: a fixed depth (6 plies by default, a few milliseconds a move), no transposition table,
// no opening book; it beats random play every time and loses to a deeper search.
"use strict";

const { parseArgs, serve, run } = require("./serve");

const ROWS = 6;
const COLS = 7;
const WIN = 1e6;
const ORDER = [3, 2, 4, 1, 5, 0, 6]; // centre first: better cut-offs

// board[row][col], row 0 at the bottom; 0 empty, 1 seat 0's piece ('x'), 2 seat 1's ('o').
function replay(state) {
  const board = Array.from({ length: ROWS }, () => new Array(COLS).fill(0));
  const height = new Array(COLS).fill(0);
  state.forEach((col, i) => {
    if (!Number.isInteger(col) || col < 0 || col >= COLS || height[col] >= ROWS) {
      throw new Error(`state[${i}] = ${col} is no playable column`);
    }
    board[height[col]++][col] = (i % 2) + 1;
  });
  return { board, height };
}

const LINES = []; // every window of four cells: [[r, c] x 4]
for (let r = 0; r < ROWS; r++) {
  for (let c = 0; c < COLS; c++) {
    for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]]) {
      const cells = [0, 1, 2, 3].map((k) => [r + k * dr, c + k * dc]);
      if (cells.every(([y, x]) => y >= 0 && y < ROWS && x >= 0 && x < COLS)) LINES.push(cells);
    }
  }
}

// Whether the piece just dropped at (r, c) completes four.
function wins(board, r, c) {
  const p = board[r][c];
  for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]]) {
    let n = 1;
    for (const s of [1, -1]) {
      let y = r + s * dr;
      let x = c + s * dc;
      while (y >= 0 && y < ROWS && x >= 0 && x < COLS && board[y][x] === p) {
        n++;
        y += s * dr;
        x += s * dc;
      }
    }
    if (n >= 4) return true;
  }
  return false;
}

// Open windows: 1, 10 or 100 points for one, two or three own pieces with none of the other's.
function evaluate(board, me) {
  let score = 0;
  for (const line of LINES) {
    let mine = 0;
    let theirs = 0;
    for (const [y, x] of line) {
      if (board[y][x] === me) mine++;
      else if (board[y][x] !== 0) theirs++;
    }
    if (theirs === 0 && mine > 0) score += 10 ** (mine - 1);
    else if (mine === 0 && theirs > 0) score -= 10 ** (theirs - 1);
  }
  return score;
}

function negamax(pos, me, depth, alpha, beta) {
  const { board, height } = pos;
  if (depth === 0) return evaluate(board, me);
  let best = -Infinity;
  let moved = false;
  for (const c of ORDER) {
    if (height[c] >= ROWS) continue;
    moved = true;
    const r = height[c]++;
    board[r][c] = me;
    // A win now scores more than a win later: prefer the quickest.
    const score = wins(board, r, c) ? WIN + depth : -negamax(pos, 3 - me, depth - 1, -beta, -alpha);
    board[r][c] = 0;
    height[c]--;
    if (score > best) best = score;
    if (best > alpha) alpha = best;
    if (alpha >= beta) break;
  }
  return moved ? best : 0; // a full board is a draw
}

function bestColumn(state, legal, depth) {
  const pos = replay(state);
  const me = (state.length % 2) + 1;
  let best = null;
  let bestScore = -Infinity;
  for (const c of ORDER) {
    if (!legal.has(c)) continue;
    const r = pos.height[c]++;
    pos.board[r][c] = me;
    const score = wins(pos.board, r, c) ? WIN + depth : -negamax(pos, 3 - me, depth - 1, -Infinity, Infinity);
    pos.board[r][c] = 0;
    pos.height[c]--;
    if (best === null || score > bestScore) {
      best = c;
      bestScore = score;
    }
  }
  return { action: best, score: bestScore };
}

run(async () => {
  const opts = parseArgs(process.argv.slice(2), { name: "c4bot", depth: "6" },
    "connect_four_bot.js [--depth PLIES]");
  const depth = Number(opts.depth);
  if (!Number.isInteger(depth) || depth < 1 || depth > 10) {
    console.error("--depth must be an integer from 1 to 10");
    process.exit(2);
  }
  await serve({
    opts,
    kind: "example-node-connect-four",
    description: "example Spielbus bot in JavaScript: alpha-beta search for connect four",
    choose: (turn) => {
      const legal = turn.legal_actions;
      if (turn.game.name !== "connect_four" || !Array.isArray(turn.state)) {
        return { action: legal[Math.floor(Math.random() * legal.length)].id, note: "random: not connect four" };
      }
      const { action, score } = bestColumn(turn.state, new Set(legal.map((a) => a.id)), depth);
      return { action, note: `alpha-beta depth ${depth}, score ${score}`, stats: { depth } };
    },
  });
});
