import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.ts';

/**
 * Upstream answers taken over by whoever asked (`Inspect`) instead of relayed as they are:
 * read as a stream (`UpstreamBody`) or whole (`WholeBody`).
 */

export interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Readable;
}

/** A taken-over answer read whole. */
export interface WholeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Takes a whole answer over: its body is collected as it arrives, with no stream in between,
 * and `whole` is called once with it, or with the failure (a body over `maxBytes` is a 502 and
 * the upstream request is aborted). Not called when the client left first.
 */
export interface TakeWhole {
  readonly maxBytes: number;
  whole(answer: WholeAnswer | GatewayError): void;
}

/**
 * Looks at the upstream's status and headers before anything is sent: undefined to relay the
 * response as it is, or a take-over that answers the client itself: a function given the body
 * as a stream, or a `TakeWhole` given the body read whole.
 */
export type Inspect = (statusCode: number, headers: IncomingHttpHeaders) => ((response: UpstreamResponse) => void) | TakeWhole | undefined;

/** A taken-over response's body: reading resumes the upstream's socket, destroying it aborts the request. */
export class UpstreamBody extends Readable {
  readonly #controller: Dispatcher.DispatchController;
  /** Why the request is aborted when the body is destroyed without an error. */
  readonly #abandoned: Error;

  constructor(controller: Dispatcher.DispatchController, abandoned: Error) {
    super();
    this.#controller = controller;
    this.#abandoned = abandoned;
  }

  override _read(): void {
    this.#controller.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.readableEnded && !this.#controller.aborted) this.#controller.abort(error ?? this.#abandoned);
    callback(error);
  }
}

/** A taken-over answer being read whole: its chunks as they arrive, up to the take-over's `maxBytes`. */
export class WholeBody {
  readonly #take: TakeWhole;
  readonly #headers: IncomingHttpHeaders;
  #chunks: Buffer[] = [];
  #size = 0;

  constructor(take: TakeWhole, headers: IncomingHttpHeaders) {
    this.#take = take;
    this.#headers = headers;
  }

  /** Keeps `chunk`; false once the body is larger than `maxBytes` (nothing is kept then). */
  add(chunk: Buffer): boolean {
    this.#size += chunk.length;
    if (this.#size <= this.#take.maxBytes) {
      this.#chunks.push(chunk);
      return true;
    }
    this.#chunks = [];
    return false;
  }

  /** The body is complete: the take-over gets the answer. */
  answer(statusCode: number): void {
    const chunks = this.#chunks;
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.#size);
    this.#take.whole({ statusCode, headers: this.#headers, body });
  }

  /** The body outgrew `maxBytes`: the take-over gets a 502. */
  tooLarge(): void {
    const maxBytes = this.#take.maxBytes;
    this.#take.whole(new GatewayError('upstream_unavailable', `The upstream's answer is larger than ${maxBytes} bytes, more than the gateway inspects`));
  }

  /** The exchange failed: the take-over gets the refusal. */
  fail(error: GatewayError): void {
    this.#take.whole(error);
  }
}
