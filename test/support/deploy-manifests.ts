import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/*
 * The manifests under deploy/ read as data: checked against the code in
 * test/unit/deploy/, and their PromQL by promtool in
 * test/integration/promtool.test.ts.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: Json };

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const DEPLOY = join(ROOT, 'deploy');

export function filesUnder(dir: string, pattern: RegExp): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => pattern.test(name))
    .map((name) => join(dir, name))
    .sort();
}

export function isObj(value: Json | undefined): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
export function obj(value: Json | undefined, what: string): Obj {
  if (!isObj(value)) throw new Error(`${what}: expected a mapping`);
  return value;
}
export function list(value: Json | undefined): Json[] {
  return Array.isArray(value) ? value : [];
}
export function str(value: Json | undefined): string | undefined {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}

export interface Doc {
  file: string;
  doc: Obj;
}

function parseYamlFile(file: string): Doc[] {
  const documents = parseAllDocuments(readFileSync(file, 'utf8'), { merge: true });
  if (!Array.isArray(documents)) throw new Error(`${file}: not YAML documents`);
  const docs: Doc[] = [];
  for (const document of documents) {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((error) => error.message).join('; ')}`);
    const value = document.toJS() as Json;
    if (value !== null) docs.push({ file: relative(ROOT, file), doc: obj(value, file) });
  }
  return docs;
}

export const yamlFiles = filesUnder(DEPLOY, /\.ya?ml$/);
export const composeFile = join(DEPLOY, 'docker-compose.yml');
/** The alert rules for plain Prometheus: the source of the PrometheusRule's groups. */
export const prometheusRulesFile = join(DEPLOY, 'prometheus', 'gatehouse-rules.yml');
export const kubeDocs = yamlFiles.filter((file) => file !== composeFile && file !== prometheusRulesFile).flatMap(parseYamlFile);
export const compose = parseYamlFile(composeFile)[0]?.doc ?? {};
export const dashboardFiles = filesUnder(join(DEPLOY, 'grafana'), /\.json$/);

/** The rule groups of the plain Prometheus file, and of each PrometheusRule manifest (which must equal them). */
export const plainRuleGroups: Json[] = list(parseYamlFile(prometheusRulesFile)[0]?.doc['groups']);
export const operatorRuleGroups: Array<{ file: string; groups: Json[] }> = kubeDocs
  .filter(({ doc }) => doc['kind'] === 'PrometheusRule')
  .map(({ file, doc }) => ({ file, groups: list(obj(doc['spec'], file)['groups']) }));

/** Every rule (alert or recording) of the plain file: the PrometheusRule's are the same. */
export const alertRules = plainRuleGroups.flatMap((group) => list(obj(group, 'group')['rules'])).map((rule) => obj(rule, 'rule'));

export const dashboards = dashboardFiles.map((file) => ({ file, json: JSON.parse(readFileSync(file, 'utf8')) as Json }));

/** PromQL strings of a dashboard: panel target `expr`s and templating queries. */
export function dashboardQueries(json: Json): string[] {
  const found: string[] = [];
  const walk = (node: Json, key: string): void => {
    if (typeof node === 'string') {
      if (key === 'expr' || key === 'definition' || (key === 'query' && node.includes('gatehouse_'))) found.push(node);
    } else if (Array.isArray(node)) node.forEach((child) => walk(child, key));
    else if (isObj(node)) for (const [childKey, child] of Object.entries(node)) walk(child, childKey);
  };
  walk(json, '');
  return found;
}
