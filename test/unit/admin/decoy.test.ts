import { describe, expect, it } from 'vitest';
import { decoyParams } from '../../../src/admin/decoy.ts';
import { argon2ParamsOf, needsRehash, type Argon2Params } from '../../../src/crypto/argon2-params.ts';

const phc = ({ memoryKiB, timeCost, parallelism }: Argon2Params) =>
  `$argon2id$v=19$m=${memoryKiB},t=${timeCost},p=${parallelism}$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA`;
const OLD = { memoryKiB: 19_456, timeCost: 2, parallelism: 1 };
const CURRENT = { memoryKiB: 19_456, timeCost: 6, parallelism: 1 };
const OTHER = { memoryKiB: 65_536, timeCost: 3, parallelism: 4 };

describe('decoyParams: an unknown email is verified against a hash as costly as a real admin\'s', () => {
  it.each<[string, Argon2Params[], Argon2Params]>([
    ['no admins: the current settings', [], CURRENT],
    ['every admin still on the old settings: the old ones', [OLD, OLD], OLD],
    ['most admins on the old settings', [OLD, CURRENT, OLD], OLD],
    ['most admins already upgraded', [CURRENT, OLD, CURRENT], CURRENT],
    ['a tie that includes the current settings: the current ones', [OLD, CURRENT], CURRENT],
    ['a tie without the current settings: the costlier set', [OLD, OTHER], OTHER],
    ['the same tie in the other order', [OTHER, OLD], OTHER],
  ])('%s', (_what, admins, expected) => {
    expect(decoyParams(admins.map(phc), CURRENT)).toEqual(expected);
  });

  it('ignores hashes it cannot read', () => {
    expect(decoyParams(['$2b$10$bcrypt-hash', 'garbage', phc(OLD)], CURRENT)).toEqual(OLD);
  });
});

describe('argon2ParamsOf / needsRehash', () => {
  it.each<[string, string, Argon2Params | undefined, boolean]>([
    ['an argon2id v19 hash at the current settings', phc(CURRENT), CURRENT, false],
    ['an argon2id v19 hash at older settings', phc(OLD), OLD, true],
    ['an argon2i hash', phc(CURRENT).replace('argon2id', 'argon2i'), undefined, true],
    ['an older argon2 version', phc(CURRENT).replace('v=19', 'v=16'), undefined, true],
    ['not a PHC string', 'plain', undefined, true],
  ])('%s', (_what, encoded, params, rehash) => {
    expect(argon2ParamsOf(encoded)).toEqual(params);
    expect(needsRehash(encoded, CURRENT)).toBe(rehash);
  });
});
