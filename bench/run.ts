/**
 * `npm run bench [-- --quick]`: the scenarios of docs/performance.md in one run on loopback.
 * Starts every server itself (upstream, references, the gateway as `npm start` runs it), loads
 * each with wrk (or autocannon) for a fixed time after a discarded warm-up, prints the table and
 * writes bench/results/latest.json; a full run is also kept in bench/results/history/.
 * Progress goes to stderr, the tables to stdout.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DEFAULTS } from '../src/config/env.ts';
import { parseArgs, selected, type BenchOptions } from './args.ts';
import { timeArgon2Verify, type Argon2Params } from './argon2-time.ts';
import { Client } from './client.ts';
import { cpuSnapshot, foreignCpu, processCpuMs, quiescent } from './cpu.ts';
import { coldKeys, storm } from './cold.ts';
import { loginAdmin, startGateway, type GatewayHandle, type GatewayOptions } from './gateway.ts';
import { invalidKeys } from './invalid.ts';
import { runLoad, wrkAvailable, type LoadResult, type LoadTool } from './load.ts';
import { measureRss, warmKeys } from './memory.ts';
import { findNginx, nginxVersion, startNginx } from './nginx.ts';
import { freePort, REPO_ROOT, spawnServer, type Spawned } from './processes.ts';
import { evaluateTargets, rowOf, scenarioTable, targetTable, type Extras, type Row, type RssFigure } from './report.ts';
import { LOAD_SCENARIOS, type Credential, type LoadScenario, type Target } from './scenarios.ts';
import { seededDatabase, seededStore } from './seed-cache.ts';
import type { SeedGroup } from './seed.ts';
import { findPostgres, findRedis, replicaServices, staleAcceptances } from './stale.ts';
import { startup } from './startup.ts';

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Variables the gateway is tuned by; passed through from the benchmark's environment when set. */
const PASSED_THROUGH = ['ARGON2_MEMORY_KIB', 'ARGON2_TIME_COST', 'ARGON2_PARALLELISM', 'ARGON2_CONCURRENCY', 'KEY_CACHE_SIZE', 'KEY_CACHE_TTL', 'LOG_LEVEL'];

/**
 * Keys verified once during warm-up and then served from the cache: their argon2id cost never
 * shows in the measured runs, so they are hashed cheaply to create 10,000 (or 100,000) in seconds.
 */
const CHEAP_ARGON2: Argon2Params = { memoryKiB: 64, timeCost: 1, parallelism: 1 };

function configuredArgon2(): Argon2Params {
  const read = (name: string, fallback: number) => Number(process.env[name] || fallback);
  return {
    memoryKiB: read('ARGON2_MEMORY_KIB', DEFAULTS.ARGON2_MEMORY_KIB),
    timeCost: read('ARGON2_TIME_COST', DEFAULTS.ARGON2_TIME_COST),
    parallelism: read('ARGON2_PARALLELISM', DEFAULTS.ARGON2_PARALLELISM),
  };
}

/** The limit of `events-rate-limited`'s key: counted on every request, never reached (a million a second). */
const NEVER_REACHED = { requests: 1_000_000, perSeconds: 1 };

function seedGroups(options: BenchOptions, argon2: Argon2Params): SeedGroup[] {
  const bound = { scopes: ['events:write'], agentId: 1 };
  return [
    { name: 'events', count: 1, ...bound, argon2 },
    { name: 'limited', count: 1, ...bound, argon2, rateLimit: NEVER_REACHED },
    { name: 'mcp', count: 1, scopes: ['mcp:knowledge'], agentId: 1, argon2 },
    { name: 'many', count: Math.max(options.manyKeys, options.rssKeys), ...bound, argon2: CHEAP_ARGON2 },
    { name: 'cold', count: options.coldKeys, ...bound, argon2 },
    { name: 'storm', count: options.stormKeys, ...bound, argon2 },
  ];
}

