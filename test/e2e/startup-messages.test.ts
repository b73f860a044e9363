/* eslint-disable @typescript-eslint/no-explicit-any -- log lines and CLI answers are read as loosely typed JSON */
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli-process.ts';
import { freePort, runGateway, startGateway } from '../support/gateway-process.ts';

/** Values that must never be printed: a misspelled variable may hold a secret. */
const MISSPELLED = { PROT: '38090', REDIS_ULR: 'redis://:misspelt-secret@cache:6379', PORT_OPS: '38091' };
const WARNINGS = [
  'PORT_OPS is not a Gatehouse variable and is ignored; did you mean OPS_PORT?',
  'PROT is not a Gatehouse variable and is ignored; did you mean PORT?',
  'REDIS_ULR is not a Gatehouse variable and is ignored; did you mean REDIS_URL?',
];

describe('what a first start says about its configuration', { timeout: 120_000 }, () => {
  it('a misspelled variable gets one warning line naming it and the variable meant, never its value', async () => {
    const gateway = await startGateway({ ...MISSPELLED, HOSTNAME: 'box', HOME: '/root', NODE_OPTIONS: '', LOG_LEVEL: 'info' });
    try {
      const lines = gateway
        .output()
        .split('\n')
        .filter((line) => line.includes('"unknown_variable"'))
        .map((line) => JSON.parse(line));
      expect(lines.map((line) => line.msg)).toEqual(WARNINGS);
      expect(lines[0]).toMatchObject({ level: 40, event: 'unknown_variable', variable: 'PORT_OPS', meant: 'OPS_PORT' });
      // The ones it really is, HOME and HOSTNAME among them, are left alone.
      expect(gateway.output()).not.toMatch(/HOME|HOSTNAME|NODE_OPTIONS/);
      for (const value of Object.values(MISSPELLED)) expect(gateway.output()).not.toContain(value);
      // Ignored, as it says: the gateway listens on PORT.
      expect((await fetch(`${gateway.url}/favicon.ico`)).status).toBe(404);
    } finally {
      await gateway.stop();
    }
  });

  it('`gatehouse config check` shows the same warnings, in its text and its JSON', async () => {
    const plain = await runCli(['config', 'check'], MISSPELLED);
    expect(plain.code, plain.stderr).toBe(0);
    for (const warning of WARNINGS) expect(plain.stdout).toContain(`warning: ${warning}\n`);
    const json = await runCli(['config', 'check', '--json'], MISSPELLED);
    expect(json.json<any>().warnings).toEqual([
      { variable: 'PORT_OPS', meant: 'OPS_PORT', message: WARNINGS[0] },
      { variable: 'PROT', meant: 'PORT', message: WARNINGS[1] },
      { variable: 'REDIS_ULR', meant: 'REDIS_URL', message: WARNINGS[2] },
    ]);
    for (const value of Object.values(MISSPELLED)) expect(plain.stdout + json.stdout).not.toContain(value);
    expect((await runCli(['config', 'check', '--json'], {})).json<any>().warnings).toEqual([]);
  });

  it('PORT equal to OPS_PORT stops the start with one line naming both, not "already in use"', async () => {
    const port = String(await freePort());
    const { code, output } = await runGateway({ PORT: port, OPS_PORT: port }, 60_000);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([`gatehouse: PORT and OPS_PORT: both are ${port}; the health and metrics listener needs a port of its own`]);
  });
});
