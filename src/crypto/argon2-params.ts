/** The cost of an argon2id hash: what makes verifying it take the time it takes. */
export interface Argon2Params {
  memoryKiB: number;
  timeCost: number;
  parallelism: number;
}

/** `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>` (the PHC string format). */
const ARGON2ID_PHC = /^\$argon2id\$v=19\$m=(\d{1,10}),t=(\d{1,10}),p=(\d{1,10})\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/;

/** The parameters an encoded argon2id hash was made with, or undefined when it is not one this gateway would make. */
export function argon2ParamsOf(encoded: string): Argon2Params | undefined {
  const match = ARGON2ID_PHC.exec(encoded);
  if (match === null) return undefined;
  return { memoryKiB: Number(match[1]), timeCost: Number(match[2]), parallelism: Number(match[3]) };
}

export function sameArgon2Params(a: Argon2Params, b: Argon2Params): boolean {
  return a.memoryKiB === b.memoryKiB && a.timeCost === b.timeCost && a.parallelism === b.parallelism;
}

/** True when the hash should be remade with `current`: other parameters, or not an argon2id v19 hash at all. */
export function needsRehash(encoded: string, current: Argon2Params): boolean {
  const params = argon2ParamsOf(encoded);
  return params === undefined || !sameArgon2Params(params, current);
}