function machine(tool: LoadTool, nginx: string | undefined) {
  const text = (command: string, args: string[]) => {
    try {
      return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return undefined;
    }
  };
  return {
    cores: availableParallelism(),
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    loadTool: tool === 'wrk' ? (text('sh', ['-c', 'wrk --version 2>&1 | head -1'])?.replace(/ Copyright.*$/, '') ?? 'wrk') : 'autocannon 9',
    nginx: nginx === undefined ? undefined : nginxVersion(nginx),
    commit: text('git', ['-C', REPO_ROOT, 'describe', '--always', '--dirty']),
    loadAverage: text('cat', ['/proc/loadavg']),
  };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const tool: LoadTool = options.tool ?? (wrkAvailable() ? 'wrk' : 'autocannon');
  const nginxBinary = findNginx();
  const argon2 = configuredArgon2();
  const passed = Object.fromEntries(PASSED_THROUGH.flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])));
  const started = Date.now();
  const runDir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  const servers: Spawned[] = [];
  const extras: Extras = { skipped: {} };
  const runs = new Map<string, LoadResult[]>();
  const probes = new Map<string, string>();
  const notes = new Map<string, string>();
  const profileDir = join(REPO_ROOT, 'bench/results/profiles');

  log(`gatehouse bench: ${options.quick ? 'quick' : 'full'}, ${tool}, ${options.connections} connections, ` +
    `${options.warmup} s warm-up + ${options.seconds} s measured, ${options.rounds} round(s)`);
  try {
    // The gateway runs as `npm start` runs it: from the compiled dist/, built from the sources as they are now.
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    if (selected(options, 'argon2') || selected(options, 'cold-keys')) {
      extras.argon2 = await timeArgon2Verify(argon2, options.quick ? 5 : 20);
      log(`argon2id verify at ${extras.argon2.params}: median ${extras.argon2.verifyMsMedian.toFixed(1)} ms`);
    }

    const keys = await seededStore(seedGroups(options, argon2), join(runDir, 'data'), options.fresh, log);
    // The Redis gateway's own copy, taken before any gateway opens the store.
    if (selected(options, 'events-rate-limited-redis')) cpSync(join(runDir, 'data'), join(runDir, 'data-redis'), { recursive: true });

    // The servers: upstream, the three references, the gateway.
    const originPort = await freePort();
    const originUrl = `http://127.0.0.1:${originPort}`;
    const profileFlags = options.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
    if (options.profile) mkdirSync(profileDir, { recursive: true });
    const node = (name: string, script: string, env: Record<string, string>, fixedPort?: number, flags: string[] = []) =>
      (fixedPort === undefined ? freePort() : Promise.resolve(fixedPort)).then(async (port) => {
        const server = await spawnServer({ name, command: process.execPath, args: [...flags, script], env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, readyUrl: `http://127.0.0.1:${port}/` });
        servers.push(server);
        return `http://127.0.0.1:${port}`;
      });
    await node('origin', 'bench/origin.ts', {}, originPort);
    const targets = new Map<Target, string>([['origin', originUrl]]);
    targets.set('bare-proxy', await node('bare-proxy', 'bench/bare-proxy.ts', { UPSTREAM_URL: originUrl }));
    // Profiled with the gateway: the two profiles side by side show what the gateway adds.
    targets.set('node-floor', await node('node-floor', 'bench/node-floor.ts', { UPSTREAM_URL: originUrl }, undefined, profileFlags));
    if (nginxBinary !== undefined) {
      const port = await freePort();
      servers.push(await startNginx(nginxBinary, join(runDir, 'nginx'), port, originPort));
      targets.set('nginx', `http://127.0.0.1:${port}`);
    } else {
      extras.skipped!['nginx-proxy'] = 'nginx is not installed';
    }
    const gateway = await startGateway({
      upstreamUrl: originUrl,
      dataDir: join(runDir, 'data'),
      env: passed,
      ...(options.profile ? { nodeFlags: profileFlags } : {}),
    });
    servers.push(gateway.process);
    targets.set('gateway', gateway.url);
    // The process whose CPU per request each target's rows show (nginx's work is in its worker: not shown).
    const pidOf = new Map<Target, number>([['gateway', gateway.process.pid]]);
    const redisGateway = await startRedisGateway(options, originUrl, runDir, passed, extras);
    if (redisGateway !== undefined) {
      servers.push(redisGateway.process);
      targets.set('gateway-redis', redisGateway.url);
      pidOf.set('gateway-redis', redisGateway.process.pid);
    }
    for (const target of ['origin', 'bare-proxy', 'node-floor'] as const) {
      const server = servers.find((candidate) => candidate.name === target);
      if (server !== undefined) pidOf.set(target, server.pid);
    }

    const adminToken = await loginAdmin(gateway.url);
    const many = keys['many']!.slice(0, options.manyKeys);
    const credentials: Record<Credential, readonly string[]> = {
      'events-key': keys['events']!,
      'mcp-key': keys['mcp']!,
      'admin-token': [adminToken],
      many,
      'limited-key': keys['limited']!,
    };
    const scenarios = LOAD_SCENARIOS.filter((scenario) => selected(options, scenario.name) && targets.has(scenario.target));

    // One request of each scenario first: what it answers is shown beside any non-2xx count.
    const probeClient = new Client(gateway.url, 4);
    for (const scenario of scenarios) {
      const client = scenario.target === 'gateway' ? probeClient : new Client(targets.get(scenario.target)!, 1);
      const answer = await client.send({ ...scenario, method: 'POST', headers: { ...scenario.headers, authorization: `Bearer ${credentials[scenario.credential][0]}` } });
      probes.set(scenario.name, answer.code === undefined ? String(answer.status) : `${answer.status} ${answer.code}`);
      if (client !== probeClient) await client.close();
    }
    await probeClient.close();
    log(`probes: ${[...probes].map(([name, status]) => `${name} ${status}`).join(', ')}`);

    if (scenarios.some((scenario) => scenario.credential === 'many')) {
      const warmStarted = performance.now();
      await warmKeys(gateway, many, 32);
      log(`warmed ${many.length} keys (first uses: store read + argon2id) in ${((performance.now() - warmStarted) / 1000).toFixed(1)} s`);
    }

    const settleStarted = performance.now();
    await quiescent(gateway.process.pid);
    log(`gateway quiet after ${((performance.now() - settleStarted) / 1000).toFixed(1)} s`);

    // --quick warms each server up once, before its first scenario (it stays under a minute);
    // the full run warms up before every measured run.
    const warmed = new Set<Target>();
    for (let round = 1; round <= options.rounds; round++) {
      // Even rounds run in reverse order (A B … B A): a drift of the machine's speed across the run
      // then weighs on every scenario alike in the means, instead of on those measured last.
      for (const scenario of round % 2 === 0 ? scenarios.toReversed() : scenarios) {
        const warmup = options.quick && warmed.has(scenario.target) ? 0 : options.warmup;
        warmed.add(scenario.target);
        const result = await measure(tool, { ...options, warmup }, scenario, targets.get(scenario.target)!, credentials[scenario.credential], servers.map((server) => server.pid), pidOf.get(scenario.target));
        runs.set(scenario.name, [...(runs.get(scenario.name) ?? []), result]);
        log(`  round ${round} ${scenario.name.padEnd(17)} ${Math.round(result.rps).toString().padStart(6)} req/s  p50 ${result.p50.toFixed(2)}  p99 ${result.p99.toFixed(2)} ms` +
          (result.foreignCpu === undefined ? '' : `  others' CPU ${result.foreignCpu.toFixed(0)}%`) +
          (result.non2xx + result.errors > 0 ? `  ${result.non2xx} non-2xx, ${result.errors} errors` : ''));
      }
    }
    if (many.length > 0 && runs.has('events-many-keys')) {
      notes.set('events-many-keys', `gateway RSS after this row: ${((gateway.process.rss() ?? 0) / 2 ** 20).toFixed(0)} MB`);
    }

    if (selected(options, 'invalid-keys')) {
      extras.invalid = await invalidKeys(gateway, {
        validKey: keys['events']![0]!,
        // Well below saturation (the gateway serves several thousand a second on 2 cores shared
        // with the load generators), so the valid key's p99 shows the attack's interference, not queueing.
        validRate: 500,
        attackRate: 1_000,
        seconds: options.quick ? 2 : 10,
        warmupSeconds: 1,
        controlOrigin: originUrl,
      });
      log(`invalid-keys: valid p99 ${extras.invalid.p99.toFixed(2)} ms (alone ${extras.invalid.baselineP99.toFixed(2)} ms, ` +
        `attack sent to the upstream instead ${extras.invalid.controlP99.toFixed(2)} ms), ` +
        `wrong keys ${JSON.stringify(extras.invalid.attackStatuses)}, argon2 during the attack ${extras.invalid.argon2DuringAttack}`);
    }
    if (selected(options, 'cold-keys')) {
      extras.storm = await storm(gateway, keys['storm']!, 100);
      log(`storm: ${extras.storm.keys} keys × 100 concurrent first uses: ${extras.storm.verifies} argon2 verifies, ${JSON.stringify(extras.storm.statuses)}`);
      extras.cold = await coldKeys(gateway, keys['cold']!, 8);
      log(`cold-keys: ${extras.cold.verifiesPerSecond.toFixed(0)} verifies/s, ${extras.cold.perKey.toFixed(2)} argon2/key, ${JSON.stringify(extras.cold.statuses)}`);
    }
    await gateway.process.stop();
    const quiet = { ...passed, LOG_LEVEL: passed['LOG_LEVEL'] ?? 'warn' };

    if (!options.quick && selected(options, 'startup')) {
      extras.startup = await startup(originUrl, quiet);
      log(`start-up: /readyz after ${extras.startup.readyMsMedian.toFixed(0)} ms (median), peak RSS ${extras.startup.peakMbMax.toFixed(0)} MB`);
    } else {
      extras.skipped!['startup'] = options.quick ? 'skipped in --quick' : 'not selected (--only)';
    }

    if (options.rssKeys > 0 && selected(options, 'rss')) {
      extras.rss = {};
      const rssDir = join(runDir, 'rss');
      // Its own seed's keys: the same spec, but the cache is keyed by the code too, which may have changed since.
      const rssKeys = (await seededStore(seedGroups(options, argon2), rssDir, false, log))['many']!.slice(0, options.rssKeys);
      extras.rss.embedded = await rssOf('embedded', { upstreamUrl: originUrl, dataDir: rssDir, env: quiet }, rssKeys);
      const postgres = await findPostgres();
      if (postgres === undefined) {
        extras.skipped!['rss-postgres'] = 'no PostgreSQL: set BENCH_DATABASE_URL';
      } else {
        const database = await seededDatabase([{ name: 'many', count: options.rssKeys, scopes: ['events:write'], agentId: 1, argon2: CHEAP_ARGON2 }], postgres, options.fresh, log);
        try {
          extras.rss.postgres = await rssOf('PostgreSQL', { upstreamUrl: originUrl, databaseUrl: database.url, env: quiet }, database.keys['many']!);
        } finally {
          await database.drop();
        }
      }
    } else {
      extras.skipped!['rss'] = options.quick ? 'skipped in --quick' : options.rssKeys === 0 ? 'skipped (--no-rss)' : 'not selected (--only)';
    }

    if (options.replicas && selected(options, 'stale')) {
      const services = await replicaServices();
      if (services === undefined) {
        extras.skipped!['stale'] = 'needs PostgreSQL and Redis: set BENCH_DATABASE_URL and BENCH_REDIS_URL';
      } else {
        extras.stale = await staleAcceptances(services, originUrl, options.quick ? 3 : 10, log);
        log(`stale acceptances after 204: ${extras.stale.accepted} of ${extras.stale.attempts}`);
      }
    } else {
      extras.skipped!['stale'] = options.quick ? 'skipped in --quick' : options.replicas ? 'not selected (--only)' : 'skipped (--no-replicas)';
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(runDir, { recursive: true, force: true });
  }

  const rows: Row[] = [...runs].map(([name, results]) => {
    const scenario = LOAD_SCENARIOS.find((candidate) => candidate.name === name)!;
    return rowOf(name, scenario.what, results, probes.get(name) ?? '?', notes.get(name));
  });
  const targetResults = evaluateTargets(new Map(rows.map((row) => [row.name, row])), extras);
  const info = machine(tool, nginxBinary);
  const seconds = (Date.now() - started) / 1000;

  const out = process.stdout;
  out.write(`\nGatehouse benchmark — ${new Date().toISOString()} — ${info.cores} cores, ${info.cpu}, node ${info.node}, ${info.loadTool}\n`);
  out.write(`${options.connections} connections, POST of a small JSON body, ${options.warmup} s warm-up${options.quick ? " before each server's first scenario" : ""} discarded, ${options.seconds} s measured × ${options.rounds} round(s), even rounds in reverse order; means of the rounds\n`);
  out.write(`drift: spread of req/s between rounds; others' CPU: share of the machine used by processes other than the benchmark's during the measured runs\n\n`);
  out.write(scenarioTable(rows, extras, targetResults) + '\n\n');
  out.write(targetTable(targetResults) + '\n\n');
  if (extras.argon2) out.write(`argon2id verify at the configured ${extras.argon2.params}: median ${extras.argon2.verifyMsMedian.toFixed(1)} ms, p90 ${extras.argon2.verifyMsP90.toFixed(1)} ms (one at a time)\n`);
  for (const [name, note] of notes) out.write(`${name}: ${note}\n`);
  for (const [name, why] of Object.entries(extras.skipped ?? {})) out.write(`${name}: ${why}\n`);
  out.write(`finished in ${seconds.toFixed(0)} s\n`);

  mkdirSync(join(REPO_ROOT, 'bench/results'), { recursive: true });
  const resultsPath = join(REPO_ROOT, 'bench/results/latest.json');
  const date = new Date().toISOString();
  const results = JSON.stringify({ date, seconds, machine: info, options, argon2: { configured: argon2, cheapForWarmKeys: CHEAP_ARGON2 }, rows, extras, targets: targetResults }, null, 2) + '\n';
  writeFileSync(resultsPath, results);
  out.write(`results: ${resultsPath}\n`);
  // Every full run is kept: the history of the figures lives in these files, not in prose.
  if (!options.quick && options.only.length === 0) {
    const historyPath = join(REPO_ROOT, 'bench/results/history', `${date.slice(0, 19).replaceAll(':', '-')}Z-${info.commit ?? 'unknown'}.json`);
    mkdirSync(dirname(historyPath), { recursive: true });
    writeFileSync(historyPath, results);
    out.write(`kept in the history: ${historyPath}\n`);
  }
  if (options.profile) out.write(`CPU profiles: ${profileDir}\n`);
}

