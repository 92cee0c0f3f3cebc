// OpenSpiel's chess action ids <-> UCI moves (open_spiel 2.0.2, chess_common.h; docs/games.md#chess),
// for bots that talk to a UCI engine. No chess library: it tracks only where the pieces are.
//
// A move is `(file * 8 + rank) * 73 + destination`, from the mover's side (ranks counted from
// black's side when black moves). Destinations 0-8 are underpromotions (rook, bishop, knight x
// straight, +file, -file); 9-72 queen-like moves (vertical, horizontal, diagonal, anti-diagonal: 14
// distances each, -7..-1 then 1..7) and then the 8 knight jumps. A queen promotion is the plain
// pawn move. Castling: 4672 queenside (O-O-O), 4673 kingside (O-O), for either colour.
//
// Limits: standard chess only (no chess960 castling); ids are trusted to be legal (they come
// from the referee's `state`), so nothing here checks legality.
"use strict";

const START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
const KNIGHT = [[-2, -1], [-2, 1], [-1, -2], [-1, 2], [2, -1], [2, 1], [1, -2], [1, 2]];
const UNDERPROMOTION = "rbn";
const QUEEN_OFFSET = 9;
const LEFT_CASTLING = 64 * 73;
const RIGHT_CASTLING = LEFT_CASTLING + 1;

function diffIndex(d) {
  return d + 7 - (d > 0 ? 1 : 0);
}

function indexDiff(i) {
  const d = i - 7;
  return d >= 0 ? d + 1 : d;
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

function indexOffset(i) {
  const type = Math.floor(i / 14);
  const rest = i % 14;
  if (type === 4) return KNIGHT[rest];
  const d = indexDiff(rest);
  return [[0, d], [d, 0], [d, d], [d, -d]][type];
}

const square = (x, y) => `${"abcdefgh"[x]}${y + 1}`;

// A position: the piece letter on each square ("e1" -> "K"), and whose move it is.
class Board {
  constructor(fen = START) {
    const [placement, side] = fen.split(" ");
    this.white = side !== "b";
    this.at = {};
    placement.split("/").forEach((row, i) => {
      let x = 0;
      for (const ch of row) {
        if (/[1-8]/.test(ch)) x += Number(ch);
        else this.at[square(x++, 7 - i)] = ch;
      }
    });
  }

  // The UCI move of `id` here; the board then plays it.
  play(id) {
    const uci = this.uci(id);
    const from = uci.slice(0, 2);
    const to = uci.slice(2, 4);
    const piece = this.at[from];
    delete this.at[from];
    if (piece.toLowerCase() === "p" && from[0] !== to[0] && !this.at[to]) {
      delete this.at[to[0] + from[1]]; // en passant: the pawn taken is beside, not on `to`
    }
    if (piece.toLowerCase() === "k" && Math.abs(to.charCodeAt(0) - from.charCodeAt(0)) === 2) {
      const rank = from[1];
      const [rookFrom, rookTo] = to[0] === "g" ? ["h", "f"] : ["a", "d"];
      this.at[rookTo + rank] = this.at[rookFrom + rank];
      delete this.at[rookFrom + rank];
    }
    const promo = uci[4];
    this.at[to] = promo ? (this.white ? promo.toUpperCase() : promo) : piece;
    this.white = !this.white;
    return uci;
  }

  uci(id) {
    const rank = this.white ? "1" : "8";
    if (id === LEFT_CASTLING) return `e${rank}c${rank}`;
    if (id === RIGHT_CASTLING) return `e${rank}g${rank}`;
    const reflect = (y) => (this.white ? y : 7 - y);
    const fx = Math.floor(Math.floor(id / 73) / 8);
    const fy = Math.floor(id / 73) % 8;
    const dest = id % 73;
    let dx;
    let dy;
    let promo = "";
    if (dest < QUEEN_OFFSET) {
      promo = UNDERPROMOTION[Math.floor(dest / 3)];
      dx = [0, 1, -1][dest % 3];
      dy = 1;
    } else {
      [dx, dy] = indexOffset(dest - QUEEN_OFFSET);
    }
    const from = square(fx, reflect(fy));
    const to = square(fx + dx, reflect(fy + dy));
    const piece = this.at[from] || "";
    if (!promo && piece.toLowerCase() === "p" && fy + dy === 7) promo = "q";
    return from + to + promo;
  }

  // The id of a UCI move here (the inverse of `uci`).
  id(uci) {
    const m = /^([a-h])([1-8])([a-h])([1-8])([qrbn]?)$/.exec(uci);
    if (!m) throw new Error(`${uci} is not a UCI move`);
    const reflect = (r) => (this.white ? Number(r) - 1 : 8 - Number(r));
    const fx = m[1].charCodeAt(0) - 97;
    const tx = m[3].charCodeAt(0) - 97;
    const fy = reflect(m[2]);
    const ty = reflect(m[4]);
    const piece = this.at[m[1] + m[2]] || "";
    if (piece.toLowerCase() === "k" && Math.abs(tx - fx) === 2) return tx > fx ? RIGHT_CASTLING : LEFT_CASTLING;
    const start = (fx * 8 + fy) * 73;
    if (m[5] && m[5] !== "q") return start + 3 * UNDERPROMOTION.indexOf(m[5]) + [0, 1, -1].indexOf(tx - fx);
    return start + QUEEN_OFFSET + offsetIndex(tx - fx, ty - fy);
  }
}

// A turn's `state` (ids from the start position, or from the game's `fen` parameter) as UCI
// moves, and the board after them.
function replay(state, fen) {
  const board = new Board(fen || START);
  const moves = state.map((id) => board.play(id));
  return { board, moves };
}

module.exports = { Board, replay, START };
