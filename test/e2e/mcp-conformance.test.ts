import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthShim, type AuthShim } from '../conformance/auth-shim.ts';
import { differences, failing } from '../conformance/compare-results.ts';
import { startReferenceServer, type ReferenceServer } from '../conformance/reference-server.ts';
import { ERAS, runSuite, type SuiteResults } from '../conformance/run-suite.ts';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';

// The official MCP conformance suite (@modelcontextprotocol/conformance), server scenarios of
// both protocol eras, run twice: directly against the project's reference server
// (test/conformance/reference-server.ts), then through the gateway in front of it, its tool
// table test/conformance/mcp-tools.yaml opening everything the scenarios use. The gateway is
// meant to be invisible to a conforming client: both runs must come out the same, except
// where the gateway refuses something on purpose (INTENDED_DIFFERENCES).
// The CLI cannot send an API key, so the gateway run goes through a forwarder that adds it
// (test/conformance/auth-shim.ts).

/** `<era>/<scenario>` the reference server itself fails, and why. None: it passes every one. */
const FIXTURE_FAILURES: Record<string, string> = {};

/**
 * `<era>/<scenario>` whose result through the gateway differs on purpose, and why. None: the
 * tool table opens every tool and method the scenarios use, MCP_ALLOWED_ORIGINS admits the
 * suite's own origin, and where the gateway answers in the server's place (a foreign Origin,
 * an unknown method, a mirror header that disagrees with the body, an unknown revision) it
 * must answer as the revision asks a server to.
 */
const INTENDED_DIFFERENCES: Record<string, string> = {};

const CONFIG_DIR = fileURLToPath(new URL('../conformance/', import.meta.url));

describe('MCP conformance suite: the reference server directly, and through the gateway', () => {
  let reference: ReferenceServer;
  let shim: AuthShim;
  let gateway: GatewayProcess;
  let direct: SuiteResults;
  let throughGateway: SuiteResults;

  beforeAll(async () => {
    reference = await startReferenceServer();
    shim = await startAuthShim();
    gateway = await startGateway({
      UPSTREAM_URL: new URL(reference.url).origin,
      CONFIG_DIR,
      LOG_LEVEL: 'warn',
      // The suite's well-behaved requests come from the shim's own origin (dns-rebinding-protection).
      MCP_ALLOWED_ORIGINS: shim.origin,
    });
    const admin = await loginAdmin(gateway.url);
    const key = await createKey(gateway.url, admin, { name: 'conformance', scopes: ['mcp:conformance'] });
    if (key.status !== 201) throw new Error(`create key failed: ${key.status} ${key.text}`);
    shim.forwardTo(gateway.url, key.body.key as string);

    // One after the other: both runs share the reference server's subscriptions/listen bus.
    const started = Date.now();
    direct = await runSuite(reference.url);
    const directMs = Date.now() - started;
    throughGateway = await runSuite(shim.url);
    const perEra = ERAS.map((era) => `${[...direct.keys()].filter((key) => key.startsWith(`${era}/`)).length} at ${era}`).join(', ');
    const checks = [...direct.values()].reduce((sum, list) => sum + list.length, 0);
    console.log(
      `MCP conformance: ${direct.size} scenarios (${perEra}), ${checks} checks; ` +
        `direct: ${direct.size - failing(direct).length} pass (${directMs} ms); ` +
        `through the gateway: ${throughGateway.size - failing(throughGateway).length} pass, ` +
        `${differences(direct, throughGateway).size} differ from direct (${Date.now() - started - directMs} ms)`,
    );
  }, 180_000);

  afterAll(async () => {
    await gateway?.stop();
    await shim?.close();
    await reference?.close();
  });

  it('runs the scenarios of both eras', () => {
    for (const era of ERAS) expect([...direct.keys()].filter((key) => key.startsWith(`${era}/`)).length).toBeGreaterThan(25);
  });

  it('the reference server passes every scenario (but the listed fixture failures)', () => {
    const failures = Object.fromEntries(failing(direct).map((scenario) => [scenario, direct.get(scenario)!.filter((check) => check.status === 'FAILURE')]));
    expect(Object.keys(failures).sort(), JSON.stringify(failures, null, 2)).toEqual(Object.keys(FIXTURE_FAILURES).sort());
  });

  it('through the gateway, the rebinding page is refused by the gateway itself, not left to the server behind it', () => {
    for (const era of ERAS) {
      const refused = throughGateway.get(`${era}/dns-rebinding-protection`)?.find((check) => check.id === 'localhost-host-rebinding-rejected');
      expect(refused).toMatchObject({ status: 'SUCCESS', details: { statusCode: 403 } });
      // The gateway's own refusal (origin_not_allowed, as a problem or a JSON-RPC error), not the server's.
      expect(JSON.stringify((refused?.details as { body?: unknown }).body)).toMatch(/origin.not.allowed/i);
    }
  });

  it('through the gateway, every scenario comes out as it does directly (but the intended differences)', () => {
    const found = differences(direct, throughGateway);
    const unexpected = Object.fromEntries([...found].filter(([scenario]) => !(scenario in INTENDED_DIFFERENCES)));
    expect(unexpected).toEqual({});
    // A listed difference that is gone is stale: the list says what the gateway refuses today.
    expect(Object.keys(INTENDED_DIFFERENCES).filter((scenario) => !found.has(scenario))).toEqual([]);
  });
});
