import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { freePort } from './gateway-process.ts';

let available: boolean | undefined;

/**
 * Whether a `redis-server` binary is on PATH. Suites that need one are skipped without it,
 * loudly; with REQUIRE_SERVICES=1 its absence fails the run instead.
 */
export function redisServerAvailable(): boolean {
  available ??= spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!available) {
    if (process.env.REQUIRE_SERVICES === '1') throw new Error('REQUIRE_SERVICES=1 but no redis-server binary is on PATH (fault tests need one)');
    console.warn('No redis-server binary on PATH: the suites that kill and restart Redis are SKIPPED.');
  }
  return available;
}

/**
 * A private `redis-server` on a free port, for tests that take Redis away and bring it back
 * without disturbing the shared test Redis. In-memory only: a restart starts empty, as a
 * crashed cache would.
 */
export interface PrivateRedis {
  port: number;
  url: string;
  /** Starts the server (again) on the same port and waits until it answers. */
  start(): Promise<void>;
  /** SIGKILL, and wait until the port is closed. */
  kill(): Promise<void>;
  /** SIGSTOP: the process hangs, its connections stay open and unanswered (a hung or partitioned Redis). */
  pause(): void;
  /** SIGCONT after `pause`. */
  resume(): void;
  readonly running: boolean;
}

export async function privateRedis(port?: number): Promise<PrivateRedis> {
  const chosen = port ?? (await freePort());
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const server: PrivateRedis = {
    port: chosen,
    url: `redis://127.0.0.1:${chosen}`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async start() {
      if (server.running) return;
      child = spawn('redis-server', ['--port', String(chosen), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: 'ignore',
      });
      const started = child;
      exited = new Promise((resolve) => started.once('exit', () => resolve()));
      const deadline = Date.now() + 10_000;
      while (!(await answersPing(chosen))) {
        if (!server.running) throw new Error(`redis-server on port ${chosen} exited at start`);
        if (Date.now() > deadline) throw new Error(`redis-server on port ${chosen} did not start in 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    async kill() {
      // A stopped process takes SIGKILL as well.
      if (child !== undefined && server.running) child.kill('SIGKILL');
      await exited;
    },
    pause() {
      if (child !== undefined && server.running) child.kill('SIGSTOP');
    },
    resume() {
      if (child !== undefined && server.running) child.kill('SIGCONT');
    },
  };
  return server;
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(500);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
