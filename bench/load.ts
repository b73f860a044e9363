import autocannon from 'autocannon';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type LoadTool = 'wrk' | 'autocannon';

/** One load run: fixed connections for a fixed time (or a fixed rate), the same request each time. */
export interface LoadSpec {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** Bearer tokens sent in turn, one per request (`Authorization: Bearer …`). */
  rotate?: readonly string[];
  connections: number;
  seconds: number;
  /** Requests per second over all connections (autocannon only); unset: as fast as answered. */
  rate?: number;
}

export interface LoadResult {
  tool: LoadTool;
  requests: number;
  seconds: number;
  rps: number;
  /** Latencies in milliseconds. */
  p50: number;
  p99: number;
  p999: number;
  /** Answers that were not 2xx (wrk: status ≥ 400), and socket errors or timeouts. */
  non2xx: number;
  errors: number;
  /** Answers by status, where the tool reports them (autocannon). */
  statuses?: Record<string, number>;
  /** Share of the machine (%) other processes used meanwhile (bench/cpu.ts). */
  foreignCpu?: number;
  /**
   * CPU time the server under test (the proxy; the upstream in `direct`) spent per request, in
   * µs: its cost, steadier than req/s when the machine's speed drifts.
   */
  cpuPerRequestUs?: number;
}

export function wrkAvailable(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // wrk prints its version and exits 1.
    return (error as { status?: number }).status === 1;
  }
}

export async function runLoad(tool: LoadTool, spec: LoadSpec): Promise<LoadResult> {
  if (spec.rate !== undefined || tool === 'autocannon') return runAutocannon(spec);
  return runWrk(spec);
}

async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const rotate = spec.rotate;
  let turn = 0;
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.seconds,
    pipelining: 1,
    timeout: 10,
    ...(spec.rate === undefined ? {} : { overallRate: spec.rate }),
    requests: [
      {
        method: spec.method,
        headers: spec.headers,
        ...(spec.body === undefined ? {} : { body: spec.body }),
        ...(rotate === undefined || rotate.length === 0
          ? {}
          : {
              setupRequest: (request) => {
                turn = (turn + 1) % rotate.length;
                return { ...request, headers: { ...spec.headers, authorization: `Bearer ${rotate[turn]}` } };
              },
            }),
      },
    ],
  });
  const statuses: Record<string, number> = {};
  for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) statuses[status] = count;
  return {
    tool: 'autocannon',
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    p999: result.latency.p99_9,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    statuses,
  };
}

/** Long-bracket Lua string: no escaping needed for anything our requests carry. */
function lua(text: string): string {
  return `[==[${text}]==]`;
}

function wrkScript(spec: LoadSpec, tokensFile: string | undefined): string {
  const headerLines = Object.entries(spec.headers)
    .map(([name, value]) => `fixed[ ${lua(name)} ] = ${lua(value)}`)
    .join('\n');
  const common = `
local fixed = {}
${headerLines}
local body = ${spec.body === undefined ? 'nil' : lua(spec.body)}
local method = ${lua(spec.method)}
`;
  const rotating = `
local tokens = {}
local built = {}
local turn = 0
init = function(args)
  for line in io.lines(${lua(tokensFile ?? '')}) do tokens[#tokens + 1] = line end
end
request = function()
  turn = turn % #tokens + 1
  local r = built[turn]
  if r == nil then
    local h = {}
    for k, v in pairs(fixed) do h[k] = v end
    h["Authorization"] = "Bearer " .. tokens[turn]
    r = wrk.format(method, nil, h, body)
    built[turn] = r
  end
  return r
end
`;
  const constant = `
wrk.method = method
wrk.body = body
for k, v in pairs(fixed) do wrk.headers[k] = v end
`;
  const done = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nRESULT {"requests":%d,"duration_us":%d,"p50":%d,"p99":%d,"p999":%d,"status":%d,"errors":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    e.status, e.connect + e.read + e.write + e.timeout))
end
`;
  return common + (tokensFile === undefined ? constant : rotating) + done;
}

async function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-wrk-'));
  try {
    let tokensFile: string | undefined;
    if (spec.rotate !== undefined && spec.rotate.length > 0) {
      tokensFile = join(dir, 'tokens.txt');
      writeFileSync(tokensFile, spec.rotate.join('\n') + '\n');
    }
    const script = join(dir, 'load.lua');
    writeFileSync(script, wrkScript(spec, tokensFile));
    // One thread: on a two-core machine the load generator should take as little as it can.
    const args = ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, '--timeout', '10s', '-s', script, spec.url];
    const output = await new Promise<string>((resolve, reject) =>
      execFile('wrk', args, { maxBuffer: 1 << 20 }, (error, stdout, stderr) =>
        // A script error does not stop wrk: it runs a plain GET instead, which must not pass for the scenario.
        error || stderr.trim() !== '' ? reject(new Error(`wrk failed: ${stderr || error?.message}`)) : resolve(stdout),
      ),
    );
    const line = output.split('\n').find((candidate) => candidate.startsWith('RESULT '));
    if (line === undefined) throw new Error(`wrk printed no result:\n${output}`);
    const parsed = JSON.parse(line.slice('RESULT '.length)) as Record<string, number>;
    const seconds = parsed.duration_us! / 1e6;
    return {
      tool: 'wrk',
      requests: parsed.requests!,
      seconds,
      rps: parsed.requests! / seconds,
      p50: parsed.p50! / 1000,
      p99: parsed.p99! / 1000,
      p999: parsed.p999! / 1000,
      non2xx: parsed.status!,
      errors: parsed.errors!,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
