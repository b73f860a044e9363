import { defineConfig } from 'vitest/config';

/** PostgreSQL and Redis (test/support/global-setup.ts): only the tiers that use them pay for them. */
const SERVICES = ['test/support/global-setup.ts'];

export default defineConfig({
  test: {
    // Two cores: e2e suites spawn gateway processes, so keep the fan-out modest.
    maxWorkers: 2,
    // `npm test` runs all three; `npm run test:unit` (`--project unit`), `test:integration`, `test:e2e` one each.
    projects: [
      {
        extends: true,
        // Pure logic: no process, no network, no services; vitest's own timeouts.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 20_000 },
      },
      {
        extends: true,
        // Real PostgreSQL and Redis, in-process gateways on a real store, real tools (promtool).
        test: { name: 'integration', include: ['test/integration/**/*.test.ts'], globalSetup: SERVICES, testTimeout: 60_000, hookTimeout: 120_000 },
      },
      {
        extends: true,
        // Generous: e2e tests spawn processes, and a loaded 2-core machine slows every one of them.
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], globalSetup: SERVICES, testTimeout: 60_000, hookTimeout: 120_000 },
      },
    ],
  },
});