/**
 * A second gateway for `events-rate-limited-redis`, with REDIS_URL, on its own copy of the
 * seeded store (`data-redis`: the embedded store is one process at a time): started now, so its row is
 * measured in the rounds beside the others. Undefined when not selected or there is no Redis.
 */
async function startRedisGateway(options: BenchOptions, originUrl: string, runDir: string, env: Record<string, string>, extras: Extras): Promise<GatewayHandle | undefined> {
  if (!selected(options, 'events-rate-limited-redis')) return undefined;
  const redisUrl = await findRedis();
  if (redisUrl === undefined) {
    extras.skipped!['events-rate-limited-redis'] = 'no Redis: set BENCH_REDIS_URL';
    return undefined;
  }
  return startGateway({ upstreamUrl: originUrl, dataDir: join(runDir, 'data-redis'), redisUrl, env });
}

/** A fresh gateway on `gateway`'s store: RSS idle, then with every key verified and cached. */
async function rssOf(store: string, gateway: GatewayOptions, keys: readonly string[]): Promise<RssFigure> {
  const inspectPort = await freePort();
  const fresh = await startGateway({ ...gateway, nodeFlags: [`--inspect=127.0.0.1:${inspectPort}`] });
  try {
    const started = performance.now();
    const figure = await measureRss(fresh, keys, inspectPort);
    log(`RSS (${store}): idle ${figure.idleMb.toFixed(0)} MB (live heap ${figure.idleHeapUsedMb.toFixed(0)} MB); with ${figure.keys} cached keys ` +
      `${figure.cachedMb.toFixed(0)} MB, after a full GC ${figure.afterGcMb.toFixed(0)} MB ` +
      `(live heap ${figure.heapUsedMb.toFixed(0)} MB of ${figure.heapTotalMb.toFixed(0)} MB reserved, external ${figure.externalMb.toFixed(0)} MB) ` +
      `(${((performance.now() - started) / 1000).toFixed(0)} s; argon2 verifies when used again: ${figure.verifiesOnRepeat})`);
    return figure;
  } finally {
    await fresh.process.stop();
  }
}

