// What every Spielbus bot in JavaScript does on the bus, apart from choosing its move: the
// `nats` npm package and the protocol of docs/protocol.md, nothing of Spielbus imported.
// node_bot.js, chess_bot.js and connect_four_bot.js each give `serve` a `choose` function.
//
// It connects (`--login FILE`, the bot's one login file: NATS_URL, NATS_USER, NATS_PASSWORD; else
// the environment: NATS_USER / NATS_PASSWORD or NATS_CREDS, a .creds file), registers a NATS micro
// service named after the bot ($SRV.PING / $SRV.INFO find it), answers `turn` requests on
// `spielbus.turn.<name>` in queue group `<name>` with a `move`, listens to
// `spielbus.notify.<name>` for match_started / match_ended, ignores unknown fields, never
// crashes on odd input, and drains on SIGTERM.
"use strict";

const fs = require("node:fs");
const { connect, credsAuthenticator } = require("nats");

const PROTOCOL_VERSION = 1;

// `--key value` pairs over `defaults` (every key a string); exit 2 with `usage` on anything else.
function parseArgs(argv, defaults, usage) {
  const opts = {
    nats: "",
    prefix: process.env.SPIELBUS_PREFIX || "spielbus",
    login: "",
    ...defaults,
  };
  if (process.env.BOT_NAME) opts.name = process.env.BOT_NAME;
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in opts) || i + 1 >= argv.length) {
      console.error(`usage: ${usage} [--name N] [--nats URL] [--prefix P] [--login FILE]`);
      process.exit(2);
    }
    opts[key] = argv[++i];
  }
  return opts;
}

// The login file (KEY=VALUE lines, # comments) wins over the environment.
function loginEnv(file) {
  const env = { ...process.env };
  if (!file) return env;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const t = line.trim();
    const eq = t.indexOf("=");
    if (t && !t.startsWith("#") && eq > 0) env[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
  }
  return env;
}

// A turn's checks before any strategy sees it; throws with the reason for a service error.
function checkTurn(turn) {
  if (turn === null || typeof turn !== "object" || turn.type !== "turn" ||
      !Array.isArray(turn.legal_actions) || turn.legal_actions.length === 0) {
    throw new Error("not a turn with legal actions");
  }
  if (turn.v !== PROTOCOL_VERSION) { // never guess at another version's meaning
    throw new Error(`protocol version ${JSON.stringify(turn.v)} not spoken; this bot speaks 1`);
  }
}

// Serve the bot until SIGTERM / SIGINT. `choose(turn, match)` returns (or resolves to) a legal
// action id, or `{action, note?, stats?}`; `match` is the per-match object kept from
// match_started to match_ended (a strategy may keep its own state in it). `onEnd(matchId)` is
// called on match_ended.
async function serve({ opts, kind, description, choose, onEnd }) {
  const env = loginEnv(opts.login);
  const url = opts.nats || env.NATS_URL || "nats://127.0.0.1:4222";
  // --nats may list several servers of one cluster, comma-separated.
  const servers = url.split(",").map((u) => u.trim()).filter((u) => u);
  const conn = { servers, name: `bot-${opts.name}`, maxReconnectAttempts: -1 };
  if (env.NATS_CREDS) conn.authenticator = credsAuthenticator(fs.readFileSync(env.NATS_CREDS));
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
    description,
    // nats.js puts every endpoint in queue group "q" unless told: Spielbus needs `<name>`, so that
    // replicas of this bot share its turns and bot-check's discovery check passes.
    queue: opts.name,
    metadata: { kind, games: "*", protocol: String(PROTOCOL_VERSION) },
  });

  const answer = async (msg) => {
    let move;
    try {
      const turn = msg.json();
      checkTurn(turn);
      if (turn.retry) console.error(`match ${turn.match_id}: previous answer refused: ${turn.retry}`);
      if (!matches.has(turn.match_id)) matches.set(turn.match_id, {});
      const got = await choose(turn, matches.get(turn.match_id));
      const picked = typeof got === "object" ? got : { action: got };
      move = {
        v: PROTOCOL_VERSION,
        type: "move",
        match_id: turn.match_id,
        turn: turn.turn, // echo the counter: a stale answer is refused
        ...picked,
      };
    } catch (e) {
      msg.respondError(400, `cannot play this turn: ${e.message}`.slice(0, 200));
      return;
    }
    msg.respond(JSON.stringify(move));
  };
  service.addEndpoint("turn", {
    subject: `${opts.prefix}.turn.${opts.name}`,
    queue: opts.name, // the same line per endpoint: either one sets the queue group
    handler: (err, msg) => {
      if (err) {
        console.error(`turn endpoint: ${err}`);
        return;
      }
      // Not awaited: each turn runs on its own, so a slow decision does not hold up other matches.
      answer(msg).catch((e) => console.error(`turn: ${e}`));
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
      if (note.type === "match_started") {
        matches.set(note.match_id, { seat: note.seat, seats: note.seats });
      } else if (note.type === "match_ended") {
        matches.delete(note.match_id);
        if (onEnd) onEnd(note.match_id);
      }
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

function run(main) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

module.exports = { PROTOCOL_VERSION, parseArgs, serve, run };
