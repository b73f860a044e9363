import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { createKey, loginAdmin } from './http.ts';
import { startOrigin, type Origin } from './origin.ts';

export interface ProxyFixture {
  gateway: GatewayProcess;
  origin: Origin;
  admin: string;
  port: number;
  /** Creates a key through the API and returns the raw key and its id. */
  key(body?: Record<string, unknown>): Promise<{ key: string; id: number }>;
  close(): Promise<void>;
}

/** A recording origin on port 0 and a spawned gateway in front of it. */
export async function startProxyFixture(env: Record<string, string> = {}): Promise<ProxyFixture> {
  const origin = await startOrigin();
  const gateway = await startGateway({ UPSTREAM_URL: origin.url, ...env });
  const admin = await loginAdmin(gateway.url);
  return {
    gateway,
    origin,
    admin,
    port: Number(new URL(gateway.url).port),
    key: async (body = { name: 'test', scopes: ['events:write'] }) => {
      const response = await createKey(gateway.url, admin, { name: 'test', ...body });
      if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
      return { key: response.body.key as string, id: response.body.id as number };
    },
    close: async () => {
      await gateway.stop();
      await origin.close();
    },
  };
}
