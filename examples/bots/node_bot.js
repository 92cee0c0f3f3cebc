#!/usr/bin/env node
// A complete Spielbus bot in JavaScript with the `nats` npm package: nothing of Spielbus is
// imported, only the protocol (docs/protocol.md).
//
//   npm ci                      # in examples/bots
//   NATS_URL=nats://127.0.0.1:4222 node node_bot.js --name mybot
//
// It registers as a NATS micro service named after the bot ($SRV.PING / $SRV.INFO find it),
// answers `turn` requests on `spielbus.turn.<name>` in queue group `<name>` with a `move`,
// listens to `spielbus.notify.<name>` for match_started / match_ended, ignores unknown
// fields and never crashes on odd input. Strategy: a random legal action (`--strategy first`:
// the first one). Credentials: `--login FILE`, the bot's one login file (`agents/<name>.env` of
// `spielbus auth init`, or the file `spielbus run` writes for an external bot: NATS_URL, NATS_USER,
// NATS_PASSWORD), else the environment: NATS_USER / NATS_PASSWORD or NATS_CREDS (a .creds file).
"use strict";

const fs = require("node:fs");
const { connect, credsAuthenticator } = require("nats");

const PROTOCOL_VERSION = 1;

function parseArgs(argv) {
  const opts = {
    name: process.env.BOT_NAME || "node_bot",
    nats: "",
    prefix: process.env.SPIELBUS_PREFIX || "spielbus",
    strategy: "random",
    login: "",
  };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in opts) || i + 1 >= argv.length) {
      console.error(
        "usage: node_bot.js [--name N] [--nats URL] [--prefix P] [--strategy random|first] [--login FILE]",
      );
      process.exit(2);
    }
    opts[key] = argv[++i];
  }
  return opts;
}

// Pick a legal action id. `turn` holds observation, legal_actions, history, rules, retry...
function choose(turn, strategy) {
  const legal = turn.legal_actions;
  if (strategy === "first") return legal[0].id;
  return legal[Math.floor(Math.random() * legal.length)].id;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // The login file (KEY=VALUE lines) wins over the environment.
  const env = { ...process.env };
  if (opts.login) {
    for (const line of fs.readFileSync(opts.login, "utf8").split("\n")) {
      const t = line.trim();
      const eq = t.indexOf("=");
      if (t && !t.startsWith("#") && eq > 0) env[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
    }
  }
  const url = opts.nats || env.NATS_URL || "nats://127.0.0.1:4222";
  // --nats may list several servers of one cluster, comma-separated.
  const servers = url.split(",").map((u) => u.trim()).filter((u) => u);
  const conn = { servers, name: `bot-${opts.name}`, maxReconnectAttempts: -1 };
  if (env.NATS_CREDS) {
    conn.authenticator = credsAuthenticator(fs.readFileSync(env.NATS_CREDS));
  }
  if (env.NATS_USER) {
    conn.user = env.NATS_USER;
    conn.pass = env.NATS_PASSWORD || "";
  }
  const nc = await connect(conn);
  // Permission violations and other async errors are reported here, not swallowed.
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error") console.error(`nats: ${s.data}`);
    }
  })();

  const matches = new Map(); // per-match state, keyed by match id

  const service = await nc.services.add({
    name: opts.name,
    version: "1.0.0",
    description: "example Spielbus bot in JavaScript",
    metadata: { kind: "example-node", games: "*", protocol: String(PROTOCOL_VERSION) },
  });
  service.addEndpoint("turn", {
    subject: `${opts.prefix}.turn.${opts.name}`,
    queue: opts.name,
    handler: (err, msg) => {
      if (err) {
        console.error(`turn endpoint: ${err}`);
        return;
      }
      let move;
      try {
        const turn = msg.json();
        if (turn === null || turn.type !== "turn" || !Array.isArray(turn.legal_actions) ||
            turn.legal_actions.length === 0) {
          throw new Error("not a turn with legal actions");
        }
        if (turn.v !== PROTOCOL_VERSION) {  // never guess at another version's meaning
          throw new Error(`protocol version ${JSON.stringify(turn.v)} not spoken; this bot speaks 1`);
        }
        if (turn.retry) console.error(`match ${turn.match_id}: previous answer refused: ${turn.retry}`);
        move = {
          v: PROTOCOL_VERSION,
          type: "move",
          match_id: turn.match_id,
          turn: turn.turn, // echo the counter: a stale answer is refused
          action: choose(turn, opts.strategy),
          note: `${opts.strategy} choice`,
        };
      } catch (e) {
        msg.respondError(400, `cannot play this turn: ${e.message}`.slice(0, 200));
        return;
      }
      msg.respond(JSON.stringify(move));
    },
  });

  const notify = nc.subscribe(`${opts.prefix}.notify.${opts.name}`);
  (async () => {
    for await (const m of notify) {
      let note;
      try {
        note = m.json();
      } catch {
        continue; // not JSON: ignore
      }
      if (!note || typeof note !== "object") continue;
      if (note.type === "match_started") matches.set(note.match_id, { seat: note.seat, seats: note.seats });
      else if (note.type === "match_ended") matches.delete(note.match_id);
    }
  })();

  await nc.flush();
  console.log("ready");

  const stop = async () => {
    // Drain: stop taking turns, let replies in flight go out, then close.
    await service.stop().catch(() => {});
    await nc.drain().catch(() => {});
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await nc.closed();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
