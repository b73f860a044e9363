import { argon2ParamsOf, sameArgon2Params, type Argon2Params } from '../crypto/argon2-params.ts';

/**
 * The parameters of the hash an unknown email's password is verified against. A login for an
 * unknown email must cost what a real admin's costs, and a real admin's cost is that of the hash
 * stored for them, made with whatever ARGON2_* settings were current at the time (upgraded only
 * at their next successful login). So the decoy takes the parameters most stored admin hashes
 * have: after a settings change it keeps matching the admins who have not logged in since, and
 * follows them as they are upgraded. A tie prefers the current settings (where upgraded admins
 * end up), else the costlier set; no parsable admin hash at all means the current settings.
 */
export function decoyParams(storedHashes: readonly string[], current: Argon2Params): Argon2Params {
  const counted: Array<{ params: Argon2Params; count: number }> = [];
  for (const encoded of storedHashes) {
    const params = argon2ParamsOf(encoded);
    if (params === undefined) continue;
    const entry = counted.find((candidate) => sameArgon2Params(candidate.params, params));
    if (entry === undefined) counted.push({ params, count: 1 });
    else entry.count++;
  }
  let best: { params: Argon2Params; count: number } = { params: current, count: 0 };
  for (const entry of counted) if (isBetter(entry, best, current)) best = entry;
  return best.params;
}

function isBetter(
  entry: { params: Argon2Params; count: number },
  best: { params: Argon2Params; count: number },
  current: Argon2Params,
): boolean {
  if (entry.count !== best.count) return entry.count > best.count;
  if (sameArgon2Params(best.params, current)) return false;
  if (sameArgon2Params(entry.params, current)) return true;
  return cost(entry.params) > cost(best.params);
}

function cost({ memoryKiB, timeCost }: Argon2Params): number {
  return memoryKiB * timeCost;
}
