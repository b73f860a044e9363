/**
 * `npm run bench:attacks [-- --only NAME,…]`: the abuse the gateway must hold under, at full
 * size (docs/security.md, "Holding under abuse"). The test suite sends the same traffic scaled
 * to hundreds of connections; here it is sent as an attacker would, against the gateway as
 * `npm start` runs it on loopback, and what held is printed as a table and written to
 * bench/results/attacks.json. Progress goes to stderr.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request as httpRequest, type RequestOptions } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG } from '../src/credentials/key-format.ts';
import { loginAdmin, readMetric, startGateway, type GatewayHandle } from './gateway.ts';
import { freePort, REPO_ROOT, spawnServer, type Spawned } from './processes.ts';

const log = (line: string) => process.stderr.write(`${line}\n`);

export interface AttackResult {
  attack: string;
  /** What was sent, in words. */
  traffic: string;
  /** Figures measured while it ran. */
  figures: Record<string, number | string>;
  /** Whether the promise held. */
  held: boolean;
}

interface Stack {
  origin: Spawned;
  gateway: GatewayHandle;
  admin: string;
  close(): Promise<void>;
}

async function startStack(env: Record<string, string>): Promise<Stack> {
  const originPort = await freePort();
  const origin = await spawnServer({
    name: 'origin',
    command: process.execPath,
    args: ['bench/origin.ts'],
    env: { PORT: String(originPort) },
    readyUrl: `http://127.0.0.1:${originPort}/`,
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-attacks-'));
  const gateway = await startGateway({ upstreamUrl: `http://127.0.0.1:${originPort}`, dataDir, env });
  const admin = await loginAdmin(gateway.url);
  return {
    origin,
    gateway,
    admin,
    close: async () => {
      await gateway.process.stop();
      await origin.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function createKey(stack: Stack, scopes: string[]): Promise<string> {
  const response = await fetch(`${stack.gateway.url}/api/v1/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'attacks', scopes }),
  });
  const body = (await response.json()) as { key?: string };
  if (response.status !== 201 || body.key === undefined) throw new Error(`create key: ${response.status}`);
  return body.key;
}

/** Opens `count` connections that each send `first` and then nothing; resolves once all are open. `closed`: how long each stayed open. */
async function holdConnections(port: number, count: number, first: string): Promise<{ sockets: Socket[]; closed: Promise<number[]> }> {
  const sockets: Socket[] = [];
  const closings: Array<Promise<number>> = [];
  for (let opened = 0; opened < count; opened += 500) {
    const batch = Array.from(
      { length: Math.min(500, count - opened) },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.on('error', () => {});
          // Read what comes (the 408), or the end of the connection is never seen.
          socket.resume();
          // How long the connection stayed open once its bytes were sent.
          let sentAt = performance.now();
          closings.push(new Promise((done) => socket.once('close', () => done(performance.now() - sentAt))));
          socket.once('connect', () => {
            sentAt = performance.now();
            socket.write(first);
            resolve();
          });
          socket.once('close', () => resolve());
          sockets.push(socket);
        }),
    );
    await Promise.all(batch);
  }
  return { sockets, closed: Promise.all(closings) };
}

/** Sequential real requests while `running()`: how many, how many succeeded, their p99. */
async function realTraffic(send: () => Promise<number>, running: () => boolean): Promise<{ sent: number; ok: number; p99Ms: number }> {
  const times: number[] = [];
  let ok = 0;
  while (running()) {
    const started = performance.now();
    const status = await send().catch(() => 0);
    times.push(performance.now() - started);
    if (status >= 200 && status < 300) ok++;
  }
  times.sort((a, b) => a - b);
  return { sent: times.length, ok, p99Ms: Math.round(times[Math.floor(times.length * 0.99)] ?? 0) };
}

/**
 * Slow clients: 5,000 connections that stop halfway through their headers and 4,000 logins that
 * declare a body and never send it (the reported attack held ~20,000; 9,000 is what one client
 * process holds under this machine's 20,000 open files), while one client sends real requests.
 */
async function slowClients(): Promise<AttackResult> {
  const stack = await startStack({});
  try {
    const port = Number(new URL(stack.gateway.url).port);
    const key = await createKey(stack, ['events:write']);
    const send = () => sendEvent(stack, key);
    let attacking = true;
    const traffic = realTraffic(send, () => attacking);
    const started = performance.now();
    const headers = await holdConnections(port, 5_000, 'GET /api/v1/api-keys HTTP/1.1\r\nHost: gatehouse\r\n');
    const bodies = await holdConnections(
      port,
      4_000,
      'POST /api/v1/auth/login HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n',
    );
    log(`slow-clients: 9,000 connections open after ${Math.round(performance.now() - started)} ms`);
    const progress = setInterval(() => {
      const open = [...headers.sockets, ...bodies.sockets].filter((socket) => !socket.destroyed).length;
      log(`slow-clients: ${open} still open after ${Math.round((performance.now() - started) / 1000)} s`);
    }, 5_000);
    const readyz = (await fetch(`${stack.gateway.opsUrl}/readyz`)).status;
    const lifetimes = [...(await headers.closed), ...(await bodies.closed)];
    clearInterval(progress);
    attacking = false;
    const real = await traffic;
    const longestS = Math.max(...lifetimes) / 1000;
    return {
      attack: 'slow-clients',
      traffic: '5,000 connections stopping mid-headers + 4,000 logins declaring a body never sent, default timeouts',
      figures: {
        'longest held (s)': Number(longestS.toFixed(1)),
        'readyz during': readyz,
        'real requests served': `${real.ok}/${real.sent}`,
        'real p99 (ms)': real.p99Ms,
        'dropped (MAX_CONNECTIONS)': await readMetric(stack.gateway.opsUrl, 'gatehouse_connections_dropped_total'),
      },
      // Each closed within REQUEST_TIMEOUT (30 s) and Node's one-second check.
      held: readyz === 200 && real.ok === real.sent && real.sent > 0 && longestS < 30 + 2,
    };
  } finally {
    await stack.close();
  }
}

/** One POST from a chosen loopback source address (Linux routes all of 127.0.0.0/8 to this host), on a connection of its own. */
function postFrom(url: string, localAddress: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  return post(url, { localAddress, agent: false }, body, headers);
}

/** One POST through `agent` (its keep-alive connections and source address). */
function postWith(agent: Agent, url: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  return post(url, { agent }, body, headers);
}

function post(url: string, options: RequestOptions, body: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { ...options, method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', () => resolve(0));
    req.end(body);
  });
}

async function sendEvent(stack: Stack, key: string): Promise<number> {
  const response = await fetch(`${stack.gateway.url}/api/v1/agents/1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{"type":"ping"}',
  });
  await response.arrayBuffer();
  return response.status;
}

/**
 * A login flood from many addresses (each under its own throttle) against API keys' first
 * uses: 2,000 logins for unknown emails from 200 loopback addresses at once, at the default
 * argon2id cost, while a new key is used for the first time. Before, that first use waited
 * 13 s behind the logins in the argon2id queue.
 */
async function loginFlood(): Promise<AttackResult> {
  const stack = await startStack({});
  try {
    const key = await createKey(stack, ['events:write']);
    const quiet = performance.now();
    await sendEvent(stack, await createKey(stack, ['events:write']));
    const quietFirstUseMs = performance.now() - quiet;
    const loginUrl = `${stack.gateway.url}/api/v1/auth/login`;
    const logins = Array.from({ length: 2_000 }, (_, i) =>
      postFrom(loginUrl, `127.0.${1 + Math.floor(i / 200)}.${1 + (i % 200)}`, JSON.stringify({ email: `nobody${i}@example.test`, password: 'guess' })),
    );
    // Once the queue holds logins, the key's first use.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = performance.now();
    const status = await sendEvent(stack, key);
    const firstUseMs = performance.now() - started;
    const statuses = await Promise.all(logins);
    const count = (wanted: number) => statuses.filter((each) => each === wanted).length;
    return {
      attack: 'login-flood',
      traffic: '2,000 logins for unknown emails from 200 addresses at once, default argon2id; a new key used for the first time meanwhile',
      figures: {
        'first use, quiet (ms)': Math.round(quietFirstUseMs),
        'first use during the flood (ms)': Math.round(firstUseMs),
        'first use status': status,
        'logins checked (401)': count(401),
        'logins refused (429)': count(429),
        'refused for a full login queue': await readMetric(stack.gateway.opsUrl, 'gatehouse_throttled_total', { kind: 'login_queue' }),
      },
      held: status === 200 && firstUseMs < 1_000,
    };
  } finally {
    await stack.close();
  }
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function guessBehind(prefix: string): string {
  const fill = KEY_TAG.length + KEY_BODY_LENGTH - KEY_PREFIX_LENGTH;
  return appendChecksum(prefix + [...randomBytes(fill)].map((byte) => BASE62[byte % 62]).join(''));
}

/** The flood's client addresses: Linux routes all of 127.0.0.0/8 locally; the real key comes from 127.0.0.1. */
const PREFIX_FLOOD_ADDRESSES = Array.from({ length: 1_000 }, (_, i) => `127.0.${2 + Math.floor(i / 250)}.${1 + (i % 250)}`);

/**
 * Guesses behind a real key's prefix that never stop: 1,000 client addresses, each guessing as
 * fast as the gateway answers it, while the real key is used for the first time from an address
 * of its own (retried every 100 ms until served). Reports how long the real key took (the
 * contract's 2 s, measured here, not asserted by the tests), the verifies between its first try
 * and its answer, and how many guesses were verified.
 */
async function prefixFlood(): Promise<AttackResult> {
  const stack = await startStack({});
  const verifies = () => readMetric(stack.gateway.opsUrl, 'gatehouse_argon2_verifications_total');
  try {
    const key = await createKey(stack, ['events:write']);
    const prefix = key.slice(0, KEY_PREFIX_LENGTH);
    const mismatchesBefore = await readMetric(stack.gateway.opsUrl, 'gatehouse_argon2_verifications_total', { result: 'mismatch' });
    let guessing = true;
    let guesses = 0;
    const eventsUrl = `${stack.gateway.url}/api/v1/agents/1/events`;
    const agents = PREFIX_FLOOD_ADDRESSES.map((localAddress) => new Agent({ keepAlive: true, localAddress, maxSockets: 1 }));
    const guessers = agents.map(async (agent) => {
      while (guessing) {
        await postWith(agent, eventsUrl, '{"type":"ping"}', { authorization: `Bearer ${guessBehind(prefix)}` });
        guesses++;
      }
    });
    const floodStarted = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const verifiesBefore = await verifies();
    const started = performance.now();
    let status = 0;
    let tries = 0;
    while (status !== 200 && performance.now() - started < 60_000) {
      tries++;
      status = await sendEvent(stack, key);
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const servedAfterMs = performance.now() - started;
    const verifiesUntilServed = (await verifies()) - verifiesBefore;
    guessing = false;
    await Promise.all(guessers);
    for (const agent of agents) agent.destroy();
    const floodS = (performance.now() - floodStarted) / 1000;
    const verified = (await readMetric(stack.gateway.opsUrl, 'gatehouse_argon2_verifications_total', { result: 'mismatch' })) - mismatchesBefore;
    return {
      attack: 'prefix-flood',
      traffic: `${PREFIX_FLOOD_ADDRESSES.length.toLocaleString('en')} client addresses guessing behind a real key's prefix without pause; the real key first used 5 s in from an address of its own, retried every 100 ms`,
      figures: {
        'real key served after (ms)': Math.round(servedAfterMs),
        'its tries': tries,
        'verifies from its first try to its answer': verifiesUntilServed,
        'guesses sent': guesses,
        'guesses verified (argon2id)': verified,
        'verified a second past the 20 that throttle it': Number((Math.max(0, verified - 20) / floodS).toFixed(2)),
      },
      // Past the 20 failures that throttle the prefix, about one verify a second.
      held: status === 200 && servedAfterMs < 2_000 && (verified - 20) / floodS <= 1.2,
    };
  } finally {
    await stack.close();
  }
}

/** The gateway's ordinary upstream connections (src/proxy/upstream.ts DEFAULT_UPSTREAM_CONNECTIONS). */
const ORDINARY_CONNECTIONS = 128;

/**
 * Requests queued behind a full pool of upstream calls that never answer, with
 * `UPSTREAM_TIMEOUT=1s`: 40 more than the pool's connections, sent at once. `UPSTREAM_TIMEOUT`
 * counts the wait for a connection, so the slowest `504` comes at the bound, not a connection's
 * wait plus a whole bound more (2 s: the suite once held it to 1.8 s, which a loaded machine
 * broke; it asserts the 504s, the figure is here).
 */
async function queuedUpstream(): Promise<AttackResult> {
  const hanging = createServer(() => {});
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-attacks-'));
  const gateway = await startGateway({ upstreamUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`, dataDir, env: { UPSTREAM_TIMEOUT: '1s' } });
  try {
    const admin = await loginAdmin(gateway.url);
    const count = ORDINARY_CONNECTIONS + 40;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await fetch(`${gateway.url}/hang/${i}`, { headers: { authorization: `Bearer ${admin}` } });
        await response.arrayBuffer();
        return { status: response.status, seconds: (performance.now() - started) / 1000 };
      }),
    );
    const slowest = Math.max(...answers.map((answer) => answer.seconds));
    const timedOut = answers.filter((answer) => answer.status === 504).length;
    return {
      attack: 'queued-upstream',
      traffic: `${count} requests at once to an upstream that never answers, ${ORDINARY_CONNECTIONS} connections, UPSTREAM_TIMEOUT=1s`,
      figures: { '504s': timedOut, 'slowest 504 (s)': Number(slowest.toFixed(2)) },
      held: timedOut === count && slowest < 1.8,
    };
  } finally {
    await gateway.process.stop();
    hanging.closeAllConnections();
    hanging.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const ATTACKS: Record<string, () => Promise<AttackResult>> = {
  'slow-clients': slowClients,
  'login-flood': loginFlood,
  'prefix-flood': prefixFlood,
  'queued-upstream': queuedUpstream,
};

async function main(): Promise<void> {
  const onlyAt = process.argv.indexOf('--only');
  const only = onlyAt === -1 ? Object.keys(ATTACKS) : (process.argv[onlyAt + 1] ?? '').split(',');
  const results: AttackResult[] = [];
  for (const name of only) {
    const attack = ATTACKS[name];
    if (attack === undefined) throw new Error(`unknown attack ${name} (known: ${Object.keys(ATTACKS).join(', ')})`);
    log(`${name}: running`);
    results.push(await attack());
  }
  const lines = ['| attack | traffic | figures | held |', '| --- | --- | --- | --- |'];
  for (const result of results) {
    const figures = Object.entries(result.figures)
      .map(([name, value]) => `${name}: ${value}`)
      .join('; ');
    lines.push(`| ${result.attack} | ${result.traffic} | ${figures} | ${result.held ? 'yes' : 'NO'} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  mkdirSync(join(REPO_ROOT, 'bench/results'), { recursive: true });
  writeFileSync(join(REPO_ROOT, 'bench/results/attacks.json'), `${JSON.stringify({ at: new Date().toISOString(), results }, null, 2)}\n`);
  if (results.some((result) => !result.held)) process.exitCode = 1;
}

await main();
