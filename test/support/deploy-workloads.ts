import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS, envSchema } from '../../src/config/env.ts';
import { isObj, kubeDocs, list, obj, ROOT, str, type Json, type Obj } from './deploy-manifests.ts';

/*
 * The workloads of deploy/ read as the gateway sees them (its containers, their env, ports and
 * hooks), for the tests in test/unit/deploy/.
 */

export const ENV_NAMES = new Set(Object.keys(envSchema.shape));
/** What the example platform reads (`env['NAME']` in its main.ts). */
export const PLATFORM_ENV_NAMES = new Set(
  [...readFileSync(join(ROOT, 'examples/platform/main.ts'), 'utf8').matchAll(/env\['([A-Z_]+)'\]/g)].map((match) => match[1] as string),
);
/** The gateway's drain bound on SIGTERM, read from main.ts so a change there is noticed here. */
export const DRAIN_SECONDS = (() => {
  const match = /SHUTDOWN_GRACE_MS\s*=\s*([\d_]+)/.exec(readFileSync(join(ROOT, 'src/main.ts'), 'utf8'));
  if (match?.[1] === undefined) throw new Error('SHUTDOWN_GRACE_MS not found in src/main.ts');
  return Number(match[1].replaceAll('_', '')) / 1000;
})();

export interface Container {
  file: string;
  workload: string;
  kind: 'gateway' | 'platform' | 'other';
  init: boolean;
  spec: Obj;
  /** Literal env values; secret-sourced ones are absent. */
  env: Map<string, string | undefined>;
}

export interface PodTemplate {
  file: string;
  workload: string;
  labels: Obj;
  spec: Obj;
  containers: Container[];
}

export function containerKind(spec: Obj): Container['kind'] {
  const command = [...list(spec['command']), ...list(spec['args'])].map(String).join(' ');
  if (command.includes('examples/platform/main.ts')) return 'platform';
  return String(spec['image'] ?? '').includes('gatehouse') ? 'gateway' : 'other';
}

export function podTemplates(): PodTemplate[] {
  const templates: PodTemplate[] = [];
  for (const { file, doc } of kubeDocs) {
    if (!['Deployment', 'StatefulSet', 'DaemonSet'].includes(String(doc['kind']))) continue;
    const workload = `${file} ${String(doc['kind'])}/${String(obj(doc['metadata'], file)['name'])}`;
    const template = obj(obj(doc['spec'], workload)['template'], workload);
    const spec = obj(template['spec'], workload);
    const containers: Container[] = [];
    for (const [field, init] of [['initContainers', true], ['containers', false]] as const) {
      for (const raw of list(spec[field])) {
        const container = obj(raw, workload);
        const env = new Map<string, string | undefined>();
        for (const entry of list(container['env'])) {
          const variable = obj(entry, workload);
          env.set(String(variable['name']), str(variable['value']));
        }
        containers.push({ file, workload, kind: containerKind(container), init, spec: container, env });
      }
    }
    templates.push({ file, workload, labels: obj(obj(template['metadata'], workload)['labels'], workload), spec, containers });
  }
  return templates;
}

export function gatewayPorts(env: Map<string, string | undefined>): { port: number; ops: number } {
  return { port: Number(env.get('PORT') ?? DEFAULTS.PORT), ops: Number(env.get('OPS_PORT') ?? DEFAULTS.OPS_PORT) };
}

/** A port given by number or by container-port name, as a number. */
export function resolvePort(container: Obj, port: Json | undefined): number | undefined {
  if (typeof port === 'number') return port;
  for (const entry of list(container['ports'])) {
    const declared = obj(entry, 'ports');
    if (declared['name'] === port) return Number(declared['containerPort']);
  }
  return undefined;
}

export function matches(selector: Obj, labels: Obj): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

export function preStopSeconds(container: Obj): number {
  const preStop = isObj(container['lifecycle']) ? container['lifecycle']['preStop'] : undefined;
  if (!isObj(preStop)) return 0;
  if (isObj(preStop['sleep'])) return Number(preStop['sleep']['seconds']);
  const command = isObj(preStop['exec']) ? list(preStop['exec']['command']).map(String) : [];
  if (command[0] === 'sleep' && command.length === 2) return Number(command[1]);
  throw new Error(`unrecognised preStop hook: ${JSON.stringify(preStop)}`);
}
