import type { Metric, Registry } from 'prom-client';

/**
 * Counters and histograms for the request path, recorded in plain numbers and exported
 * through prom-client's registry at scrape time. prom-client validates and hashes the label
 * set of every `inc` and `observe` (children included), which is most of what metrics cost
 * per request; here the caller resolves a series once — an index computed from small fixed
 * sets, no string built — and recording is an add.
 *
 * Series are created on first use and never removed: label values come from fixed sets
 * (metrics.ts folds anything else into `other`), so their number is bounded.
 */

/** One label set's values: a counter's count, or a histogram's per-bucket counts, sum and count. */
export class Series {
  readonly labels: Readonly<Record<string, string>>;
  /** Observations per bucket (not cumulative); the last slot is +Inf. Empty for a counter. */
  readonly buckets: Float64Array;
  count = 0;
  sum = 0;

  constructor(labels: Readonly<Record<string, string>>, bucketCount: number) {
    this.labels = labels;
    this.buckets = new Float64Array(bucketCount);
  }
}

interface FamilyOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
  registers: Registry[];
}

type Sample = { value: number; labels: Record<string, string | number>; metricName?: string };
type PromStringSample = Sample & { sharedLabels?: Record<string, string> };

/** What prom-client's Registry reads from a metric: its name, help and type, and its samples from `get()`. */
abstract class HotFamily {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly aggregator = 'sum';
  abstract readonly type: 'counter' | 'histogram';
  /** In creation order, as prom-client lists its own series. */
  protected readonly series: Series[] = [];
  readonly #byIndex: Array<Series | undefined> = [];

  constructor(options: FamilyOptions) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    // The registry reads a metric through name, type, help and get() alone.
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** The series at `index` (the caller's encoding of a label set), once created. */
  at(index: number): Series | undefined {
    return this.#byIndex[index];
  }

  /** Creates the series at `index`; `labelValues` in `labelNames` order. */
  create(index: number, labelValues: readonly string[]): Series {
    const labels: Record<string, string> = {};
    this.labelNames.forEach((name, i) => (labels[name] = labelValues[i]!));
    const series = new Series(labels, this.bucketCount());
    this.#byIndex[index] = series;
    this.series.push(series);
    return series;
  }

  protected abstract bucketCount(): number;

  /** The samples with labels flattened (getMetricsAsJSON). */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, ...sample }) => ({ ...sample, labels: { ...sample.labels, ...sharedLabels } })),
    };
  }

  /** The samples as the exposition text lists them (Registry.metrics). */
  async getForPromString(): Promise<{ name: string; help: string; type: string; aggregator: string; values: PromStringSample[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.samples() };
  }

  protected abstract samples(): PromStringSample[];
}

export class HotCounter extends HotFamily {
  readonly type = 'counter';

  protected bucketCount(): number {
    return 0;
  }

  protected samples(): PromStringSample[] {
    return this.series.map((series) => ({ labels: { ...series.labels }, value: series.count }));
  }
}

export class HotHistogram extends HotFamily {
  readonly type = 'histogram';
  readonly upperBounds: readonly number[];

  constructor(options: FamilyOptions & { buckets: readonly number[] }) {
    super(options);
    this.upperBounds = options.buckets;
  }

  protected bucketCount(): number {
    return this.upperBounds.length + 1;
  }

  /** Adds one observation to `series`. */
  observe(series: Series, value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.upperBounds;
    let bucket = 0;
    while (bucket < bounds.length && value > bounds[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.count++;
    series.sum += value;
  }

  protected samples(): PromStringSample[] {
    const bucketName = `${this.name}_bucket`;
    const out: PromStringSample[] = [];
    for (const series of this.series) {
      let cumulative = 0;
      this.upperBounds.forEach((bound, i) => {
        cumulative += series.buckets[i]!;
        out.push({ labels: { le: bound }, sharedLabels: series.labels, value: cumulative, metricName: bucketName });
      });
      out.push({ labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: bucketName });
      out.push({ labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      out.push({ labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return out;
  }
}

/**
 * Positions of the values of one label in a series index: `indexOf(value)` is the value's
 * position, or that of `other` for anything outside the fixed set.
 */
export class LabelIndex {
  readonly values: readonly string[];
  readonly #positions: ReadonlyMap<string, number>;
  readonly #other: number;

  constructor(values: Iterable<string>, other: string) {
    const all = [...new Set([...values, other])];
    this.values = all;
    this.#positions = new Map(all.map((value, i) => [value, i]));
    this.#other = this.#positions.get(other)!;
  }

  get size(): number {
    return this.values.length;
  }

  indexOf(value: string): number {
    return this.#positions.get(value) ?? this.#other;
  }
}
