import { describe, expect, it } from 'vitest';
import { LocalRateLimiter } from '../../../src/limits/rate-limiter.ts';
import type { Charge } from '../../../src/policy/rate-limits.ts';

const keyCharge = (requests: number, perSeconds: number, keyId = 1): Charge => ({ limit: 'key', keyId, tool: undefined, rule: { requests, perSeconds }, times: 1 });
const toolCharge = (tool: string, requests: number, perSeconds: number, times = 1, keyId = 1): Charge => ({ limit: 'tool', keyId, tool, rule: { requests, perSeconds }, times });

function limiter() {
  const clock = { ms: 0 };
  const rates = new LocalRateLimiter({ now: () => clock.ms });
  return { rates, clock };
}

describe('LocalRateLimiter', () => {
  it('admits the limit, refuses the next with the seconds until one more is admitted, and says what is left', () => {
    const { rates, clock } = limiter();
    const charge = keyCharge(10, 60);
    for (let i = 0; i < 10; i++) {
      clock.ms = i * 1000;
      expect(rates.take([charge])).toMatchObject({ admitted: true, quotas: [{ remaining: 9 - i, resetSeconds: 60 - i }] });
    }
    clock.ms = 30_000;
    expect(rates.take([charge])).toEqual({ admitted: false, refused: charge, retryAfter: 30, quotas: [{ charge, remaining: 0, resetSeconds: 30 }] });
    clock.ms = 60_001;
    expect(rates.take([charge])).toMatchObject({ admitted: true, quotas: [{ remaining: 0 }] });
  });

  it.each([5536.10000000195, 12_345.678, 987_654.321, 4096.5])('t never exceeds w, at a fractional clock of %d ms (the sum of a stamp and the interval rounds up)', (start) => {
    const { rates, clock } = limiter();
    const charge = keyCharge(2, 60);
    clock.ms = start;
    expect(rates.take([charge])).toMatchObject({ admitted: true, quotas: [{ remaining: 1, resetSeconds: 60 }] });
    expect(rates.peek(charge)).toMatchObject({ remaining: 1, resetSeconds: 60 });
    expect(rates.take([charge])).toMatchObject({ admitted: true, quotas: [{ remaining: 0, resetSeconds: 60 }] });
    expect(rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 60, quotas: [{ remaining: 0, resetSeconds: 60 }] });
  });

  it('a batch of n counts n against the key, and one needing more than is left is refused whole', () => {
    const { rates, clock } = limiter();
    const single = keyCharge(10, 60);
    const batch = { ...single, times: 4 };
    expect(rates.take([batch])).toMatchObject({ admitted: true, quotas: [{ remaining: 6 }] });
    clock.ms = 1000;
    expect(rates.take([batch])).toMatchObject({ admitted: true, quotas: [{ remaining: 2 }] });
    clock.ms = 2000;
    expect(rates.take([batch])).toMatchObject({ admitted: false, retryAfter: 58, quotas: [{ remaining: 2 }] });
    expect(rates.take([single])).toMatchObject({ admitted: true, quotas: [{ remaining: 1 }] });
  });

  it('counts all of a request\'s charges or none: a tool refused uses up nothing of the key\'s limit', () => {
    const { rates } = limiter();
    const key = keyCharge(5, 60);
    const tool = toolCharge('place_outbound_call', 1, 60);
    expect(rates.take([key, tool])).toMatchObject({ admitted: true });
    expect(rates.take([key, tool])).toMatchObject({ admitted: false, refused: tool, retryAfter: 60 });
    // The key's own limit counted only the first request.
    expect(rates.peek(key)).toMatchObject({ remaining: 4 });
    // Another tool of the same key is still open.
    expect(rates.take([key, toolCharge('search_knowledge_base', 1, 60)])).toMatchObject({ admitted: true, quotas: [{ remaining: 3 }, { remaining: 0 }] });
  });

  it('a batch\'s calls of one tool count together', () => {
    const { rates } = limiter();
    expect(rates.take([toolCharge('place_outbound_call', 3, 60, 2)])).toMatchObject({ admitted: true, quotas: [{ remaining: 1 }] });
    expect(rates.take([toolCharge('place_outbound_call', 3, 60, 2)])).toMatchObject({ admitted: false });
    expect(rates.take([toolCharge('place_outbound_call', 3, 60, 1)])).toMatchObject({ admitted: true, quotas: [{ remaining: 0 }] });
  });

  it('refused by two limits: the first named, the retry when both would admit', () => {
    const { rates, clock } = limiter();
    const key = keyCharge(1, 10);
    const tool = toolCharge('place_outbound_call', 1, 60);
    rates.take([key, tool]);
    clock.ms = 1_000;
    expect(rates.take([key, tool])).toMatchObject({ admitted: false, refused: key, retryAfter: 59 });
  });

  it('keeps each key and each key\'s tool apart', () => {
    const { rates } = limiter();
    expect(rates.take([keyCharge(1, 60, 1)])).toMatchObject({ admitted: true });
    expect(rates.take([keyCharge(1, 60, 2)])).toMatchObject({ admitted: true });
    expect(rates.take([toolCharge('place_outbound_call', 1, 60, 1, 1)])).toMatchObject({ admitted: true });
    expect(rates.take([toolCharge('place_outbound_call', 1, 60, 1, 2)])).toMatchObject({ admitted: true });
    expect(rates.take([keyCharge(1, 60, 1)])).toMatchObject({ admitted: false });
  });

  it('a changed limit applies to what was already counted', () => {
    const { rates } = limiter();
    for (let i = 0; i < 5; i++) rates.take([keyCharge(10, 60)]);
    expect(rates.take([keyCharge(5, 60)])).toMatchObject({ admitted: false });
    expect(rates.take([keyCharge(20, 60)])).toMatchObject({ admitted: true, quotas: [{ remaining: 14 }] });
  });

  it('peek counts nothing; an unseen limit is whole', () => {
    const { rates } = limiter();
    expect(rates.peek(keyCharge(10, 60))).toEqual({ charge: keyCharge(10, 60), remaining: 10, resetSeconds: 0 });
    expect(rates.peek(keyCharge(10, 60))).toMatchObject({ remaining: 10 });
    expect(rates.size).toBe(0);
  });

  it('drops the logs in which nothing counts any more', () => {
    const { rates, clock } = limiter();
    rates.take([keyCharge(10, 1), toolCharge('place_outbound_call', 1, 60)]);
    expect(rates.size).toBe(2);
    clock.ms = 1_001;
    rates.sweep();
    expect(rates.size).toBe(1);
    clock.ms = 60_001;
    rates.sweep();
    expect(rates.size).toBe(0);
    rates.close();
  });
});
