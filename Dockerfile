# syntax=docker/dockerfile:1
#
# Gatehouse container image.
#
#   docker build -t gatehouse .
#   docker run -p 8080:8080 -p 8081:8081 -v gatehouse-data:/data gatehouse
#
# Three stages: `build` compiles the TypeScript sources to dist/ (type erasure only, no
# bundling), `deps` installs production dependencies, and the last copies both next to the
# sources (the `gatehouse` CLI runs those by Node's type stripping) and runs as the
# unprivileged `node` user. The server runs the compiled dist/main.js, as `npm start` does:
# type stripping's compiler costs ~30 MB of RSS for the life of the process.
# Written without a Docker engine at hand (it has not been built here); keep it simple.

ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Dev dependencies too, for the compiler. Scripts stay off, and the image's own Node runs
# tsc: the pinned `node` devDependency is not installed without its script.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=dev leaves out the pinned `node` devDependency (and its binary download), vitest,
# typescript, testcontainers... No production dependency needs an install script
# (@node-rs/argon2 ships prebuilt binaries as optional packages), so scripts stay off.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
# PORT (8080) and OPS_PORT (8081) keep their defaults; DATA_DIR moves to the volume.
# MALLOC_ARENA_MAX and MALLOC_MMAP_THRESHOLD_ as npm start sets them (docs/performance.md, "Memory settings"): glibc
# keeps a malloc arena per thread otherwise, and what V8's compiler threads freed.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=16384
WORKDIR /app
# Application files stay owned by root, read-only to the `node` user that runs them.
COPY --from=deps /app/node_modules ./node_modules
# .dockerignore is an allowlist: package.json, tsconfig, src/, config/, bin/ and examples/ only.
COPY . .
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data && chmod 0700 /data
VOLUME ["/data"]
USER node
EXPOSE 8080 8081
# Slim images have no curl: ask Node's fetch. /healthz is served on OPS_PORT only.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.OPS_PORT || 8081) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM goes straight to Node (exec form, PID 1), which drains within 10 s.
STOPSIGNAL SIGTERM
# npm start's heap flags (docs/performance.md, "Memory settings"): a full collection before the heap grows 20% past its live size;
# no allocation-site pretenuring (short-lived request objects stay in the young generation).
CMD ["node", "--max-semi-space-size=16", "--heap-growing-percent=20", "--no-allocation-site-pretenuring", "dist/main.js"]
