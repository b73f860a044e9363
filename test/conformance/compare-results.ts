import type { Check, SuiteResults } from './run-suite.ts';

/**
 * What counts as "the same result" for one scenario: the multiset of its checks' ids and
 * statuses. INFO checks are left out: they narrate (which stream arrived first, what was
 * received), their number depends on timing, and they never pass or fail anything.
 */
export function outcome(checks: readonly Check[]): string[] {
  return checks.filter((check) => check.status !== 'INFO').map((check) => `${check.id} ${check.status}`).sort();
}

export interface Difference {
  direct: string[];
  gateway: string[];
  /** The gateway run's checks that did not succeed, with the suite's own explanation. */
  gatewayProblems: { id: string; status: string; errorMessage?: string; details?: unknown }[];
}

/** Scenarios whose outcome through the gateway is not the direct one (a scenario missing on one side included). */
export function differences(direct: SuiteResults, gateway: SuiteResults): Map<string, Difference> {
  const found = new Map<string, Difference>();
  for (const scenario of new Set([...direct.keys(), ...gateway.keys()])) {
    const before = outcome(direct.get(scenario) ?? []);
    const after = outcome(gateway.get(scenario) ?? []);
    if (before.join('\n') === after.join('\n')) continue;
    const gatewayProblems = (gateway.get(scenario) ?? [])
      .filter((check) => check.status === 'FAILURE' || check.status === 'WARNING')
      .map(({ id, status, errorMessage, details }) => ({ id, status, errorMessage, details }));
    found.set(scenario, { direct: before, gateway: after, gatewayProblems });
  }
  return found;
}

/** Scenarios with a FAILURE check. */
export function failing(results: SuiteResults): string[] {
  return [...results].filter(([, checks]) => checks.some((check) => check.status === 'FAILURE')).map(([scenario]) => scenario);
}
