import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnServer, type Spawned } from './processes.ts';

/** The nginx binary on PATH (or in /usr/sbin, where Debian puts it), or undefined. */
export function findNginx(): string | undefined {
  for (const candidate of ['nginx', '/usr/sbin/nginx', '/usr/local/sbin/nginx']) {
    try {
      execFileSync(candidate, ['-v'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not there
    }
  }
  return undefined;
}

export function nginxVersion(binary: string): string {
  try {
    return execFileSync(binary, ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim() || 'nginx';
  } catch (error) {
    // nginx prints its version on stderr.
    return String((error as { stderr?: string }).stderr ?? 'nginx').trim();
  }
}

/** `nginx-proxy`: one worker, keep-alive to the upstream, no logging — the C reference for plain proxying. */
export async function startNginx(binary: string, dir: string, port: number, upstreamPort: number): Promise<Spawned> {
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
master_process off;
error_log ${join(dir, 'logs/error.log')} warn;
pid ${join(dir, 'nginx.pid')};
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  keepalive_requests 1000000;
  upstream origin { server 127.0.0.1:${upstreamPort}; keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`,
  );
  return spawnServer({
    name: 'nginx',
    command: binary,
    args: ['-p', dir, '-c', conf],
    readyUrl: `http://127.0.0.1:${port}/`,
  });
}
