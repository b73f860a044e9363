import type { Store } from './store.ts';

/** The store could not be reached or could not serve; the request may succeed later. HTTP maps it to 503. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super('The store cannot be reached', { cause });
    this.name = 'StoreUnavailableError';
  }
}

/**
 * SQLSTATE classes and codes that mean "the database is not there for us" rather than "this
 * statement is wrong": connection exceptions, insufficient resources, operator intervention
 * (shutdown, restart), and a database that no longer exists.
 */
const UNAVAILABLE_SQLSTATE_CLASSES = ['08', '53', '57'];
const UNAVAILABLE_SQLSTATES = ['3D000'];
/** Socket errors from the driver. */
const UNAVAILABLE_ERRNOS = ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE'];
/** node-postgres and pg-pool say these in words only. */
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated/,
  /timeout exceeded when trying to connect/,
  /Client has encountered a connection error and is not queryable/,
  /^Query read timeout$/,
];

export function isStoreUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_ERRNOS.includes(code) || UNAVAILABLE_SQLSTATES.includes(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code) && UNAVAILABLE_SQLSTATE_CLASSES.includes(code.slice(0, 2))) return true;
  }
  if (error instanceof AggregateError && error.errors.some(isStoreUnavailable)) return true;
  return UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(error.message));
}

/**
 * The store, with every rejection that means "unreachable" turned into StoreUnavailableError,
 * so key management and login answer 503 `store_unavailable` (never a 500, never an allow)
 * while PostgreSQL is away. Other errors pass unchanged.
 */
export function guardStore(store: Store): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = value.apply(target, args);
        if (!(result instanceof Promise)) return result;
        return result.catch((error: unknown) => {
          throw isStoreUnavailable(error) ? new StoreUnavailableError(error) : error;
        });
      };
    },
  });
}
