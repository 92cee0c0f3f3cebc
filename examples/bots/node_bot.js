#!/usr/bin/env node
// A complete Spielbus bot in JavaScript with the `nats` npm package: nothing of Spielbus is
// imported, only the protocol (docs/protocol.md). serve.js does the bus part (connect, register
// the micro service in queue group <name>, answer turns, hear notifications, drain); this file
// only chooses.
//
//   npm ci                      # in examples/bots
//   NATS_URL=nats://127.0.0.1:4222 node node_bot.js --name mybot
//
// Strategy: a random legal action (`--strategy first`: the first one). Any game.
// Credentials: `--login FILE`, the bot's one login file (`agents/<name>.env` of
// `spielbus auth init`, or the file `spielbus run` writes for an external bot: NATS_URL, NATS_USER,
// NATS_PASSWORD), else the environment: NATS_USER / NATS_PASSWORD or NATS_CREDS (a .creds file).
"use strict";

const { parseArgs, serve, run } = require("./serve");

// Pick a legal action id. `turn` holds observation, legal_actions, history, state, rules, retry...
function choose(turn, strategy) {
  const legal = turn.legal_actions;
  if (strategy === "first") return legal[0].id;
  return legal[Math.floor(Math.random() * legal.length)].id;
}

run(async () => {
  const opts = parseArgs(process.argv.slice(2), { name: "node_bot", strategy: "random" },
    "node_bot.js [--strategy random|first]");
  if (!["random", "first"].includes(opts.strategy)) {
    console.error("--strategy must be random or first");
    process.exit(2);
  }
  await serve({
    opts,
    kind: "example-node",
    description: "example Spielbus bot in JavaScript",
    choose: (turn) => ({ action: choose(turn, opts.strategy), note: `${opts.strategy} choice` }),
  });
});
