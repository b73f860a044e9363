import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { GatewayError } from '../errors/gateway-error.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export interface ApiReferenceOptions {
  /** Where the page is served (`/docs`). */
  path: `/${string}`;
  /** The OpenAPI document the page renders. */
  documentUrl: string;
}

/** Not passed on from the renderer's answer: the connection's own, and what fastify recomputes. */
const NOT_RELAYED: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date']);

/**
 * The API reference page (Scalar). Its plugin reads its 4 MB renderer script into memory when
 * it is imported; most gateways never show the page, so it is imported on the first visit, into
 * a fastify instance of its own that is asked in-process (`inject`), and never at start-up
 * (measured: ~10 MB of external memory and ~30 MB of RSS spared).
 */
export function registerApiReference(app: FastifyInstance, options: ApiReferenceOptions): void {
  let renderer: Promise<FastifyInstance> | undefined;
  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    renderer ??= loadRenderer(options).catch((error: unknown) => {
      renderer = undefined;
      throw error;
    });
    const answer = await (await renderer).inject({ method: 'GET', url: request.url, headers: { accept: request.headers.accept ?? '*/*' } });
    if (answer.statusCode === 404) throw new GatewayError('not_found', 'No such endpoint');
    reply.code(answer.statusCode);
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !NOT_RELAYED.has(name)) reply.header(name, value);
    }
    return reply.send(answer.rawPayload);
  };
  // The paths the plugin serves: the page (with and without its slash) and its bundled renderer.
  for (const path of [options.path, `${options.path}/`, `${options.path}/js/scalar.js`]) {
    app.get(path, serve);
    methodNotAllowed(app, path, ['GET']);
  }
  app.addHook('onClose', async () => {
    const loaded = await renderer?.catch(() => undefined);
    await loaded?.close();
  });
}

async function loadRenderer(options: ApiReferenceOptions): Promise<FastifyInstance> {
  const { default: fastifyApiReference } = await import('@scalar/fastify-api-reference');
  const renderer = Fastify({ logger: false });
  // The plugin serves its bundled renderer at /docs/js/scalar.js: nothing is loaded from a CDN,
  // and without the default fonts, telemetry or the hosted extras the page asks nothing of
  // another origin (docs-browser.test.ts checks it in Chromium).
  await renderer.register(fastifyApiReference, {
    routePrefix: options.path,
    configuration: {
      url: options.documentUrl,
      pageTitle: 'Gatehouse API reference',
      withDefaultFonts: false,
      telemetry: false,
      hideClientButton: true,
      // A small document: every operation in the sidebar at once. No hosted extras (AI agent, SDK generation).
      defaultOpenAllTags: true,
      showDeveloperTools: 'never',
      agent: { disabled: true },
    },
  });
  await renderer.ready();
  return renderer;
}
