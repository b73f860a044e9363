import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Generous: e2e tests spawn processes, and a loaded 2-core machine slows every one of them.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // e2e suites spawn gateway processes; two cores, so keep the fan-out modest.
    maxWorkers: 2,
  },
});
