import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { HotCounter, HotHistogram, LabelIndex } from '../../../src/ops/hot-metrics.ts';

const BUCKETS = [0.001, 0.01, 0.1, 1];

/** Deterministic pseudo-random numbers, so a failure can be replayed. */
function* values(seed: number, count: number): Generator<number> {
  let state = seed;
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    yield (state / 2 ** 31) * 2;
  }
}

/** The JSON view without prom-client's exemplar slots (null or undefined: exemplars are off). */
async function json(registry: Registry): Promise<unknown> {
  const families = await registry.getMetricsAsJSON();
  return families.map((family) => ({ ...family, values: (family.values as Array<{ exemplar?: unknown }>).map(({ exemplar: _exemplar, ...sample }) => sample) }));
}

describe('hot metrics', () => {
  it('a histogram exposes exactly what prom-client exposes for the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const hot = new HotHistogram({ name: 'x_seconds', help: 'h', labelNames: ['route', 'status'], buckets: BUCKETS, registers: [ours] });
    const reference = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['route', 'status'], buckets: BUCKETS, registers: [theirs] });
    const labelSets = [
      ['events', '2xx'],
      ['mcp', '5xx'],
      ['events', 'error'],
    ] as const;
    // Bounds themselves fall in their own bucket (le is "less than or equal").
    const observed = [...values(7, 300), ...BUCKETS, 0, 5];
    observed.forEach((value, i) => {
      const at = i % labelSets.length;
      const [route, status] = labelSets[at]!;
      hot.observe(hot.at(at) ?? hot.create(at, [route, status]), value);
      reference.observe({ route, status }, value);
    });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await json(ours)).toEqual(await json(theirs));
  });

  it('a counter exposes exactly what prom-client exposes for the same increments', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const hot = new HotCounter({ name: 'y_total', help: 'h', labelNames: ['outcome'], registers: [ours] });
    const reference = new Counter({ name: 'y_total', help: 'h', labelNames: ['outcome'], registers: [theirs] });
    for (let i = 0; i < 10; i++) {
      const outcome = i % 3 === 0 ? 'deny' : 'allow';
      const at = outcome === 'deny' ? 1 : 0;
      (hot.at(at) ?? hot.create(at, [outcome])).count++;
      reference.inc({ outcome });
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await json(ours)).toEqual(await json(theirs));
  });

  it('a value that is not a finite number is not recorded', async () => {
    const registry = new Registry();
    const hot = new HotHistogram({ name: 'z_seconds', help: 'h', labelNames: [], buckets: BUCKETS, registers: [registry] });
    const series = hot.create(0, []);
    hot.observe(series, Number.NaN);
    hot.observe(series, Number.POSITIVE_INFINITY);
    hot.observe(series, 0.5);
    expect(series.count).toBe(1);
    expect(series.sum).toBe(0.5);
    expect(await registry.metrics()).toContain('z_seconds_bucket{le="+Inf"} 1');
  });

  it('a label index folds anything outside its set into other', () => {
    const index = new LabelIndex(['allow', 'deny'], 'other');
    expect(index.values).toEqual(['allow', 'deny', 'other']);
    expect(index.indexOf('deny')).toBe(1);
    expect(index.indexOf('alice@example.com')).toBe(2);
    expect(index.indexOf('')).toBe(2);
  });
});
