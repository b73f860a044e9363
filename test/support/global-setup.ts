import type { TestProject } from 'vitest/node';

/**
 * Resolves PostgreSQL and Redis once for the whole run (CONTRIBUTING.md, "Services for tests"):
 * `DATABASE_URL_TEST` / `REDIS_URL_TEST` first, else containers when a Docker engine answers,
 * else none, loudly. With `REQUIRE_SERVICES=1` a missing service fails the run.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null;
    redisUrl: string | null;
  }
}

interface Service {
  url: string;
  stop(): Promise<unknown>;
}

interface Services {
  postgresUrl: string | null;
  redisUrl: string | null;
  stop(): Promise<void>;
}

/**
 * The integration and e2e projects both list this file, and each project runs it. The services are
 * resolved once for the whole run all the same: the first project starts them, the last one to
 * finish stops them. (On globalThis, not in a module variable: each project may load its own copy
 * of this module.)
 */
const shared = globalThis as { gatehouseTestServices?: { services: Promise<Services>; users: number } };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const entry = (shared.gatehouseTestServices ??= { services: resolveServices(), users: 0 });
  entry.users++;
  const release = async (services?: Services) => {
    if (--entry.users > 0) return;
    delete shared.gatehouseTestServices;
    await services?.stop();
  };
  let services: Services;
  try {
    services = await entry.services;
  } catch (error) {
    await release();
    throw error;
  }
  project.provide('postgresUrl', services.postgresUrl);
  project.provide('redisUrl', services.redisUrl);
  return () => release(services);
}

async function resolveServices(): Promise<Services> {
  const started: Service[] = [];
  const teardown = async () => {
    await Promise.all(started.map((service) => service.stop()));
  };
  let postgresUrl = process.env.DATABASE_URL_TEST || null;
  let redisUrl = process.env.REDIS_URL_TEST || null;

  if (!postgresUrl || !redisUrl) {
    const docker = await dockerOrReason();
    if (typeof docker === 'string') {
      const missing = [!postgresUrl && 'PostgreSQL', !redisUrl && 'Redis'].filter(Boolean).join(' and ');
      notice(`No Docker engine (${docker}):\n${missing} suites are SKIPPED. Set DATABASE_URL_TEST / REDIS_URL_TEST to run them.`);
    } else {
      try {
        if (!postgresUrl) postgresUrl = track(started, await docker.postgres());
        if (!redisUrl) redisUrl = track(started, await docker.redis());
      } catch (error) {
        await teardown();
        throw error;
      }
    }
  }

  if (process.env.REQUIRE_SERVICES === '1' && (!postgresUrl || !redisUrl)) {
    await teardown();
    throw new Error('REQUIRE_SERVICES=1 but PostgreSQL or Redis is unavailable: refusing to skip their suites');
  }
  return { postgresUrl, redisUrl, stop: teardown };
}

function track(started: Service[], service: Service): string {
  started.push(service);
  return service.url;
}

type Docker = { postgres(): Promise<Service>; redis(): Promise<Service> };

/** Container starters when a Docker engine answers within a few seconds, else why not. */
async function dockerOrReason(): Promise<Docker | string> {
  // Imported lazily: runs with both URLs set never load testcontainers.
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  try {
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5_000).unref()),
    ]);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  return {
    async postgres() {
      const container = await new GenericContainer('postgres:17-alpine')
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
        .withExposedPorts(5432)
        // The image restarts the server once after initdb; the second "ready" line is the real one.
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
        .start();
      const url = `postgres://postgres@${container.getHost()}:${container.getMappedPort(5432)}/test`;
      return { url, stop: () => container.stop() };
    },
    async redis() {
      const container = await new GenericContainer('redis:7-alpine')
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .start();
      return { url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`, stop: () => container.stop() };
    },
  };
}

function notice(text: string): void {
  const rule = '!'.repeat(78);
  console.warn(`\n${rule}\n${text}\n${rule}\n`);
}
