// Drives node-redlock (v5, over ioredis, one client) for the interoperability tests, one
// command per line.
//
// Usage: node redlock_driver.mjs REDIS_URL
//
// Reads one command per line on stdin and answers one line on stdout:
//
//     acquire NAME TIMEOUT_MS BLOCKING_TIMEOUT_MS  -> acquired TOKEN | busy
//     release NAME                                 -> released | not-owned
//     extend NAME ADDITIONAL_MS                    -> extended | not-owned
//     owned NAME                                   -> true | false
//     release-token NAME TOKEN                     -> released | not-owned
//     quit                                         -> (exits, no answer)
//
// node-redlock's own semantics show through, unchanged:
// - `acquire` makes one try (retryCount 0); with BLOCKING_TIMEOUT_MS > 0 this driver tries
//   again every 100 ms until that much time has passed, like redis-py's polling.
// - `extend` sets the key's time to live to ADDITIONAL_MS (node-redlock re-SETs the key with
//   PX), where redis-py adds ADDITIONAL_MS to what is left. node-redlock refuses, without
//   asking the server, to extend a lock whose validity it computed has run out: `not-owned`.
// - `owned` has no node-redlock counterpart: it answers whether the key holds this lock's
//   value (GET), the way redis-py's `owned()` does.
// - `release-token` builds a node-redlock `Lock` with the given value and releases it.
//
// Any other failure answers `error MESSAGE`. Commands are handled one at a time, in order.
// The driver exits when stdin closes, so it dies with the process that started it.

import { createInterface } from "node:readline";
import { Redis } from "ioredis";
import Redlock, { ExecutionError, Lock, ResourceLockedError } from "redlock";

const POLL_MS = 100;

const client = new Redis(process.argv[2]);
// ioredis reconnects by itself; without a listener its errors are printed as unhandled.
client.on("error", () => {});
const redlock = new Redlock([client], { retryCount: 0 });
const locks = new Map();

// Whether node-redlock failed because a key held another value (or none), as opposed to
// a connection or server error.
async function notOwned(error) {
  if (!(error instanceof ExecutionError)) {
    return false;
  }
  if (error.attempts.length === 0) {
    // extend() of a lock whose validity has run out, refused before any request.
    return error.message.includes("already-expired");
  }
  const attempts = await Promise.all(error.attempts);
  return attempts.every((stats) =>
    [...stats.votesAgainst.values()].every((e) => e instanceof ResourceLockedError),
  );
}

// The reason to report for a failure that is not a held key.
async function describe(error) {
  if (error instanceof ExecutionError && error.attempts.length > 0) {
    const attempts = await Promise.all(error.attempts);
    const reasons = attempts.flatMap((stats) =>
      [...stats.votesAgainst.values()].map((e) => `${e.name}: ${e.message}`),
    );
    return `${error.name}: ${error.message} (${reasons.join("; ")})`;
  }
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function held(name) {
  const lock = locks.get(name);
  if (lock === undefined) {
    throw new Error(`no lock held under ${name}`);
  }
  return lock;
}

function integer(text) {
  if (!/^\d+$/.test(text)) {
    throw new Error(`not a whole number of milliseconds: ${text}`);
  }
  return Number(text);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const commands = {
  async acquire(name, timeoutMs, blockingTimeoutMs) {
    const duration = integer(timeoutMs);
    const deadline = Date.now() + integer(blockingTimeoutMs);
    for (;;) {
      try {
        const lock = await redlock.acquire([name], duration);
        locks.set(name, lock);
        return `acquired ${lock.value}`;
      } catch (error) {
        if (!(await notOwned(error))) {
          throw error;
        }
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        return "busy";
      }
      await sleep(Math.min(POLL_MS, left));
    }
  },

  async release(name) {
    const lock = held(name);
    try {
      await lock.release();
    } catch (error) {
      if (await notOwned(error)) {
        locks.delete(name);
        return "not-owned";
      }
      throw error;
    }
    locks.delete(name);
    return "released";
  },

  async extend(name, additionalMs) {
    const lock = held(name);
    try {
      // node-redlock returns a new Lock and invalidates the old one.
      locks.set(name, await lock.extend(integer(additionalMs)));
    } catch (error) {
      if (await notOwned(error)) {
        return "not-owned";
      }
      throw error;
    }
    return "extended";
  },

  async owned(name) {
    const lock = locks.get(name);
    if (lock === undefined) {
      return "false";
    }
    return (await client.get(name)) === lock.value ? "true" : "false";
  },

  async "release-token"(name, token) {
    const lock = new Lock(redlock, [name], token, [], Date.now());
    try {
      await redlock.release(lock);
    } catch (error) {
      if (await notOwned(error)) {
        return "not-owned";
      }
      throw error;
    }
    return "released";
  },
};

async function answer(line) {
  const words = line.trim().split(/\s+/).filter((word) => word !== "");
  if (words.length === 0) {
    return "error empty command";
  }
  const [name, ...args] = words;
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (command === undefined) {
    return `error unknown command ${name}`;
  }
  if (args.length !== command.length) {
    return `error ${name} takes ${command.length} arguments, got ${args.length}`;
  }
  try {
    return await command(...args);
  } catch (error) {
    return `error ${(await describe(error)).split(/\s+/).join(" ")}`;
  }
}

function exit() {
  // ioredis would keep the process alive; nothing is left to wait for.
  process.exit(0);
}

// The test process is gone when stdout breaks.
process.stdout.on("error", exit);

const input = createInterface({ input: process.stdin, terminal: false });
const lines = input[Symbol.asyncIterator]();
for (;;) {
  const { value: line, done } = await lines.next();
  if (done || line.trim() === "quit") {
    exit();
  }
  const reply = await answer(line);
  await new Promise((resolve) => process.stdout.write(`${reply}\n`, resolve));
}
