import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const kLingering = Symbol('gatehouse.lingering');

type LingeringSocket = Socket & { [kLingering]?: true };

/**
 * Closes connections the way nginx's `lingering_close` does. When a response ends a connection
 * (`Connection: close`, as after a 413 sent on the declared `Content-Length` before any of the
 * body was read), Node destroys the socket as soon as the answer is flushed; request bytes still
 * unread in the kernel then turn the close into a TCP reset, and a client still uploading sees
 * EPIPE or ECONNRESET instead of the answer. Here our side is ended, and what the client still
 * sends is read and thrown away until it closes too or `lingerMs` has passed.
 */
export function installLingeringClose(server: Server, lingerMs: number): void {
  server.on('connection', (socket: LingeringSocket) => {
    socket.destroySoon = () => lingeringClose(socket, lingerMs);
  });
}

/** A request parsed from the bytes of a lingering connection is never served: its answer could not be sent. */
export function isLingering(socket: Socket | null | undefined): boolean {
  return (socket as LingeringSocket | null | undefined)?.[kLingering] === true;
}

function lingeringClose(socket: LingeringSocket, lingerMs: number): void {
  socket[kLingering] = true;
  if (socket.writable) socket.end();
  const linger = () => {
    if (socket.destroyed) return;
    if (socket.readableEnded) {
      socket.destroy();
      return;
    }
    const timer = setTimeout(() => socket.destroy(), lingerMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    socket.once('end', () => socket.destroy());
    socket.resume();
  };
  if (socket.writableFinished) linger();
  else socket.once('finish', linger);
}
