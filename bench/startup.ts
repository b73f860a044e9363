import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway } from './gateway.ts';
import type { StartupFigure } from './report.ts';

/** Starts measured, after one unmeasured start (the OS's file cache warm, as on a restart). */
const RUNS = 5;
/** The peak RSS is read this long after the start: what the first seconds cost, start-up work included. */
const PEAK_WINDOW_MS = 10_000;

/**
 * `start-up`: from the spawn of the process `npm start` runs (after its build step) to
 * `/readyz` answering 200, on a fresh embedded store, and the process's peak RSS (VmHWM) in its
 * first 10 s — what a container's memory limit must allow at start. Median and worst of `RUNS`.
 */
export async function startup(upstreamUrl: string, env: Record<string, string>): Promise<StartupFigure> {
  const readyMs: number[] = [];
  const peakMb: number[] = [];
  for (let run = 0; run <= RUNS; run++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-start-'));
    const started = performance.now();
    const gateway = await startGateway({ upstreamUrl, dataDir, env });
    try {
      while ((await fetch(`${gateway.opsUrl}/readyz`).catch(() => undefined))?.status !== 200) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const ms = performance.now() - started;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, PEAK_WINDOW_MS - (performance.now() - started))));
      if (run > 0) {
        readyMs.push(ms);
        peakMb.push((gateway.process.peakRss() ?? 0) / 2 ** 20);
      }
    } finally {
      await gateway.process.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const median = (values: number[]) => values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return { runs: readyMs.length, readyMsMedian: median(readyMs), readyMsMax: Math.max(...readyMs), peakMbMedian: median(peakMb), peakMbMax: Math.max(...peakMb) };
}