async function measure(
  tool: LoadTool,
  options: BenchOptions,
  scenario: LoadScenario,
  baseUrl: string,
  tokens: readonly string[],
  pids: readonly number[],
  serverPid: number | undefined,
): Promise<LoadResult> {
  const spec = {
    url: `${baseUrl}${scenario.path}`,
    method: 'POST',
    headers: tokens.length === 1 ? { ...scenario.headers, authorization: `Bearer ${tokens[0]}` } : scenario.headers,
    body: scenario.body,
    ...(tokens.length > 1 ? { rotate: tokens } : {}),
    connections: options.connections,
  };
  if (options.warmup > 0) await runLoad(tool, { ...spec, seconds: options.warmup });
  const before = cpuSnapshot(pids);
  const serverBefore = serverPid === undefined ? undefined : processCpuMs(serverPid);
  const result = await runLoad(tool, { ...spec, seconds: options.seconds });
  const serverAfter = serverPid === undefined ? undefined : processCpuMs(serverPid);
  const foreign = foreignCpu(before, cpuSnapshot(pids));
  return {
    ...result,
    ...(foreign === undefined ? {} : { foreignCpu: foreign }),
    ...(serverBefore === undefined || serverAfter === undefined || result.requests === 0 ? {} : { cpuPerRequestUs: ((serverAfter - serverBefore) * 1000) / result.requests }),
  };
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
