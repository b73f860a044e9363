import type { LoadTool } from './load.ts';

export interface BenchOptions {
  quick: boolean;
  /** Seconds of each measured run, and of the warm-up run before it (discarded). */
  seconds: number;
  warmup: number;
  connections: number;
  /** Each scenario is measured once per round; rounds run one after the other, so drift shows. */
  rounds: number;
  tool: LoadTool | undefined;
  /** Scenario names to run (all when empty). */
  only: string[];
  /** Spawn the gateway with --cpu-prof; profiles land in bench/results/profiles. */
  profile: boolean;
  /** Seed the store again instead of copying the cached seed. */
  fresh: boolean;
  /** Keys created and warmed for the RSS figure (0: skip it). */
  rssKeys: number;
  /** Keys in rotation in `events-many-keys`. */
  manyKeys: number;
  /** Never-seen keys per round in `cold-keys`, and keys in the storm. */
  coldKeys: number;
  stormKeys: number;
  /** The 3-replica revocation check (needs PostgreSQL and Redis). */
  replicas: boolean;
}

export const USAGE = `usage: npm run bench -- [--quick] [--only a,b] [--tool wrk|autocannon] [--seconds N] [--warmup N]
                       [--connections N] [--rounds N] [--profile] [--fresh] [--no-rss] [--no-replicas]`;

export function parseArgs(argv: readonly string[]): BenchOptions {
  const quick = argv.includes('--quick');
  const options: BenchOptions = {
    quick,
    seconds: quick ? 2 : 10,
    warmup: quick ? 1 : 3,
    connections: 50,
    rounds: quick ? 1 : 2,
    tool: undefined,
    only: [],
    profile: false,
    fresh: false,
    rssKeys: quick ? 0 : 100_000,
    manyKeys: 10_000,
    coldKeys: quick ? 20 : 100,
    stormKeys: quick ? 3 : 10,
    replicas: !quick,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const next = inline ?? argv[++i];
      if (next === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
      return next;
    };
    const count = () => {
      const text = value();
      const number = Number(text);
      if (!Number.isInteger(number) || number < 0) throw new Error(`${flag}: not a whole number: ${text}`);
      return number;
    };
    switch (flag) {
      case '--quick':
        break;
      case '--seconds':
        options.seconds = count();
        break;
      case '--warmup':
        options.warmup = count();
        break;
      case '--connections':
        options.connections = count();
        break;
      case '--rounds':
        options.rounds = Math.max(1, count());
        break;
      case '--tool': {
        const tool = value();
        if (tool !== 'wrk' && tool !== 'autocannon') throw new Error(`--tool: wrk or autocannon, not ${tool}`);
        options.tool = tool;
        break;
      }
      case '--only':
        options.only = value().split(',').map((name) => name.trim()).filter(Boolean);
        break;
      case '--profile':
        options.profile = true;
        break;
      case '--fresh':
        options.fresh = true;
        break;
      case '--no-rss':
        options.rssKeys = 0;
        break;
      case '--rss-keys':
        options.rssKeys = count();
        break;
      case '--no-replicas':
        options.replicas = false;
        break;
      case '--help':
      case '-h':
        throw new Error(USAGE);
      default:
        throw new Error(`unknown option ${arg}\n${USAGE}`);
    }
  }
  return options;
}

/** True when `name` is selected by --only (everything is, without it). */
export function selected(options: BenchOptions, name: string): boolean {
  return options.only.length === 0 || options.only.includes(name);
}
